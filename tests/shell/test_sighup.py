"""SIGHUP (the terminal closing) is handled like SIGTERM: a `cancelled` result, exit 129, and
the frame being written when it came is finished, not cut."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import orjson
from support_fixtures import Reap, events, frames_of, lines_of
from support_processes import TRANSLATOR, Live


def test_sighup_closes_the_open_run_as_cancelled() -> None:
    live = Live("--exit-status")
    live.send(b"\n".join(lines_of("tool_use_two_turns")[:8]) + b"\n")
    live.read_frames(3)
    live.proc.send_signal(signal.SIGHUP)
    code, rest, err = live.finish()
    assert code == 129
    (result,) = frames_of(rest)
    assert result["subtype"] == "cancelled" and result["is_error"] is True
    assert err == b""


def test_sighup_in_the_middle_of_a_write_never_cuts_the_last_line(tmp_path: Path) -> None:
    source = tmp_path / "big.ndjson"
    source.write_bytes(events("tool_use_two_turns") * 20000)  # megabytes of output
    read_end, write_end = os.pipe()
    proc = subprocess.Popen(
        [TRANSLATOR, "--include-partial-messages", str(source)], stdout=write_end, stderr=subprocess.PIPE
    )
    os.close(write_end)
    out = os.read(read_end, 65536)  # the translator is now blocked on a full pipe, mid-output
    time.sleep(0.3)
    proc.send_signal(signal.SIGHUP)
    while chunk := os.read(read_end, 65536):  # a slow consumer, but one that keeps reading
        out += chunk
        time.sleep(0.001)
    os.close(read_end)
    assert proc.wait(timeout=30) == 129
    assert out.endswith(b"\n")
    frames = [orjson.loads(line) for line in out.splitlines()]  # every line whole
    assert frames[-1]["type"] == "result"


def _started_with_sighup_ignored() -> None:
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # as `nohup` starts a command


def test_a_command_started_under_nohup_keeps_ignoring_sighup(reap: Reap) -> None:
    """`nohup translator …` must outlive the terminal: a SIGHUP ignored at start stays ignored,
    and the run goes on to its own result."""
    lines = lines_of("tool_use_two_turns")
    proc = reap(subprocess.Popen(
        [TRANSLATOR, "--exit-status"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        preexec_fn=_started_with_sighup_ignored,
    ))
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(b"\n".join(lines[:8]) + b"\n")
    proc.stdin.flush()
    first = proc.stdout.readline()  # the command is reading: its handlers are in place
    assert orjson.loads(first)["type"] == "system"
    proc.send_signal(signal.SIGHUP)
    time.sleep(0.2)
    assert proc.poll() is None  # still running
    out, err = proc.communicate(b"\n".join(lines[8:]) + b"\n", timeout=30)
    assert proc.returncode == 0
    assert frames_of(out)[-1]["subtype"] == "success"
    assert err == b""


def test_a_follower_started_under_nohup_keeps_ignoring_sighup(tmp_path: Path, reap: Reap) -> None:
    """The same for the shells that run under anyio (`--follow`): SIGHUP ignored, SIGTERM not."""
    log = tmp_path / "events.jsonl"
    log.write_bytes(b"\n".join(lines_of("tool_use_two_turns")[:8]) + b"\n")
    proc = reap(subprocess.Popen(
        [TRANSLATOR, "--follow", str(log)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        preexec_fn=_started_with_sighup_ignored,
    ))
    assert proc.stdout is not None
    assert orjson.loads(proc.stdout.readline())["type"] == "system"
    proc.send_signal(signal.SIGHUP)
    time.sleep(0.2)
    assert proc.poll() is None
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 143
    assert frames_of(out)[-1]["subtype"] == "cancelled"
