"""Compression bombs, in every mode: a small gzip or zstd input that expands to gigabytes is
inflated a piece at a time (memory within a line's budget), is cut off once it expands more
than --max-inflate-ratio times past the first --max-line-bytes (exit 65, said once), and a
stop signal is heard between its pieces. Blank lines, however many, cost what short lines do."""

from __future__ import annotations

import contextlib
import importlib
import os
import re
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from support_fixtures import EXPECTED, Reap, events
from support_processes import TRANSLATOR, Server, peak_rss_kb, poll, read_all

import translator

zstd: Any = importlib.import_module("backports.zstd")
FRAME = zstd.compress(b"\0" * (64 << 20))  # 64 MiB of zeros (no newline) in ~2 KB
BOMB = FRAME * 16  # 1 GiB in ~33 KB: frames one after another are one stream
LINE = ["--max-line-bytes", str(1 << 20)]
BOUND_KB = 400 << 10  # the peak RSS a bomb may cost: the interpreter, a line, a few pieces
SAID = re.compile(
    r"zstd: the data expands more than 1000 times \(\d+ bytes from \d+\): a compression bomb\? "
    r"Not read further \(--max-inflate-ratio\)$"
)


def waited(args: list[str], stdin: bytes | None = None, timeout: float = 60) -> tuple[int, str, int]:
    """The command run to its end: exit status, stderr, and the peak RSS (kB) of it and of
    any worker it waited for (getrusage's ru_maxrss: the largest)."""
    proc = subprocess.Popen([TRANSLATOR, *args], stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err: list[bytes] = []
    reader = threading.Thread(target=lambda: err.append(proc.stderr.read()))  # type: ignore[union-attr]
    reader.start()
    if stdin is not None:
        assert proc.stdin is not None
        with contextlib.suppress(BrokenPipeError):
            proc.stdin.write(stdin)
            proc.stdin.close()
    timer = threading.Timer(timeout, proc.kill)
    timer.start()
    try:
        _, status, usage = os.wait4(proc.pid, 0)
    finally:
        timer.cancel()
    proc.returncode = os.waitstatus_to_exitcode(status)
    reader.join()
    return proc.returncode, err[0].decode(), usage.ru_maxrss


@pytest.mark.parametrize("mode", ["file", "stdin", "out-dir"])
def test_a_zstd_bomb_is_cut_off_within_a_lines_budget(mode: str, tmp_path: Path) -> None:
    path = tmp_path / "in" / "bomb.ndjson"
    path.parent.mkdir()
    path.write_bytes(BOMB)
    if mode == "file":
        status, err, rss = waited([*LINE, str(path)])
    elif mode == "stdin":
        status, err, rss = waited([*LINE], stdin=BOMB)
    else:
        status, err, rss = waited([*LINE, "--out-dir", str(tmp_path / "out"), str(path.parent)])
    assert status == 65, err
    assert rss < BOUND_KB, f"peak RSS {rss >> 10} MB"
    first = err.splitlines()[0 if mode != "out-dir" else 1]
    if mode == "out-dir":
        assert first.startswith("translator: failed: bomb.ndjson: broken zstd: ") and SAID.search(first), err
        assert not (tmp_path / "out" / "bomb.enriched.jsonl").exists()
    else:
        label = str(path) if mode == "file" else "<stdin>"
        assert first.startswith(f"translator: {label}: zstd: ") and SAID.search(first), err


def test_a_bomb_sent_to_the_service_ends_its_connection_only(tmp_path: Path) -> None:
    srv = Server(f"unix:{tmp_path / 's.sock'}", *LINE)
    try:
        with srv.connect() as sock:
            sock.sendall(BOMB)
            sock.shutdown(socket.SHUT_WR)
            assert read_all(sock) == b""
        with srv.connect() as sock:  # the next client is served as ever
            sock.sendall(events("thinking"))
            sock.shutdown(socket.SHUT_WR)
            assert read_all(sock).count(b'"type":"result"') == 1
        rss = peak_rss_kb(srv.proc.pid)
    finally:
        status, err = srv.stop()
    assert status == 143 and rss < BOUND_KB, (status, rss)
    assert SAID.search(err.decode().splitlines()[0]), err


def test_a_followed_bomb_is_cut_off(tmp_path: Path, reap: Reap) -> None:
    path = tmp_path / "bomb.ndjson.zst"
    path.write_bytes(BOMB)
    proc = reap(subprocess.Popen([TRANSLATOR, "--follow", str(path), *LINE], stdin=subprocess.DEVNULL,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    out, err = proc.communicate(timeout=60)  # broken compressed data ends the follow
    assert (proc.returncode, out) == (65, b""), err
    assert SAID.search(err.decode().splitlines()[0]), err


def test_without_the_ratio_guard_a_bomb_is_still_read_in_pieces() -> None:
    """--max-inflate-ratio 0: the whole GiB is read, its one line skipped, held no more than
    a line's budget at a time."""
    status, err, rss = waited([*LINE, "--max-inflate-ratio", "0"], stdin=BOMB)
    assert status == 0 and err == (
        "translator: <stdin>:1: line longer than 1048576 bytes (1073741824 bytes): " + "\\x00" * 80 + "\n"
    )
    assert rss < BOUND_KB, f"peak RSS {rss >> 10} MB"


def test_the_library_cuts_a_bomb_off() -> None:
    said: list[str] = []
    assert list(translator.translate(BOMB, max_line_bytes=1 << 20, on_diagnostic=said.append)) == []
    assert said[0].startswith("translator: <stream>: zstd: ") and SAID.search(said[0]), said


@pytest.mark.parametrize("mode", ["stdin", "metrics", "follow", "listen"])
def test_a_stop_signal_is_heard_inside_a_bomb(mode: str, tmp_path: Path, reap: Reap) -> None:
    """The rejected line streams to a FIFO we drain: once some of it has come, the command is
    inside the bomb, and SIGTERM ends it at once (not once 2 GiB are inflated)."""
    bomb = FRAME * 32  # 2 GiB: read whole without the guard
    fifo = tmp_path / "rejects"
    os.mkfifo(fifo)
    rfd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # before the command opens it for writing
    drained = [0]

    def drain() -> None:
        import select

        while True:
            select.select([rfd], [], [], 1)
            try:
                chunk = os.read(rfd, 1 << 20)
            except BlockingIOError:
                continue
            if not chunk and drained[0]:
                return
            drained[0] += len(chunk)

    args = [*LINE, "--max-inflate-ratio", "0", "--reject-file", str(fifo)]
    stdin: Any = subprocess.PIPE
    if mode == "metrics":
        args += ["--metrics", "tcp:127.0.0.1:0"]
    elif mode == "follow":
        (tmp_path / "bomb.zst").write_bytes(bomb)
        args += ["--follow", str(tmp_path / "bomb.zst")]
        stdin = subprocess.DEVNULL
    elif mode == "listen":
        args += ["--listen", f"unix:{tmp_path / 's.sock'}", "--grace", "0.5"]
        stdin = subprocess.DEVNULL
    proc = reap(subprocess.Popen([TRANSLATOR, *args], stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    draining = threading.Thread(target=drain, daemon=True)
    draining.start()
    sock = socket.socket(socket.AF_UNIX)
    send: Any = None
    if mode in ("stdin", "metrics"):
        send = proc.stdin.write  # type: ignore[union-attr]
    elif mode == "listen":
        poll(lambda: os.path.exists(tmp_path / "s.sock"))
        sock.connect(str(tmp_path / "s.sock"))
        send = sock.sendall
    if send is not None:
        threading.Thread(target=quietly, args=(send, bomb), daemon=True).start()
    poll(lambda: drained[0] > 4 << 20, timeout=10)  # inside the bomb's one line
    signalled = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=20)
    took = time.monotonic() - signalled
    assert proc.returncode == 143, proc.stderr.read()  # type: ignore[union-attr]
    assert took < 5, f"{took:.1f} s after SIGTERM"
    assert drained[0] < 32 * (64 << 20)  # not read to its end (how far it got before the signal is the load's)
    sock.close()
    draining.join(timeout=10)  # the writer gone, the drain sees the end (its fd closed under it: EBADF)
    os.close(rfd)


def quietly(send: Any, data: bytes) -> None:
    """Write what the command may stop reading (it ends on the signal)."""
    with contextlib.suppress(OSError):
        send(data)


def test_blank_lines_cost_what_short_lines_do() -> None:
    """64 MiB of blank lines (2 KB as zstd, read whole without the guard) before a run: each
    is counted (the bad line after them is said with its number), none is held as a line of
    its own (the chunks of blank lines were split into lists of 64 million lines: 1.1 GB)."""
    plain = events("tool_use_two_turns")
    data = zstd.compress(b"\n" * (64 << 20) + b"oops\n\n" + plain)
    status, err, rss = waited(["--max-inflate-ratio", "0"], stdin=data)
    assert status == 0
    assert err.startswith(f"translator: <stdin>:{(64 << 20) + 1}: invalid JSON"), err
    assert rss < BOUND_KB, f"peak RSS {rss >> 10} MB"
    proc = subprocess.run([TRANSLATOR, "--session-id", "SESSION", "--clock", "estimated"],
                          input=b"\n\n\n" + plain.replace(b"\n", b"\n\n\n"), capture_output=True, timeout=60)
    assert (proc.returncode, proc.stderr) == (0, b"")
    assert proc.stdout == (EXPECTED / "tool_use_two_turns.enriched.jsonl").read_bytes()
