"""A child process that leads a process group of its own, and the end of that whole group.

Signalling the child's pid reaches the child alone: a shell wrapper that runs the agent
without `exec`, a tool's subprocess or an MCP server started by the agent would outlive it
(reparented, still able to edit files). The group is signalled instead, and ended by a ladder
(SIGINT: the agent's own cancel, which saves its session; then SIGTERM; then SIGKILL), each
rung given its grace before the next. A member is alive until it has exited: a zombie (a dead
process its parent has not reaped, as an init that does not reap leaves them) is not.

`step()` is the ladder one tick at a time, for a loop that also reads the child's pipes;
`end()` climbs it to the top, blocking.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from typing import Any

# (signal, seconds the group is given to be gone before the next rung).
# SIGINT's 3 s plus the rest stay inside the Agent SDK's 5 s between its SIGTERM and SIGKILL.
LADDER: tuple[tuple[int, float], ...] = ((signal.SIGINT, 3.0), (signal.SIGTERM, 0.5), (signal.SIGKILL, 1.0))
# For what is left once the agent itself has gone: no cancel to wait for.
LEFTOVERS: tuple[tuple[int, float], ...] = LADDER[1:]
TICK = 0.05  # seconds between looks at a group being ended


class ProcessGroup:
    """`Popen(argv, **popen)` as the leader of a new process group (its pgid is its pid)."""

    def __init__(self, argv: list[str], **popen: Any) -> None:
        self.proc: subprocess.Popen[bytes] = subprocess.Popen(argv, process_group=0, **popen)
        self.pgid = self.proc.pid
        self._ladder: tuple[tuple[int, float], ...] = ()
        self._rung = 0
        self._due = 0.0  # when the next rung is due (time.monotonic())

    def signal(self, signum: int) -> None:
        """Every member of the group; nothing once none is left."""
        if self.gone():  # (its pgid may then be another's: never signalled again)
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pgid, signum)

    def gone(self) -> bool:
        """The leader has exited and been reaped, and no member is alive."""
        return self.proc.poll() is not None and not members(self.pgid)

    @property
    def ending(self) -> bool:
        return bool(self._ladder)

    def escalate(self, ladder: tuple[tuple[int, float], ...] = LADDER, now: float | None = None) -> None:
        """Start ending the group (its first signal now); a second call does not start over."""
        if self._ladder:
            return
        self._ladder, self._rung, self._due = ladder, 0, time.monotonic() if now is None else now
        self.step(self._due)

    def step(self, now: float | None = None) -> float | None:
        """Send what is due; seconds until the next look (None: not ending, or gone)."""
        if not self._ladder or self.gone():
            return None
        now = time.monotonic() if now is None else now
        if now >= self._due and self._rung < len(self._ladder):
            signum, grace = self._ladder[self._rung]
            self.signal(signum)
            self._rung += 1
            self._due = now + grace
        return max(0.0, min(TICK, self._due - now)) if self._rung < len(self._ladder) else TICK

    def end(self, ladder: tuple[tuple[int, float], ...] = LADDER) -> int:
        """Climb the ladder (from where it is) until the group is gone; the leader's status."""
        self.escalate(ladder)
        deadline = time.monotonic() + sum(grace for _, grace in self._ladder)
        while (wait := self.step()) is not None and time.monotonic() < deadline:
            time.sleep(wait or TICK)
        return self.proc.wait()


def members(pgid: int) -> list[int]:
    """The live processes of a group: /proc read once (a zombie is not alive). Where there is
    no /proc, whether the group can still be signalled at all."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:  # no member at all, not even a zombie: /proc is not read
        return []
    except PermissionError:
        pass
    try:
        names = os.listdir("/proc")
    except OSError:
        return [pgid]
    alive = []
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:  # exited meanwhile
            continue
        # pid (comm) state ppid pgrp ...: comm may hold spaces and parentheses
        fields = stat[stat.rfind(b")") + 2 :].split(b" ", 3)
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
            alive.append(int(name))
    return alive
