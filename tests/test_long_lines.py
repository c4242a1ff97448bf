"""Long lines and memory: the bytes of one line are held at most once. Measured end to end as
the peak RSS of the installed command (its own rusage, from wait4)."""

from __future__ import annotations

import os
import subprocess
import threading
from pathlib import Path

import orjson
from conftest import events, frames_of
from test_cli import TRANSLATOR

MIB = 1 << 20


def peak_rss_mib(tmp_path: Path, args: list[str], pieces: list[bytes] | None = None, repeat: int = 1) -> tuple[float, bytes, bytes]:
    """Run the command with `pieces` written to its stdin (the middle one `repeat` times, so
    that no big buffer exists on our side); its peak RSS, stdout and stderr."""
    out, err = tmp_path / "out", tmp_path / "err"
    with open(out, "wb") as o, open(err, "wb") as e:
        proc = subprocess.Popen([TRANSLATOR, *args], stdin=subprocess.PIPE, stdout=o, stderr=e)
        assert proc.stdin is not None

        def feed() -> None:
            assert proc.stdin is not None
            for i, piece in enumerate(pieces or []):
                for _ in range(repeat if i == 1 else 1):
                    proc.stdin.write(piece)
            proc.stdin.close()

        writer = threading.Thread(target=feed)
        writer.start()
        _, status, usage = os.wait4(proc.pid, 0)
        writer.join()
        proc.returncode = os.waitstatus_to_exitcode(status)
    assert proc.returncode == 0, err.read_bytes()
    return usage.ru_maxrss / 1024, out.read_bytes(), err.read_bytes()


def test_an_over_long_line_is_held_once_and_never_joined(tmp_path: Path) -> None:
    base, _, _ = peak_rss_mib(tmp_path, ["--results-only"], [events("thinking")])
    limit = 32 * MIB
    head, chunk, tail = b'{"type":"TurnStart","x":"', b"x" * MIB, b'"}\n' + events("thinking")
    peak, out, err = peak_rss_mib(
        tmp_path, ["--results-only", "--max-line-bytes", str(limit), "--reject-file", str(tmp_path / "rejects")],
        [head, chunk, tail], repeat=150,
    )
    assert frames_of(out)[-1]["result"] == "17 * 23 = 391."
    assert err.startswith(f"translator: <stdin>:1: line longer than {limit} bytes ({150 * MIB + 27} bytes)".encode())
    assert (tmp_path / "rejects").stat().st_size == 150 * MIB + 28
    # the unfinished line up to the limit, once, and reading buffers; it used to be twice
    assert peak - base < 32 + 16, (base, peak)


def test_a_legal_long_line_costs_at_most_twice_its_size_on_top(tmp_path: Path) -> None:
    base, _, _ = peak_rss_mib(tmp_path, ["--results-only"], [events("thinking")])
    size = 24 * MIB
    text = orjson.dumps({"type": "AssistantTextDelta", "turn_index": 0, "content_block_index": 0, "text": "x" * size})
    start = b'{"type":"TurnStart","turn_index":0,"message_id":"m","model":"claude-sonnet-4-5"}\n'
    end = b'\n{"type":"RunEnd","final_messages":[],"total_usage":{"input_tokens":1,"output_tokens":1},"turn_count":0,"stopped_for":"EndOfTurn"}\n'
    peak, out, _ = peak_rss_mib(tmp_path, ["--results-only"], [start + text[: MIB], text[MIB:], end])
    (result,) = frames_of(out)
    assert len(result["result"]) == size  # the fallback reply: the long delta, decoded at the end
    # the line, once joined, plus the decoded text (orjson briefly needs twice it); the
    # pieces it came in, the joined copy for the fallback and the output are not all at once
    assert peak - base < 3 * 24 + 12, (base, peak)
