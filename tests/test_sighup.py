"""SIGHUP (the terminal closing) is handled like SIGTERM: a `cancelled` result, exit 129, and
the frame being written when it came is finished, not cut."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import orjson
from conftest import events, frames_of, lines_of
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
