"""One caliban process: spawned for one user message, its prompt written to its stdin and
closed (caliban reads stdin to EOF before it runs), its stdout handed on as it arrives, its stderr forwarded to ours (the SDK passes it to `options.stderr`).

caliban leads a process group of its own (group.py): a terminal's Ctrl-C reaches the shim
only, which passes one SIGINT on (a second one would make caliban exit without saving), and
whatever caliban or its wrapper started in that group ends with the run: once caliban has
exited and its stdout is closed (or, held open by what it left, `LINGER` seconds after it
exited), what is left of the group is ended.
"""

from __future__ import annotations

import contextlib
import errno
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import IO

from translator.core.feed import CHUNK
from translator.shim.backends.oneshot.group import LADDER, LEFTOVERS, TICK, ProcessGroup
from translator.shim.place import Place
from translator.shim.say import say

NOT_FOUND = 127  # the shell's status for a command it cannot find
SAID_AT_START = (errno.ENOENT, errno.EACCES, errno.EISDIR)  # main.unrunnable finds these before any run
LINGER = 1.0  # seconds caliban's stdout may stay open, held by what it left, after it exited
STDERR_LINE = 64 << 10  # bytes of one stderr line passed on; the rest of it is cut
CUT = f" [... cut by caliban-claude: the line was longer than {STDERR_LINE} bytes]".encode()
POLL = 0.1  # seconds between looks at whether caliban has exited, while it is quiet


class CalibanRun:
    def __init__(self, argv: list[str], place: Place) -> None:
        """`place`: the session's environment and folder, caliban's."""
        self.argv, self.place = argv, place
        self.group: ProcessGroup | None = None
        self.stderr_tail = ""  # caliban's last stderr line, for a run that ends without a result
        self._lock = threading.Lock()  # the group's ladder is climbed by the worker, started by others
        self._interrupted = False  # asked before caliban was started: its group is ended on start
        self._over = False  # run() is done with the group (or never had one)

    def run(self, prompt: str, on_output: Callable[[bytes], None]) -> int:
        """Run to the end, passing on stdout as it comes; the exit status. Whatever happens
        here (an error in `on_output` too), nothing of the group is left running."""
        data = prompt.encode()  # (before caliban starts: one it cannot be given is never started)
        try:
            with self._lock:
                pipe = subprocess.PIPE
                group = self.group = ProcessGroup(self.argv, stdin=pipe, stdout=pipe, stderr=pipe, bufsize=0,
                                                      env=dict(self.place.env), cwd=self.place.cwd)  # fmt: skip
                if self._interrupted:
                    group.escalate(LADDER)
        except OSError as exc:
            self.stderr_tail = f"cannot run {self.argv[0]}: {exc.strerror or exc}"
            if exc.errno not in SAID_AT_START:  # (a file not there, or not executable, was said at the start)
                say(self.stderr_tail)
            self._over = True
            return NOT_FOUND
        proc = group.proc
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        errors = threading.Thread(target=self._forward_stderr, args=(proc.stderr.fileno(),), daemon=True)
        try:
            errors.start()
            # (a thread: a caliban that does not read its prompt must not keep the run from its end)
            threading.Thread(target=_write_prompt, args=(proc.stdin, data), daemon=True).start()
            self._pump(group, proc.stdout.fileno(), on_output)
            while proc.poll() is None:  # stdout closed: caliban may still be saving its session
                with self._lock:
                    wait = group.step()
                with contextlib.suppress(subprocess.TimeoutExpired):  # (its exit is seen at once, not a TICK on)
                    proc.wait(TICK if wait is None else max(wait, 0.005))
        except BaseException:  # the shim's own error: caliban is stopped as on an interrupt
            with self._lock:
                group.escalate(LADDER)
            raise
        finally:
            with self._lock:
                ladder = LADDER if group.ending else LEFTOVERS
            group.end(ladder)
            self._over = True
        errors.join(timeout=2.0)
        proc.stdout.close()
        proc.stderr.close()
        return proc.wait()

    def _pump(self, group: ProcessGroup, fd: int, on_output: Callable[[bytes], None]) -> None:
        """caliban's stdout, handed on until it is closed, while the group's ladder (an
        interrupt) is climbed and what caliban left holding the pipe is given `LINGER`."""
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        exited: float | None = None
        while True:
            now = time.monotonic()
            with self._lock:
                wait = group.step(now)
                if exited is None and group.proc.poll() is not None:
                    exited = now
                if exited is not None and not group.ending and now - exited >= LINGER:
                    group.escalate(LEFTOVERS, now)
                    wait = group.step(now)
            if wait is None and exited is not None and group.ending:
                wait = 0.0  # the group is gone, the pipe still open: held from outside it
                if not poller.poll(0):
                    return
            if wait is None:
                wait = POLL if exited is None else max(0.0, exited + LINGER - now)
            if poller.poll(max(1, int(wait * 1000))):
                chunk = os.read(fd, CHUNK)  # whatever caliban has written, at once
                if not chunk:
                    return
                on_output(chunk)

    def interrupt(self) -> None:
        """End the group: SIGINT (caliban cancels, saves and prints a result), then, if it is
        not gone within the grace, SIGTERM, then SIGKILL. Returns at once; the run climbs it."""
        with self._lock:
            self._interrupted = True
            if self.group is not None:
                self.group.escalate(LADDER)

    def step(self) -> None:
        """Climb the ladder an interrupt started, where it is due (the run's loop does too)."""
        with self._lock:
            if self.group is not None:
                self.group.step()

    def gone(self) -> bool:
        """Nothing of caliban's group is running: it has ended, or could not start."""
        with self._lock:
            return self._over or (self.group is not None and self.group.gone())

    def kill(self) -> None:
        with self._lock:
            if self.group is not None:
                self.group.signal(signal.SIGKILL)

    def _forward_stderr(self, fd: int) -> None:
        lines = LineCutter(STDERR_LINE, CUT)
        while True:
            try:
                chunk = os.read(fd, CHUNK)
            except OSError:
                chunk = b""
            done = lines.feed(chunk) if chunk else lines.end()
            for line in done:
                text = line.decode("utf-8", "replace").strip()
                if text:
                    self.stderr_tail = text
            if done:
                with contextlib.suppress(OSError, ValueError, AttributeError):  # (no sys.stderr: started without one)
                    _write_all(sys.stderr.fileno(), b"".join(done))
            if not chunk:
                return


class LineCutter:
    """Chunks → whole lines (each with its newline), a line longer than `limit` cut to its
    first `limit` bytes and `mark`: what is held between chunks never exceeds `limit`."""

    def __init__(self, limit: int, mark: bytes) -> None:
        self.limit, self.mark = limit, mark
        self._held: list[bytes] = []
        self._size = 0
        self._cut = False  # the rest of an over-long line is being dropped

    def feed(self, chunk: bytes) -> list[bytes]:
        out: list[bytes] = []
        start = 0
        while (nl := chunk.find(b"\n", start)) >= 0:
            self._add(chunk[start:nl], out)
            if not self._cut:
                out.append(b"".join(self._held) + b"\n")
            self._held, self._size, self._cut = [], 0, False
            start = nl + 1
        self._add(chunk[start:], out)
        return out

    def end(self) -> list[bytes]:
        """The input ended: its last line, if it had no newline."""
        return self.feed(b"\n") if self._held else []

    def _add(self, piece: bytes, out: list[bytes]) -> None:
        if self._cut or not piece:
            return
        room = self.limit - self._size
        if len(piece) <= room:
            self._held.append(piece)
            self._size += len(piece)
            return
        out.append(b"".join([*self._held, piece[:room], self.mark, b"\n"]))
        self._held, self._size, self._cut = [], 0, True


def _write_prompt(stdin: IO[bytes], data: bytes) -> None:
    try:
        _write_all(stdin.fileno(), data)
    except OSError:  # it exited before reading its prompt (a usage error): its status says why
        pass
    finally:
        with contextlib.suppress(OSError):
            stdin.close()


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
