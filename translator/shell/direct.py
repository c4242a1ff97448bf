"""Files and stdin without an event loop: each named input (or `-`) read to its end, one after
another, each its own stream, through feed.py's loop; nothing of anyio or asyncio is imported
(they cost more to import than a small input costs to translate).

Regular files are read directly. Pipes, sockets and terminals are waited on with `select`,
together with a wake-up pipe the signal handlers write to (`signal.set_wakeup_fd`), so that a
signal interrupts a quiet input. The handlers only record the signal: it is acted on between
chunks, never inside the core. stdout, when a pipe or socket, is made non-blocking and waited
on the same way, so a slow consumer never keeps a signal from being seen; after a signal a
write gives up after WRITE_GRACE_S.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import select
import signal
import stat
import sys
import time
from collections.abc import Iterator
from types import FrameType

from translator import stdio
from translator.core.feed import CHUNK, Feed, steps, take
from translator.diagnostics import stderr as _stderr
from translator.shell.sink import SCARCE, WRITE_GRACE_S, Config, Outcome, OutputStuck, Sink, Stdout

# Elsewhere (macOS) a FIFO opened without waiting reads as ended before its writer comes.
OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK if sys.platform == "linux" else os.O_RDONLY


def above_std(fd: int) -> int:
    """`fd` moved above the standard streams: with stdin or stdout closed, a new pipe would
    otherwise take their place (and be read as the input, or written as the output)."""
    if fd > 2:
        return fd
    try:
        return fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    finally:
        os.close(fd)


def ready(reads: list[int], writes: list[int], timeout: float | None) -> list[int]:
    """Those of the fds that can be read or written, once one can (or the timeout is out).
    `select` where every fd fits in its sets (it also waits on terminals, which macOS's
    `poll` does not); `poll` beyond, where `select` fails."""
    if max(reads + writes) < 1024:  # FD_SETSIZE
        readable, writable, _ = select.select(reads, writes, [], timeout)
        return readable + writable
    poller = select.poll()
    for fd in reads:
        poller.register(fd, select.POLLIN)
    for fd in writes:
        poller.register(fd, select.POLLOUT)
    return [fd for fd, _ in poller.poll(None if timeout is None else max(0, int(timeout * 1000) + 1))]


class Signals:
    """SIGTERM, SIGINT and SIGHUP (those not ignored: stdio.stop_signals) recorded (the first one
    counts), and a pipe that becomes readable when one comes, to wait on beside an input or the
    output. `close()` puts back the handlers that were there."""

    def __init__(self) -> None:
        self.received: int | None = None
        self.deadline = 0.0  # once a signal has come: when a stuck write gives up
        r, w = os.pipe()
        self.fd, self._w = above_std(r), above_std(w)
        os.set_blocking(self.fd, False)
        os.set_blocking(self._w, False)
        try:
            self._old_fd = signal.set_wakeup_fd(self._w, warn_on_full_buffer=False)
        except ValueError:  # not the main thread (where signals can be waited on): the pipe closed
            os.close(self.fd)
            os.close(self._w)
            raise
        self._old = {signum: signal.signal(signum, self._record) for signum in stdio.stop_signals()}

    def _record(self, signum: int, frame: FrameType | None) -> None:
        if self.received is None:
            # Python runs the handlers of signals caught together in their numbers' order; the
            # wake-up pipe has them in the order they came (a byte put back: it still wakes).
            with contextlib.suppress(OSError):
                came = os.read(self.fd, 64)
                os.write(self._w, b"\0")
                signum = next((s for s in came if s in self._old), signum)
            self.received = signum
            self.deadline = time.monotonic() + WRITE_GRACE_S

    def wait(self, fd: int, write: bool = False) -> bool:
        """Until `fd` can be read (or written): True; False once a signal has come. After a
        signal a write still waits, until the grace runs out (then OutputStuck)."""
        while True:
            timeout = None
            if self.received is not None:
                if not write:
                    return False
                timeout = self.deadline - time.monotonic()
                if timeout <= 0:
                    raise OutputStuck
            fds = ready([self.fd] if write else [self.fd, fd], [fd] if write else [], timeout)
            if self.fd in fds:
                with contextlib.suppress(BlockingIOError):
                    while os.read(self.fd, 64):
                        pass
            if fd in fds:
                return True

    def close(self) -> None:
        for signum, handler in self._old.items():
            signal.signal(signum, handler)
        signal.set_wakeup_fd(self._old_fd)
        os.close(self.fd)
        os.close(self._w)


class Output(Stdout):
    """stdout, its writes waited on beside the signals when it is a pipe or socket."""

    def __init__(self, fd: int, signals: Signals, empty_first: bool = False) -> None:
        super().__init__(fd, empty_first)
        self.signals = signals

    def write(self, data: bytes) -> None:
        if self.empty_first:
            self.begin()
        view = memoryview(data)
        while view:
            try:
                view = view[os.write(self.fd, view) :]
            except BlockingIOError:
                self.signals.wait(self.fd, write=True)


def open_input(name: str, outcome: Outcome) -> tuple[int, str, bool] | None:
    """An input opened: its fd, its label in diagnostics, and whether it is live (a pipe,
    socket or terminal: waited on, timed as it arrives). None, said on stderr (exit 66), when
    it cannot be read (71 when the system is out of fds).

    A FIFO is opened without waiting for its writer (O_NONBLOCK), where a blocking open would
    wait in the kernel, deaf to the stop signals; the wait is the shell's, for its first bytes,
    beside the signals (on Linux a FIFO that has had no writer yet is not readable). The fd is
    then made blocking again, as every input is read."""
    fd, label = (0, "<stdin>") if name == "-" else (-1, name)
    try:
        if fd < 0:
            if stdio.names_held(name):  # /dev/stdin started without stdin: not /dev/null's emptiness
                raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT))
            fd = os.open(name, OPEN_FLAGS)
        elif fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_WRONLY:  # closed: stdio.py's stand-in
            raise OSError(errno.EBADF, os.strerror(errno.EBADF))
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):  # opens fine, fails on the first read
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR))
    except OSError as exc:
        _stderr([f"translator: {label}: {exc.strerror}"])
        if exc.errno in SCARCE:  # no fault of the file's (exit 71)
            outcome.out_of_resources = True
        else:
            outcome.missing_input = True
        if fd > 0:
            os.close(fd)
        return None
    if OPEN_FLAGS != os.O_RDONLY and name != "-" and not stat.S_ISREG(mode):
        os.set_blocking(fd, True)
    return fd, label, stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or os.isatty(fd)


def read_chunk(fd: int, label: str, outcome: Outcome) -> bytes | None:
    """The input's next chunk (b"" at its end); None, said on stderr (exit 74), when it
    cannot be read."""
    try:
        return os.read(fd, CHUNK)
    except OSError as exc:
        _stderr([f"translator: {label}: read error: {exc.strerror}"])
        outcome.io_error = True
        return None


def translate(cfg: Config, out_fd: int = 1) -> Outcome:
    """Translate the configured sources to `out_fd`, until a signal or `--on-invalid fail`
    stops them; never raises for I/O trouble (an OSError: the reject file cannot be opened).
    The reject file is opened before the signals are ours: a FIFO's open waits for its reader,
    deaf to handlers that only note a signal, and the signals' default action ends that wait."""
    sink = Sink(cfg)
    try:
        signals = Signals()
        try:
            out = Output(out_fd, signals, cfg.output_in_place)
            try:
                with sink.output_trouble():
                    for name in cfg.sources:
                        source(sink, name, signals, out)
                        if signals.received is not None or sink.outcome.rejected:
                            break
                    if sink.array is not None:  # (closed whatever stopped the inputs: the array stays JSON)
                        out.write(sink.array.end())
            finally:
                out.close()
        finally:
            signals.close()
    finally:
        sink.close()
    sink.outcome.signal = signals.received
    return sink.outcome


def source(sink: Sink, name: str, signals: Signals, out: Output) -> None:
    opened = open_input(name, sink.outcome)
    if opened is None:
        return
    fd, label, live = opened
    try:
        core = sink.new_core(label, live)
    except OSError as exc:  # out of fds (a named log's id imports hashlib at its first use): no fault of the file's
        if exc.errno not in SCARCE:
            raise
        _stderr([f"translator: {label}: {exc.strerror}"])
        sink.outcome.out_of_resources = True
        if fd > 0:
            os.close(fd)
        return

    def chunks() -> Iterator[bytes]:
        while signals.received is None and (not live or signals.wait(fd)):
            if not (data := read_chunk(fd, label, sink.outcome)):
                return
            yield data

    try:
        for taken in steps(Feed(core), chunks(), clock=time.monotonic, cancelled=lambda: signals.received is not None):
            for data in sink.route(taken, core):
                out.write(data)
            sink.watched()
    except (OSError, OutputStuck):
        raise  # the output's trouble: said for every input alike
    except Exception as exc:  # the last resort: this input ends, the next one is read
        sink.abandoned(core, exc)
        with contextlib.suppress(Exception):
            for data in sink.route(take(core), core):
                out.write(data)
            sink.watched()
    finally:
        if fd != 0:
            os.close(fd)
        sink.tally(core)
