"""`--follow FILE`: a sidecar that keeps translating a log the agent's worker appends to.

Like `tail -F`: it reads from the start (or the end), waits for more without spinning, and
when the file is truncated or replaced the old stream ends and a new one (with its own session
id) begins. A truncation is seen even when the file has grown back past the read offset before
the next read (logrotate's copytruncate, then a busy writer): as log shippers do, the follower
keeps a fingerprint of the bytes just before its offset and checks, after every read, that
they are still there; if not, what it just read belongs to a new stream, read from the start. Waiting is inotify on the file's directory (Linux, through libc), so an idle
follower sleeps in the kernel; elsewhere it polls. Either way it looks again every few seconds.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import os
import stat
from typing import TYPE_CHECKING

import anyio

from translator.core.feed import CHUNK
from translator.diagnostics import stderr as _stderr
from translator.shell.pump import Pump
from translator.shell.sink import SCARCE, OutputStuck

if TYPE_CHECKING:
    from translator.core.translator import Translator
    from translator.shell.pump import Shell

# A FIFO has no offset to resume from nor a size to see it cut back: it is read as an input.
FOLLOW_FIFO = "is a FIFO, not a file to follow (read it as an input: translator FIFO)"
RECHECK_S = 5.0  # even with inotify, a look this often (a volume remounted, an event missed)
POLL_S = 0.2  # without inotify
# inotify(7): what may change the file we follow, seen from its directory.
IN_MODIFY, IN_ATTRIB, IN_CLOSE_WRITE = 0x2, 0x4, 0x8
IN_MOVED_FROM, IN_MOVED_TO, IN_CREATE, IN_DELETE = 0x40, 0x80, 0x100, 0x200
IN_NONBLOCK, IN_CLOEXEC = 0o4000, 0o2000000
FINGERPRINT = 256  # bytes before the read offset that must stay as they were
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
            while os.read(self.fd, CHUNK):  # the events are not read, only drained
                pass
        except BlockingIOError:
            pass

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def _identity(st: os.stat_result) -> tuple[int, int]:
    return st.st_dev, st.st_ino


class Position:
    """Where the follower is in its file: the offset, and the bytes just before it."""

    def __init__(self, fd: int, offset: int) -> None:
        self.fd = fd
        self.offset = offset
        self.before = os.pread(fd, min(offset, FINGERPRINT), offset - min(offset, FINGERPRINT))

    def read(self) -> bytes | None:
        """The next bytes of the file; None when the bytes before the offset have changed
        since (the file was cut back and written again), so nothing read here is ours."""
        data = os.pread(self.fd, CHUNK, self.offset)
        if os.pread(self.fd, len(self.before), self.offset - len(self.before)) != self.before:
            return None
        if data:
            self.offset += len(data)
            self.before = (self.before + data[-FINGERPRINT:])[-FINGERPRINT:]
        return data


async def follow(shell: Shell, path: str, from_end: bool) -> None:
    """Translate `path` as it grows, until cancelled (the shell's signal watcher cancels)."""
    wakeup = Wakeup(os.path.dirname(os.path.abspath(path)))
    fd = -1
    core: Translator | None = None
    identity = (0, 0)
    pos: Position | None = None
    pump: Pump | None = None
    data: bytes | None = b""
    streams = 0  # the file's streams so far: each cut back or replaced one is another conversation

    async def read() -> bytes | None:
        nonlocal data
        assert pos is not None
        data = pos.read()
        return data or None  # b"": nothing more for now; None: cut back and written again

    def offset() -> None:
        if shell.metrics is not None and pos is not None:
            shell.metrics.follow_offset = pos.offset

    skip_existing = from_end
    waited = denied = False
    try:
        with anyio.CancelScope() as scope:
            shell.read_scope = scope
            while True:
                if fd < 0:
                    try:
                        # O_NONBLOCK: a FIFO's open would wait for its writer, deaf to signals.
                        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
                        mode = os.fstat(fd).st_mode
                        if stat.S_ISDIR(mode):  # replaced by a directory
                            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR))
                        if stat.S_ISFIFO(mode):
                            raise OSError(errno.ESPIPE, FOLLOW_FIFO)
                    except FileNotFoundError:
                        if identity == (0, 0) and not waited:  # once, before the file was ever seen: a typo would wait unsaid
                            waited = True
                            _stderr([f"translator: --follow {path}: No such file or directory (yet); waiting for it"], "info")
                        await wakeup.wait()
                        continue
                    except PermissionError as exc:  # another user's file (a umask of 077): /healthz says 503 meanwhile
                        if not denied:
                            denied = True
                            _stderr([f"translator: --follow {path}: {exc.strerror}; waiting until it can be read "
                                     f"(this translator runs as uid {os.getuid()})"], "warning")
                        await wakeup.wait()
                        continue
                    except OSError as exc:
                        _stderr([f"translator: --follow {path}: {exc.strerror}"])
                        if exc.errno in SCARCE:
                            shell.outcome.out_of_resources = True
                        else:
                            shell.outcome.io_error = True
                        return
                    opened = os.fstat(fd)
                    denied = False
                    identity = _identity(opened)
                    pos = Position(fd, opened.st_size if skip_existing else 0)
                    skip_existing = False
                    core = shell.new_core(path, live=True, nth=streams)
                    streams += 1
                    pump = Pump(shell, core)  # a .gz or .zst, complete or growing, is read inflated
                    if shell.metrics is not None:
                        shell.metrics.follow_offset = pos.offset
                assert core is not None and pos is not None and pump is not None
                try:
                    if await pump.run(read, offset) and not core.stopped:  # broken compressed data (reported)
                        await pump.close()
                        shell.tally(core)
                        return
                except (OSError, OutputStuck):
                    raise  # the output's trouble: the shell says it
                except Exception as exc:  # the last resort: this stream ends, a new one goes on
                    await shell.abandon(core, exc)
                    shell.tally(core)
                    core = shell.new_core(path, live=True, nth=streams)
                    streams += 1
                    pump = Pump(shell, core)
                    continue
                st: os.stat_result | None = None
                with contextlib.suppress(FileNotFoundError):
                    st = os.stat(path)
                replaced = st is not None and _identity(st) != identity
                if replaced or data is None or (st is not None and st.st_size < pos.offset):
                    # a new file, or this one cut back: the stream so far has ended
                    if shell.metrics is not None:
                        shell.metrics.restarted("replaced" if replaced else "truncated")
                    await pump.close()
                    shell.tally(core)
                    core = None
                    os.close(fd)
                    fd = -1
                    continue
                await wakeup.wait()
        if core is not None and pump is not None:
            await pump.close(cancelled=True)
            shell.tally(core)
    finally:
        shell.read_scope = None
        wakeup.close()
        if fd >= 0:
            os.close(fd)
