"""`--follow FILE`: a sidecar that keeps translating a log the agent's worker appends to.

Like `tail -F`: it reads from the start (or the end), waits for more without spinning, and
when the file is truncated or replaced the old stream ends and a new one (with its own session
id) begins. Waiting is inotify on the file's directory (Linux, through libc), so an idle
follower sleeps in the kernel; elsewhere it polls. Either way it looks again every few seconds.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import time
from typing import TYPE_CHECKING

import anyio

from translator.pipeline import CHUNK

if TYPE_CHECKING:
    from translator.fold import Translator
    from translator.pipeline import Shell

RECHECK_S = 5.0  # even with inotify, a look this often (a volume remounted, an event missed)
POLL_S = 0.2  # without inotify
# inotify(7): what may change the file we follow, seen from its directory.
IN_MODIFY, IN_ATTRIB, IN_CLOSE_WRITE = 0x2, 0x4, 0x8
IN_MOVED_FROM, IN_MOVED_TO, IN_CREATE, IN_DELETE = 0x40, 0x80, 0x100, 0x200
IN_NONBLOCK, IN_CLOEXEC = 0o4000, 0o2000000
MASK = IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE


class Wakeup:
    """Wakes when the followed file's directory changes."""

    def __init__(self, directory: str) -> None:
        self.fd = -1
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
            fd = libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
            if fd >= 0 and libc.inotify_add_watch(fd, os.fsencode(directory), MASK) >= 0:
                self.fd = fd
            elif fd >= 0:
                os.close(fd)
        except (OSError, AttributeError):
            pass

    async def wait(self) -> None:
        if self.fd < 0:
            await anyio.sleep(POLL_S)
            return
        with anyio.move_on_after(RECHECK_S):
            await anyio.wait_readable(self.fd)
        try:
            while os.read(self.fd, 65536):
                pass
        except BlockingIOError:
            pass

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def _identity(st: os.stat_result) -> tuple[int, int]:
    return st.st_dev, st.st_ino


async def follow(shell: Shell, path: str, from_end: bool) -> None:
    """Translate `path` as it grows, until cancelled (the shell's signal watcher cancels)."""
    wakeup = Wakeup(os.path.dirname(os.path.abspath(path)))
    fd = -1
    core: Translator | None = None
    identity = (0, 0)
    offset = 0
    skip_existing = from_end
    try:
        with anyio.CancelScope() as scope:
            shell.read_scope = scope
            while True:
                if fd < 0:
                    try:
                        fd = os.open(path, os.O_RDONLY)
                    except FileNotFoundError:
                        await wakeup.wait()
                        continue
                    identity, offset = _identity(os.fstat(fd)), 0
                    if skip_existing:
                        offset = os.lseek(fd, 0, os.SEEK_END)
                    skip_existing = False
                    core = shell.new_core(path, live=True)
                    if shell.metrics is not None:
                        shell.metrics.follow_offset = offset
                assert core is not None
                while data := os.read(fd, CHUNK):
                    offset += len(data)
                    shell.feed(core, data)
                    if shell.metrics is not None:
                        shell.metrics.follow_offset = offset
                    await shell.emit(core)
                st: os.stat_result | None = None
                with contextlib.suppress(FileNotFoundError):
                    st = os.stat(path)
                replaced = st is not None and _identity(st) != identity
                if replaced or (st is not None and st.st_size < offset):
                    # a new file, or this one cut back: the stream so far has ended
                    if shell.metrics is not None:
                        shell.metrics.restarted("replaced" if replaced else "truncated")
                    core.end(time.monotonic())
                    await shell.emit(core)
                    shell.tally(core)
                    core = None
                    os.close(fd)
                    fd = -1
                    continue
                await wakeup.wait()
        if core is not None:
            core.cancel(time.monotonic())
            await shell.emit(core)
            shell.tally(core)
    finally:
        shell.read_scope = None
        wakeup.close()
        if fd >= 0:
            os.close(fd)
