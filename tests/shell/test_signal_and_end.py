"""A stop signal that comes just before the input ends (Ctrl-C in a terminal reaches the agent,
whose output then ends, and the translator at once) counts in every shell: the open run is
`cancelled` and the status is the signal's. Under the event loop the watcher task could run
only after the end was read and lose it (exit 0, the run "ended inside a run")."""

from __future__ import annotations

import select
import signal
import subprocess

import pytest
from support_fixtures import frames_of, lines_of
from support_processes import TRANSLATOR, catches, poll


@pytest.mark.parametrize("shell", [[], ["--metrics", "tcp:127.0.0.1:0"]], ids=["direct", "anyio"])
@pytest.mark.parametrize(("signum", "status"), [(signal.SIGTERM, 143), (signal.SIGINT, 130), (signal.SIGHUP, 129)])
def test_a_signal_then_the_input_s_end_is_a_cancelled_run(shell: list[str], signum: int, status: int) -> None:
    proc = subprocess.Popen([TRANSLATOR, *shell], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    assert proc.stdin is not None
    proc.stdin.write(b"\n".join(lines_of("tool_use_two_turns")[:8]) + b"\n")  # a run left open
    proc.stdin.flush()
    poll(lambda: catches(proc.pid, signum))
    assert proc.stdout is not None
    seen = b""
    while seen.count(b"\n") < 3:  # its frames so far are out: it waits for more
        if not select.select([proc.stdout], [], [], 30)[0] or not (chunk := proc.stdout.read1(65536)):
            proc.kill()  # a command that stalls or ends early fails the test, not hangs the suite
            raise AssertionError(f"the frames so far did not come: {seen!r}")
        seen += chunk
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=30)  # which closes stdin at once: the input ends
    assert proc.returncode == status
    assert frames_of(seen + out)[-1]["subtype"] == "cancelled"
    assert [line for line in err.splitlines() if b"metrics on" not in line] == []
