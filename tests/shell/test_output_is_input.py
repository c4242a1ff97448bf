"""An output that is an input: refused before anything is opened for writing (64, one line),
the input untouched; and `-o FILE` left as it was when the run fails before its first frame."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest
from support_fixtures import Reap, events
from support_processes import TRANSLATOR, poll, run

PLAIN = events("thinking")


@pytest.mark.parametrize("how", ["-o x x", "-o link x", "-o x < x", "--reject-file x x", "--follow x -o x"])
def test_an_output_that_is_the_input_is_refused(how: str, tmp_path: Path) -> None:
    x = tmp_path / "x"
    x.write_bytes(PLAIN)
    (tmp_path / "link").symlink_to(x)
    words = how.split()
    stdin = None
    if "<" in words:
        stdin = x.open("rb")
        words = words[: words.index("<")]
    args = [str(tmp_path / w) if w in ("x", "link") else w for w in words]
    proc = subprocess.run([TRANSLATOR, *args], stdin=stdin or subprocess.DEVNULL, capture_output=True, timeout=30)
    flag, path = args[0], args[1]
    if flag == "--follow":
        flag, path = args[2], args[3]
    what = "the file followed" if "--follow" in args else "the input <stdin>" if stdin else f"the input {x}"
    harm = "overwrite" if flag == "-o" else "append its rejects to"
    flag = "--output" if flag == "-o" else flag
    assert (proc.returncode, proc.stdout) == (64, b"")
    assert proc.stderr.decode() == f"translator: {flag} {path}: is {what}; it would {harm} what it reads\n"
    assert x.read_bytes() == PLAIN  # untouched: before, truncated to 0 bytes or its translation
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link", "x"]  # no temporary left


def test_an_output_that_will_be_the_followed_file_is_refused(tmp_path: Path) -> None:
    y = tmp_path / "y"
    proc = run("--follow", str(y), "-o", str(y))
    assert (proc.returncode, proc.stderr) == (64, f"translator: --output {y}: is the file followed; it would read "
                                                  "its own output\n".encode())
    assert not y.exists()


def test_a_run_failing_before_its_first_frame_leaves_the_output_as_it_was(tmp_path: Path) -> None:
    out = tmp_path / "o.jsonl"
    out.write_bytes(b"old\n")
    proc = run("-o", str(out), str(tmp_path / "nonexistent"))
    assert proc.returncode == 66 and out.read_bytes() == b"old\n"  # it was emptied
    new = tmp_path / "new.jsonl"
    assert run("-o", str(new), str(tmp_path / "nonexistent")).returncode == 66 and not new.exists()
    # an input that is there but empty is translated to nothing, as ever
    (tmp_path / "empty").write_bytes(b"")
    assert run("-o", str(out), str(tmp_path / "empty")).returncode == 0 and out.read_bytes() == b""


def test_a_followed_output_is_emptied_by_its_first_frame_not_before(tmp_path: Path, reap: Reap) -> None:
    """--follow writes -o in place: a follower stopped before any frame leaves it as it was; once
    frames come, they replace it whole (no stale tail of the old, longer content)."""
    log, out = tmp_path / "log", tmp_path / "out.jsonl"
    old = b'{"old": "frame"}\n' * 1000
    out.write_bytes(old)
    quiet = reap(subprocess.Popen([TRANSLATOR, "--follow", str(log), "-o", str(out)], stderr=subprocess.PIPE))
    assert quiet.stderr is not None
    assert b"waiting for it" in quiet.stderr.readline()
    quiet.send_signal(signal.SIGTERM)
    assert quiet.wait(timeout=20) == 143 and out.read_bytes() == old  # before: 0 bytes

    log.write_bytes(PLAIN)
    follower = reap(subprocess.Popen([TRANSLATOR, "--follow", str(log), "-o", str(out), "--session-id", "S"],
                                     stderr=subprocess.PIPE))
    poll(lambda: b'"type":"result"' in out.read_bytes())
    follower.send_signal(signal.SIGTERM)
    assert follower.wait(timeout=20) == 143
    written = out.read_bytes()
    assert written.count(b"\n") == 3 and b'{"old"' not in written
    assert os.path.getsize(out) == len(written)
