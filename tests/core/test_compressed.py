"""Compressed input (gzip, zstd) is told by its first bytes and read in every mode: files,
stdin, --follow, --listen and the library API."""

from __future__ import annotations

import gzip
import importlib
import socket
import subprocess
from pathlib import Path
from typing import Any

import pytest
from support_fixtures import EXPECTED, events, frames_of
from support_processes import TRANSLATOR, Follower, Server, exchange, run

import translator
from translator.core.compressed import CorruptInput, Decoder
from translator.encoders.observed import session_id_of as session_id

zstd: Any = importlib.import_module("backports.zstd")  # what the runtime dependency brings
NAME = "tool_use_two_turns"
PLAIN = events(NAME)
GOLDEN = (EXPECTED / f"{NAME}.enriched.jsonl").read_bytes()
COMPRESS = {"gzip": gzip.compress, "zstd": zstd.compress}


@pytest.mark.parametrize("kind", COMPRESS)
def test_a_compressed_file_and_stdin_read_as_the_plain_one(kind: str, tmp_path: Path) -> None:
    packed = COMPRESS[kind](PLAIN)
    path = tmp_path / "run.log"  # the name says nothing: the bytes do
    path.write_bytes(packed)
    proc = run("--session-id", "SESSION", str(path))
    assert (proc.returncode, proc.stderr, proc.stdout) == (0, b"", GOLDEN)
    piped = run("--session-id", "SESSION", "--clock", "estimated", stdin=packed)
    assert (piped.returncode, piped.stderr, piped.stdout) == (0, b"", GOLDEN)


def test_gzip_members_one_after_another_are_one_stream(tmp_path: Path) -> None:
    half = len(PLAIN) // 2  # the split falls inside a line
    packed = gzip.compress(PLAIN[:half]) + b"\0\0" + gzip.compress(PLAIN[half:])
    proc = run("--session-id", "SESSION", "--clock", "estimated", stdin=packed)
    assert (proc.returncode, proc.stderr, proc.stdout) == (0, b"", GOLDEN)


@pytest.mark.parametrize("kind", COMPRESS)
def test_damaged_or_cut_compressed_input_is_one_line_and_65(kind: str) -> None:
    packed = COMPRESS[kind](PLAIN)
    cut = run("--session-id", "S", stdin=packed[: len(packed) * 2 // 3])
    assert cut.returncode == 65
    first, *rest = cut.stderr.decode().splitlines()
    assert first == f"translator: <stdin>: {kind}: the compressed data is cut short"
    frames = frames_of(cut.stdout)
    assert frames or kind == "zstd"  # zstd gave nothing of its one cut block
    if frames:  # a run that began still gets its result, and the cut is said
        assert (frames[-1]["type"], frames[-1]["subtype"]) == ("result", "error")
        assert rest.pop().endswith(": warning: the input ended inside a run (no RunEnd); that run is closed as an error")
    assert len(rest) <= 1  # the line the cut fell in, reported as any cut line is

    damaged = packed[:20] + bytes(b ^ 0x55 for b in packed[20:40]) + packed[40:]
    proc = run(stdin=damaged)
    assert proc.returncode == 65
    (line,) = proc.stderr.decode().splitlines()
    assert line.startswith(f"translator: <stdin>: {kind}: ")


def test_following_a_complete_gz(tmp_path: Path) -> None:
    log = tmp_path / "stdout.ndjson.gz"
    log.write_bytes(gzip.compress(events("thinking")))
    follower = Follower(log)
    init, *_, result = follower.read_frames(3)
    assert init["subtype"] == "init" and result["result"] == "17 * 23 = 391."
    status, rest, err = follower.stop()
    assert (status, rest, err) == (143, b"", b"")


def test_the_service_reads_a_compressed_client(tmp_path: Path) -> None:
    srv = Server(f"unix:{tmp_path / 's.sock'}", "--clock", "estimated")
    try:
        with srv.connect() as sock:
            assert exchange(sock, zstd.compress(PLAIN)) == GOLDEN
    finally:
        status, err = srv.stop()
    assert (status, err) == (143, b"")


def test_the_library_reads_compressed_input_split_anywhere() -> None:
    packed = gzip.compress(PLAIN)
    want = list(translator.translate(PLAIN, session_id="S"))
    assert list(translator.translate(packed, session_id="S")) == want
    assert list(translator.translate([packed[i : i + 1] for i in range(len(packed))], session_id="S")) == want
    seen: list[str] = []
    frames = list(translator.translate(packed[:-9], session_id="S", on_diagnostic=seen.append))
    assert seen == ["translator: <stream>: gzip: the compressed data is cut short"]
    assert frames[-1]["type"] == "result"


def test_plain_input_that_begins_like_a_magic_number_is_plain() -> None:
    decoder = Decoder()
    decoder.push(b"\x28")
    assert decoder.pull() == b""  # could still be zstd
    decoder.push(b"\xb5")
    assert decoder.pull() == b""
    decoder.push(b"x\n")
    assert decoder.pull() == b"\x28\xb5x\n" and decoder.kind is None
    short = Decoder()
    short.push(b"\x1f")
    assert short.pull() == b"" and short.finish() == b"\x1f"
    broken = Decoder()
    broken.push(gzip.compress(b"abc")[:5])
    assert broken.pull() == b""
    with pytest.raises(CorruptInput, match="cut short"):
        broken.finish()


def test_plain_input_pays_one_look() -> None:
    decoder = Decoder()
    chunk = b'{"type":"TurnStart"}\n'
    decoder.push(chunk)
    assert decoder.pull() == chunk and decoder.kind is None
    decoder.push(chunk)
    assert decoder.pull() is chunk  # passed through untouched, not copied


def test_a_socket_client_may_send_gzip_over_tcp() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    srv = Server(f"tcp:{port}", "--clock", "estimated")
    try:
        with srv.connect() as sock:
            assert exchange(sock, gzip.compress(PLAIN)) == GOLDEN
    finally:
        srv.stop()


def test_batch_is_not_broken_by_compressed_input(tmp_path: Path) -> None:
    src = tmp_path / "in"
    src.mkdir()
    (src / "a.ndjson.gz").write_bytes(gzip.compress(PLAIN))
    proc = subprocess.run([TRANSLATOR, "--out-dir", str(tmp_path / "out"), str(src)],
                          capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr


def test_a_batch_reads_zstd_as_every_mode_does(tmp_path: Path) -> None:
    for name, data in (("plain", PLAIN), ("packed", zstd.compress(PLAIN))):
        (tmp_path / name).mkdir()
        (tmp_path / name / "a.ndjson").write_bytes(data)  # the name says nothing: the bytes do
        proc = subprocess.run([TRANSLATOR, "--out-dir", str(tmp_path / f"{name}-out"), str(tmp_path / name)],
                              capture_output=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
    written = {name: (tmp_path / f"{name}-out" / "a.enriched.jsonl").read_bytes().replace(  # ids of the full paths apart
        session_id(str(tmp_path / name / "a.ndjson")).encode(), b"S") for name in ("plain", "packed")}
    assert written["packed"] == written["plain"] and written["plain"].count(b'"type":"result"') == 1
