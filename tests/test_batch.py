"""--out-dir: batch replay of a directory of saved logs."""

from __future__ import annotations

import gzip
import shutil
import subprocess
from pathlib import Path

from conftest import FIXTURES, events
from test_cli import TRANSLATOR

from translator.batch import session_id


def batch(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([TRANSLATOR, *args], capture_output=True, timeout=60)


def logs(tmp_path: Path) -> Path:
    src = tmp_path / "logs"
    (src / "team").mkdir(parents=True)
    shutil.copy(FIXTURES / "tool_use_two_turns.events.jsonl", src / "one.ndjson")
    (src / "team" / "two.jsonl.gz").write_bytes(gzip.compress(events("multi_input_frames")))
    (src / "notes.txt").write_text("not a log")
    return src


def test_a_directory_is_translated_file_by_file_and_reruns_are_identical(tmp_path: Path) -> None:
    src, out = logs(tmp_path), tmp_path / "out"
    proc = batch("--out-dir", str(out), "--jobs", "2", str(src))
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*")) == [
        "one.enriched.jsonl", "team", "team/two.enriched.jsonl"]
    single = subprocess.run(
        [TRANSLATOR, "--session-id", session_id("one.ndjson"), str(src / "one.ndjson")], capture_output=True
    )
    assert (out / "one.enriched.jsonl").read_bytes() == single.stdout
    assert proc.stderr.decode().splitlines() == [
        proc.stderr.decode().splitlines()[0]]  # a summary and nothing else when not a terminal
    assert proc.stderr.startswith(b"translator: 2 translated, 0 skipped (up to date), 0 failed")

    first = {p: p.read_bytes() for p in out.rglob("*.jsonl")}
    again = batch("--out-dir", str(out), str(src))
    assert b"0 translated, 2 skipped" in again.stderr
    forced = batch("--out-dir", str(out), "--force", str(src))
    assert b"2 translated, 0 skipped" in forced.stderr
    assert {p: p.read_bytes() for p in out.rglob("*.jsonl")} == first


def test_claude_code_batch_output_is_deterministic(tmp_path: Path) -> None:
    src, out = logs(tmp_path), tmp_path / "out"
    batch("--out-dir", str(out), "--format", "claude-code", str(src))
    first = (out / "team" / "two.claude-code.jsonl").read_bytes()
    batch("--out-dir", str(out), "--format", "claude-code", "--force", str(src))
    assert (out / "team" / "two.claude-code.jsonl").read_bytes() == first
    assert first.count(b'"type":"result"') == 2


def test_failures_are_named_and_leave_nothing_behind(tmp_path: Path) -> None:
    src, out = logs(tmp_path), tmp_path / "out"
    (src / "broken.ndjson.gz").write_bytes(gzip.compress(events("thinking"))[:-12])  # cut short
    proc = batch("--out-dir", str(out), str(src))
    assert proc.returncode == 65
    assert b"translator: failed: broken.ndjson.gz:" in proc.stderr
    assert not list(out.rglob("broken*")) and not list(out.rglob(".*tmp"))
    assert (out / "one.enriched.jsonl").exists()


def test_progress_is_shown_on_a_terminal(tmp_path: Path) -> None:
    import fcntl
    import os
    import pty
    import struct
    import termios

    src, out = logs(tmp_path), tmp_path / "out"
    pid, fd = pty.fork()
    if pid == 0:  # the child: stderr (and stdout) on a pseudo-terminal 100 columns wide
        fcntl.ioctl(2, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
        os.execv(TRANSLATOR, [TRANSLATOR, "--out-dir", str(out), str(src)])
    seen = b""
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert b"2/2 files" in seen and b"100%" in seen  # tqdm: files done, bytes, rate, ETA
    assert b"2 translated, 0 skipped" in seen
