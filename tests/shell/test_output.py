"""-o/--output FILE: frames to a file, replaced atomically when it is a regular file."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from support_fixtures import EXPECTED, events, frames_of, lines_of
from support_processes import TRANSLATOR, fixture, run

GOLDEN = (EXPECTED / "tool_use_two_turns.enriched.jsonl").read_bytes()


def test_frames_go_to_the_file_and_nothing_to_stdout(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    proc = run("--session-id", "SESSION", "-o", str(out), fixture("tool_use_two_turns"))
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, b"", b"")
    assert out.read_bytes() == GOLDEN
    assert [p.name for p in tmp_path.iterdir()] == ["out.jsonl"]  # no temporary left behind
    dash = run("--session-id", "SESSION", "--output", "-", fixture("tool_use_two_turns"))
    assert dash.stdout == GOLDEN


def test_the_old_file_stays_whole_until_the_new_one_is(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    out.write_bytes(b"old\n")
    proc = subprocess.Popen([TRANSLATOR, "-o", str(out)], stdin=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdin is not None
    proc.stdin.write(b"\n".join(lines_of("tool_use_two_turns")[:8]) + b"\n")
    proc.stdin.flush()
    deadline = time.monotonic() + 30
    while not any(p.name.endswith(".tmp") and p.stat().st_size for p in tmp_path.iterdir()):
        assert time.monotonic() < deadline, "no frames were written"
        time.sleep(0.05)
    assert out.read_bytes() == b"old\n"  # frames so far are in the temporary file only
    proc.stdin.write(b"\n".join(lines_of("tool_use_two_turns")[8:]) + b"\n")
    proc.stdin.close()
    assert proc.wait(timeout=30) == 0
    assert frames_of(out.read_bytes())[-1]["result"] == "There are 3 files."
    assert [p.name for p in tmp_path.iterdir()] == ["out.jsonl"]


def test_a_failed_run_leaves_the_old_file(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    out.write_bytes(b"old\n")
    proc = run("-o", str(out), "--reject-file", "/dev/full", stdin=b"oops\n" + events("thinking"))
    assert proc.returncode == 74 and b"--reject-file /dev/full" in proc.stderr
    assert out.read_bytes() == b"old\n" and [p.name for p in tmp_path.iterdir()] == ["out.jsonl"]


def test_a_device_is_written_in_place() -> None:
    proc = run("-o", "/dev/full", fixture("thinking"))
    assert proc.returncode == 74
    assert proc.stderr.decode().splitlines() == ["translator: write error: No space left on device"]
    assert run("-o", "/dev/null", fixture("thinking")).returncode == 0


def test_an_output_that_cannot_be_created_is_73(tmp_path: Path) -> None:
    proc = run("-o", str(tmp_path / "no" / "out.jsonl"), fixture("thinking"))
    assert proc.returncode == 73
    assert proc.stderr.decode() == f"translator: --output {tmp_path / 'no' / 'out.jsonl'}: No such file or directory\n"
