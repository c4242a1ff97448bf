"""Files and stdin are translated without an event loop (translator/shell/direct.py): anyio and
asyncio are never imported, and signals still stop a quiet input, an endless one and a stuck
output, through real processes, pipes, sockets and signals."""

from __future__ import annotations

import fcntl
import os
import resource
import select
import signal
import socket
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path

import pytest
from support_fixtures import Reap, events, frames_of, lines_of
from support_processes import TRANSLATOR, catches, fixture

from translator.shell.sink import WRITE_GRACE_S

LOADED = """\
import signal, sys
import translator.cli.command as cli
status = cli.main([*sys.argv[1:]])
loaded = sorted({m.split('.')[0] for m in sys.modules} & {'anyio', 'asyncio', 'sniffio'})
restored = signal.getsignal(signal.SIGINT) is signal.default_int_handler and signal.set_wakeup_fd(-1) == -1
print(status, loaded, restored, file=sys.stderr)
"""


@pytest.mark.parametrize("stdin", ["file", "pipe"])
def test_files_and_stdin_never_import_anyio_or_asyncio(stdin: str) -> None:
    """The command's main run to its end in a fresh interpreter: no event loop was imported,
    and the signal handlers and wake-up fd it set are put back."""
    args = ["--session-id", "S", fixture("thinking"), "-"]
    command = [sys.executable, "-c", LOADED, *args]
    if stdin == "file":
        with open(fixture("tool_use_two_turns"), "rb") as f:
            proc = subprocess.run(command, stdin=f, capture_output=True, timeout=60)
    else:
        proc = subprocess.run(command, input=events("tool_use_two_turns"), capture_output=True, timeout=60)
    assert proc.stderr.decode().splitlines()[-1] == "0 [] True"
    results = [f for f in frames_of(proc.stdout) if f["type"] == "result"]
    assert [r["result"] for r in results] == ["17 * 23 = 391.", "There are 3 files."]


def test_follow_still_runs_under_anyio(tmp_path: Path) -> None:
    """The other modes keep their event loop (the test above could pass on a check that never
    sees anyio)."""
    log = tmp_path / "log.ndjson"
    log.write_bytes(b"")
    stop = ("import os, threading, time\n"
            "def stop():\n"
            "    while signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:  # until the watcher is set\n"
            "        time.sleep(0.02)\n"
            "    os.kill(os.getpid(), signal.SIGTERM)\n"
            "threading.Thread(target=stop, daemon=True).start()\n")
    code = LOADED.replace("status = ", stop + "status = ")
    proc = subprocess.run([sys.executable, "-c", code, "--follow", str(log)], capture_output=True, timeout=60)
    assert proc.stderr.decode().splitlines()[-1].startswith("143 ['anyio', 'asyncio'")


def wait_for(condition: object, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGTERM, 143), (signal.SIGINT, 130), (signal.SIGHUP, 129)])
def test_a_signal_while_a_socket_input_is_quiet_closes_the_run_as_cancelled(signum: int, status: int, reap: Reap) -> None:
    """stdin a socket that stays open and says nothing more: the wait is interrupted, the open
    run gets its cancelled result, the exit status is the signal's."""
    ours, theirs = socket.socketpair()
    proc = reap(subprocess.Popen([TRANSLATOR, "--exit-status"], stdin=theirs, stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    theirs.close()
    ours.sendall(b"\n".join(lines_of("tool_use_two_turns")[:8]) + b"\n")
    assert proc.stdout is not None and proc.stderr is not None
    seen = b""
    while seen.count(b"\n") < 3:  # the tool result is out: the translator now waits for more
        assert select.select([proc.stdout], [], [], 30)[0], f"timed out, have {seen!r}"
        chunk = os.read(proc.stdout.fileno(), 65536)
        assert chunk
        seen += chunk
    proc.send_signal(signum)
    assert proc.wait(timeout=30) == status
    rest = seen + proc.stdout.read()
    ours.close()
    assert [f["type"] for f in frames_of(rest)] == ["system", "tool_use", "tool_result", "result"]
    assert frames_of(rest)[-1]["subtype"] == "cancelled"
    assert proc.stderr.read() == b""


def test_a_signal_stops_an_endless_regular_input() -> None:
    """/dev/zero is read directly, never waited on: the signal is seen between chunks."""
    proc = subprocess.Popen([TRANSLATOR, "/dev/zero"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wait_for(lambda: catches(proc.pid, signal.SIGTERM))  # reading by now
    time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 143
    assert proc.stdout is not None and proc.stdout.read() == b""


def pending(fd: int) -> int:
    """Bytes waiting in a pipe."""
    return int.from_bytes(fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"), sys.byteorder)


def test_a_signal_while_the_output_is_stuck_gives_up_after_the_grace(tmp_path: Path) -> None:
    """Nobody reads stdout: after SIGTERM the last frames get WRITE_GRACE_S, then the command
    says so and exits with the signal's status, the pipe as full as it was."""
    big = tmp_path / "big.ndjson"
    big.write_bytes(events("tool_use_two_turns") * 20000)
    read_end, write_end = os.pipe()
    proc = subprocess.Popen([TRANSLATOR, str(big)], stdout=write_end, stderr=subprocess.PIPE)
    os.close(write_end)
    try:
        wait_for(lambda: pending(read_end) >= 65536)  # the pipe is full: the translator waits to write
        before = pending(read_end)
        proc.send_signal(signal.SIGTERM)
        signalled = time.monotonic()
        assert proc.wait(timeout=60) == 143
        waited = time.monotonic() - signalled
        assert proc.stderr is not None
        assert proc.stderr.read() == b"translator: the output did not drain after the signal; exiting\n"
        assert waited >= WRITE_GRACE_S - 0.5  # it waited the grace out, not less
        assert pending(read_end) == before
    finally:
        os.close(read_end)


def test_stdin_closed_is_said_not_waited_on() -> None:
    """With stdin closed (`<&-`) the signal wake-up pipe must not take its place (the
    translator would wait on its own pipe forever): the input cannot be read (66)."""
    proc = subprocess.run(["sh", "-c", 'exec "$0" <&-', TRANSLATOR], capture_output=True, timeout=60)
    assert (proc.returncode, proc.stderr) == (66, b"translator: <stdin>: Bad file descriptor\n")


def test_stdin_and_stdout_closed_the_output_is_not_written_into_the_wake_up_pipe() -> None:
    """With stdin and stdout closed, the wake-up pipe would take both: the frames would go into
    it, unsaid. The output's trouble is said instead (74)."""
    proc = subprocess.run(["sh", "-c", 'exec "$0" "$1" <&- >&-', TRANSLATOR, fixture("tool_use_two_turns")],
                          capture_output=True, timeout=60)
    assert (proc.returncode, proc.stderr) == (74, b"translator: write error: Bad file descriptor\n")


# Every fd from 3 to 1100 taken (as by a parent that leaves its fds open): the wake-up pipe
# and stdout are then beyond select's FD_SETSIZE (1024).
MANY_FDS = 'ulimit -n 2048 && for i in $(seq 3 1100); do eval "exec $i</dev/null"; done && exec "$0" "$@"'


@pytest.mark.skipif(0 <= resource.getrlimit(resource.RLIMIT_NOFILE)[1] < 2048, reason="needs an fd limit of 2048")
def test_fds_beyond_select_s_limit_still_wait_for_a_quiet_input_and_a_signal() -> None:
    """A pipe input, a quiet one, then SIGTERM, with every fd up to 1100 taken."""
    proc = subprocess.Popen(["bash", "-c", MANY_FDS, TRANSLATOR], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    proc.stdin.write(b"\n".join(lines_of("tool_use_two_turns")[:8]) + b"\n")
    proc.stdin.flush()
    seen = b""
    while seen.count(b"\n") < 3:  # the tool result is out: the translator now waits for more
        assert select.select([proc.stdout], [], [], 30)[0], f"timed out, have {seen!r}"
        chunk = os.read(proc.stdout.fileno(), 65536)
        assert chunk, proc.stderr.read()
        seen += chunk
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 143
    rest = seen + proc.stdout.read()
    proc.stdin.close()
    assert [f["type"] for f in frames_of(rest)] == ["system", "tool_use", "tool_result", "result"]
    assert frames_of(rest)[-1]["subtype"] == "cancelled"
    assert proc.stderr.read() == b""


def test_of_two_signals_that_come_together_the_first_counts() -> None:
    """SIGTERM, then SIGINT at once (sent from a thread, so both are caught before the main
    thread runs its handlers, which Python runs in the signals' numeric order): the status is
    the first's, as under the event loop (which reads them off the wake-up pipe in order)."""
    two = ("import os, threading, time\n"
           "def stop():\n"
           "    while signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:  # until the handlers are set\n"
           "        time.sleep(0.02)\n"
           "    time.sleep(0.2)\n"
           "    os.kill(os.getpid(), signal.SIGTERM)\n"
           "    os.kill(os.getpid(), signal.SIGINT)\n"
           "threading.Thread(target=stop, daemon=True).start()\n")
    code = LOADED.replace("status = ", two + "status = ")
    read_end, write_end = os.pipe()  # a quiet input, kept open
    try:
        proc = subprocess.run([sys.executable, "-c", code], stdin=read_end, capture_output=True, timeout=60)
    finally:
        os.close(read_end)
        os.close(write_end)
    assert proc.stderr.decode().splitlines()[-1] == "143 [] True"


def test_from_another_thread_it_fails_without_leaking_its_pipe() -> None:
    """Signals can only be waited on in the main thread: called from another, the command
    fails (as under the event loop) and leaves no fd open behind it."""
    code = ("import os, sys, threading\n"
            "import translator.cli.command as cli\n"
            "def fds(): return len(os.listdir('/proc/self/fd'))\n"
            "errors = []\n"
            "def go():\n"
            "    try:\n"
            "        cli.main([sys.argv[1]])\n"
            "    except Exception as exc:\n"
            "        errors.append(type(exc).__name__)\n"
            "before = fds()\n"
            "t = threading.Thread(target=go); t.start(); t.join()\n"
            "print(errors, fds() - before)\n")
    if not os.path.isdir("/proc/self/fd"):
        pytest.skip("needs /proc")
    proc = subprocess.run([sys.executable, "-c", code, fixture("max_turns")], capture_output=True, timeout=60)
    assert proc.stdout == b"['ValueError'] 0\n", proc.stderr


def test_diagnostics_sharing_a_slow_output_pipe_are_all_written() -> None:
    """Under `2>&1` stderr is the same pipe as stdout, which the shell makes non-blocking: a
    consumer that is slow to start reading once lost most diagnostics (EAGAIN, swallowed)."""
    bad = b"".join(b"not json %d\n" % i for i in range(5000))
    data = (events("tool_use_two_turns") + bad) * 4
    r, w = os.pipe()
    proc = subprocess.Popen([TRANSLATOR, "--include-partial-messages"], stdin=subprocess.PIPE, stdout=w, stderr=w)
    os.close(w)

    def feed() -> None:
        assert proc.stdin is not None
        proc.stdin.write(data)
        proc.stdin.close()

    feeder = threading.Thread(target=feed)
    feeder.start()
    time.sleep(1.0)  # the pipe fills while nobody reads
    out = b""
    while chunk := os.read(r, 65536):
        out += chunk
    os.close(r)
    feeder.join()
    assert proc.wait(timeout=30) == 0
    assert out.count(b": invalid JSON") == 20000
    assert out.count(b'"type":"result"') == 4
