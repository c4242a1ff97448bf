"""A named pipe (FIFO) as an input: like `cat FIFO`, the translator waits for its writer, and
the stop signals end that wait (an open(2) that blocks until a writer comes would not hear them).
`--follow` refuses a FIFO: it has no offset to resume from. Real FIFOs, processes and signals."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import time
from pathlib import Path

import pytest
from support_fixtures import events, frames_of
from support_processes import TRANSLATOR, catches, fixture, poll


@pytest.mark.parametrize("shell", [[], ["--metrics", "tcp:127.0.0.1:0"]], ids=["direct", "anyio"])
@pytest.mark.parametrize(("signum", "status"), [(signal.SIGTERM, 143), (signal.SIGINT, 130), (signal.SIGHUP, 129)])
def test_a_stop_signal_ends_the_wait_for_a_fifo_s_writer(tmp_path: Path, shell: list[str], signum: int,
                                                        status: int) -> None:
    fifo = tmp_path / "events.fifo"
    os.mkfifo(fifo)
    proc = subprocess.Popen([TRANSLATOR, *shell, fixture("thinking"), str(fifo)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        poll(lambda: catches(proc.pid, signum))  # its handlers are set: the FIFO is next
        out = b""
        assert proc.stdout is not None
        while b'"result"' not in out:  # the first input is translated: it waits on the FIFO now
            chunk = os.read(proc.stdout.fileno(), 65536)
            assert chunk
            out += chunk
        proc.send_signal(signum)
        assert proc.wait(timeout=30) == status
    finally:
        proc.kill()
        proc.wait()
    assert proc.stderr is not None
    assert [line for line in proc.stderr.read().splitlines() if b"metrics on" not in line] == []
    assert [f["type"] for f in frames_of(out + proc.stdout.read())][-1] == "result"


def test_a_fifo_s_writer_is_waited_for_then_read(tmp_path: Path) -> None:
    """The wait is kept: what the writer sends, when it comes, is the input."""
    fifo = tmp_path / "events.fifo"
    os.mkfifo(fifo)
    proc = subprocess.Popen([TRANSLATOR, "--results-only", str(fifo)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    poll(lambda: catches(proc.pid, signal.SIGTERM))
    assert proc.poll() is None  # no writer yet: still waiting (an empty input would have ended it)
    with open(fifo, "wb") as writer:
        writer.write(events("tool_use_two_turns"))
    out, err = proc.communicate(timeout=30)
    assert (proc.returncode, err) == (0, b"")
    assert [f["result"] for f in frames_of(out)] == ["There are 3 files."]


def test_follow_refuses_a_fifo_at_once_and_when_the_file_becomes_one(tmp_path: Path) -> None:
    fifo = tmp_path / "stdout.ndjson"
    os.mkfifo(fifo)
    proc = subprocess.run([TRANSLATOR, "--follow", str(fifo)], capture_output=True, timeout=30)
    said = f"translator: --follow {fifo}: is a FIFO, not a file to follow (read it as an input: translator FIFO)\n"
    assert (proc.returncode, proc.stdout, proc.stderr.decode()) == (66, b"", said)
    fifo.unlink()
    later = subprocess.Popen([TRANSLATOR, "--follow", str(fifo)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert later.stderr is not None  # following: waiting for the file to appear, as it says
    if not select.select([later.stderr], [], [], 30)[0]:
        later.kill()  # not left behind by a failing test
        raise AssertionError("the follower did not say it waits")
    assert later.stderr.readline().decode() == f"translator: --follow {fifo}: No such file or directory (yet); waiting for it\n"
    os.mkfifo(fifo)
    out, err = later.communicate(timeout=30)
    assert (later.returncode, out, err.decode()) == (74, b"", said)


def waits_for_a_partner(pid: int) -> bool:
    """Whether the process is blocked opening a FIFO that has no one at its other end (Linux:
    its wchan). Where the sandbox hides the wchan (no such file, or "0" whatever the process
    does), whether it sleeps without using the CPU for a second: before the reject file is open
    the command waits on nothing else."""
    try:
        with open(f"/proc/{pid}/wchan") as f:
            wchan = f.read()
    except FileNotFoundError:
        wchan = "0"
    if wchan not in ("", "0"):
        return wchan == "wait_for_partner"
    if (before := sleeping(pid)) is None:
        return False
    time.sleep(1.0)
    return before == sleeping(pid)


def sleeping(pid: int) -> int | None:
    """The CPU time (clock ticks) the process has used, if it sleeps now (/proc/PID/stat)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    return int(fields[11]) + int(fields[12]) if fields[0] == "S" else None


@pytest.mark.parametrize("shell", [[], ["--metrics", "tcp:127.0.0.1:0"]], ids=["direct", "anyio"])
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_a_stop_signal_ends_the_wait_for_a_reject_fifo_s_reader(tmp_path: Path, shell: list[str], signum: int) -> None:
    """The reject file is opened before the shell's handlers (which only note a signal) and,
    under the event loop, before asyncio's first SIGINT handler (which only cancels a task):
    the signal's own action ends the wait (for SIGINT, Python's: 130)."""
    fifo = tmp_path / "rejects.fifo"
    os.mkfifo(fifo)
    proc = subprocess.Popen([TRANSLATOR, *shell, "--reject-file", str(fifo), fixture("thinking")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        poll(lambda: waits_for_a_partner(proc.pid))
        proc.send_signal(signum)
        assert proc.wait(timeout=30) == (130 if signum == signal.SIGINT else -signum)
    finally:
        proc.kill()
        proc.wait()
    assert proc.stdout is not None and proc.stdout.read() == b""


def test_a_reject_fifo_s_reader_gets_the_rejected_lines(tmp_path: Path) -> None:
    fifo = tmp_path / "rejects.fifo"
    os.mkfifo(fifo)
    proc = subprocess.Popen([TRANSLATOR, "--results-only", "--reject-file", str(fifo), "-"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    poll(lambda: waits_for_a_partner(proc.pid))
    with open(fifo, "rb") as reader:
        out, err = proc.communicate(b"not json\n" + events("tool_use_two_turns"), timeout=30)
        assert reader.read() == b"not json\n"
    assert proc.returncode == 0 and [f["result"] for f in frames_of(out)] == ["There are 3 files."]
    assert err.decode().startswith("translator: <stdin>:1: invalid JSON")


@pytest.mark.parametrize("shell", [[], ["--metrics", "tcp:127.0.0.1:0"]], ids=["direct", "anyio"])
def test_a_signal_during_the_wait_for_a_reject_fifo_s_reader_leaves_stdout_s_flags_as_they_were(
        tmp_path: Path, shell: list[str]) -> None:
    """Ended by the signal's own action, the command cannot put stdout's flags back: the reject
    file is opened before a pipe's stdout is made non-blocking (a flag the pipe's other writers
    share: `{ translator ...; cat more; } | consumer` would hand `cat` a non-blocking pipe)."""
    fifo = tmp_path / "rejects.fifo"
    os.mkfifo(fifo)
    r, w = os.pipe()
    try:
        proc = subprocess.Popen([TRANSLATOR, *shell, "--reject-file", str(fifo), fixture("thinking")], stdout=w,
                                stderr=subprocess.DEVNULL)
        try:
            poll(lambda: waits_for_a_partner(proc.pid))
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=30) == -signal.SIGTERM
        finally:
            proc.kill()
            proc.wait()
        assert os.get_blocking(w)
    finally:
        os.close(r)
        os.close(w)
