"""The pump every shell runs: reads chunks, hands them to the core with their arrival time,
writes what comes back; and what the shells share around it (the configuration, the outcome,
stdout, the reject file, signals). Nothing here knows the event format or where input comes from.

Reads take whatever the input has (a pipe read returns as soon as a line is there), and every
read is followed by a write of its output, so output is flushed whenever the input goes quiet.
"""

from __future__ import annotations

import contextlib
import os
import signal
import stat
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import anyio

from translator.diagnostics import stderr as _stderr
from translator.encoders import Encoder
from translator.feed import Feed, Taken, new_core, take
from translator.fold import Options, Translator
from translator.rates import RateCard

if TYPE_CHECKING:
    from translator.shell.metrics import Metrics

BATCH = 1 << 20  # output is written in pieces of about this size
WRITE_GRACE_S = 5.0  # after a signal, how long a blocked downstream may hold up the last frames


@dataclass
class Config:
    sources: list[str]
    make_encoder: Callable[[str], Encoder]  # session id -> a fresh encoder for one stream
    rates: RateCard
    options: Options = field(default_factory=Options)
    clock: str = "auto"  # auto | wall | recorded | estimated
    session_id: str | None = None
    reject_file: str | None = None
    follow: str | None = None  # --follow FILE: translate it as it grows (sources unused)
    from_end: bool = False
    listen: str | None = None  # --listen ADDRESS: serve connections (sources unused)
    max_connections: int = 64
    idle_timeout: float = 300.0
    grace: float = 10.0
    line_timeout: float = 60.0  # a service connection's line must be complete this soon after it began
    max_pending_bytes: int = 128 << 20  # unfinished lines held for all service connections together
    socket_mode: int = 0o600  # of the service's unix socket
    metrics: str | None = None  # --metrics ADDRESS: serve /metrics and /healthz there


@dataclass
class Outcome:
    """What happened, for the exit status."""

    frames: int = 0
    last_subtype: str | None = None
    bad_lines: int = 0
    rejected: bool = False  # --on-invalid fail tripped
    missing_input: bool = False
    io_error: bool = False
    bad_data: bool = False  # compressed input that is damaged or cut short
    broken_pipe: bool = False
    internal_error: bool = False  # a stream ended by the last resort
    signal: int | None = None


def batches(frames: list[bytes]) -> Iterator[bytes]:
    """Frames joined into writes of about BATCH bytes; a frame bigger than that is written on
    its own, so a long line's frame is never copied on its way out."""
    start, size = 0, 0
    for i, frame in enumerate(frames):
        if len(frame) >= BATCH:
            if i > start:
                yield b"".join(frames[start:i])
            yield frame
            start, size = i + 1, 0
            continue
        size += len(frame)
        if size >= BATCH:
            yield b"".join(frames[start : i + 1])
            start, size = i + 1, 0
    if start < len(frames):
        yield b"".join(frames[start:])


class OutputStuck(Exception):
    """The downstream did not take our last frames within the grace period after a signal."""


class Output:
    """stdout as a file descriptor. Pipes and sockets are made non-blocking and awaited, so a
    slow consumer never stalls signal handling; their flags are restored on close."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        mode = os.fstat(fd).st_mode
        self._was_blocking: bool | None = None
        if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode):
            self._was_blocking = os.get_blocking(fd)
            os.set_blocking(fd, False)
        self._scope: anyio.CancelScope | None = None
        self._deadline: float | None = None

    async def write(self, data: bytes) -> None:
        view = memoryview(data)
        with anyio.CancelScope(shield=True) as scope:
            self._scope = scope
            if self._deadline is not None:
                scope.deadline = self._deadline
            while view:
                try:
                    view = view[os.write(self.fd, view) :]
                except BlockingIOError:
                    await anyio.wait_writable(self.fd)
        self._scope = None
        if scope.cancelled_caught:
            raise OutputStuck

    def expire(self, grace: float) -> None:
        """From now on, writes give up after `grace` seconds."""
        self._deadline = anyio.current_time() + grace
        if self._scope is not None:
            self._scope.deadline = self._deadline

    def close(self) -> None:
        if self._was_blocking is not None:
            with contextlib.suppress(OSError):
                os.set_blocking(self.fd, self._was_blocking)


class RejectFile:
    """--reject-file, written unbuffered so that nothing is left to fail at exit. When a write
    fails (a full disk) that is said once, the translation goes on without it, and the exit
    status is 74 once every result is out."""

    def __init__(self, path: str, outcome: Outcome) -> None:
        self.path = path
        self.outcome = outcome
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o666)

    def write(self, pieces: list[bytes]) -> None:
        if self.fd < 0:
            return
        try:
            for piece in pieces:
                view = memoryview(piece)
                while view:
                    view = view[os.write(self.fd, view) :]
        except OSError as exc:
            _stderr([f"translator: --reject-file {self.path}: {exc.strerror}; rejected lines are no longer kept"])
            self.outcome.io_error = True
            self.close()

    def close(self) -> None:
        if self.fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = -1


class Pump:
    """One input stream's loop, source → core → sink, written once for every shell (as
    httpcore's `_receive_event` feeds h11): the steps of feed.py's `steps()`, awaited. A chunk
    read is handed to the core, decompressed, with its arrival time; what came back (frames,
    diagnostics, rejected lines) goes out at once. The shell brings its own `read` and, if not
    stdout, its own `write`."""

    def __init__(self, shell: Shell, core: Translator, write: Callable[[bytes], Awaitable[None]] | None = None) -> None:
        self.shell = shell
        self.feed = Feed(core)  # a gzip or zstd input is read inflated, whatever its chunks
        self.write = write

    async def run(self, read: Callable[[], Awaitable[bytes | None]], fed: Callable[[], None] | None = None) -> bool:
        """Read, feed and write until `read` has nothing more for now (None: False returned) or
        the stream is over (True: the input ended (b""), its compressed data broke, or the core
        stopped). `fed` runs after each chunk is in the core, before its output goes out."""
        shell, feed = self.shell, self.feed
        while data := await read():
            size = feed.feed(data, time.monotonic())
            if feed.broken is not None:
                break
            if shell.metrics is not None:
                shell.metrics.read(size)
            if fed is not None:
                fed()
            await shell.put(feed.take(), feed.core, self.write)
            if feed.over:
                break
        return data is not None

    async def close(self, cancelled: bool = False) -> None:
        """The stream is over: an open run gets its result (cancelled after a signal)."""
        if cancelled:
            self.feed.cancel(time.monotonic())
        else:
            self.feed.end(time.monotonic())
        await self.shell.put(self.feed.take(), self.feed.core, self.write)


class Shell:
    def __init__(self, cfg: Config, out: Output) -> None:
        self.cfg = cfg
        self.out = out
        self.outcome = Outcome()
        self.read_scope: anyio.CancelScope | None = None
        self.rejects = RejectFile(cfg.reject_file, self.outcome) if cfg.reject_file else None
        self.metrics: Metrics | None = None  # with --metrics, fed once per chunk

    async def emit(self, core: Translator, write: Callable[[bytes], Awaitable[None]] | None = None) -> None:
        """What the core holds, out (see `put`)."""
        await self.put(take(core), core, write)

    async def put(self, taken: Taken, core: Translator, write: Callable[[bytes], Awaitable[None]] | None = None) -> None:
        """The sink: a broken input said on stderr (exit 65), diagnostics to stderr, rejected
        lines to the reject file, frames to `write` (default: stdout)."""
        if taken.broken is not None:
            _stderr([taken.broken])
            self.outcome.bad_data = True
        if taken.diagnostics:
            _stderr(taken.diagnostics, "warning")
        if taken.rejects and self.rejects is not None:
            self.rejects.write(taken.rejects)
        if self.metrics is not None:
            self.metrics.update(core, taken.diagnostics)
        for data in batches(taken.frames):
            await (write or self.out.write)(data)

    def new_core(self, label: str, live: bool) -> Translator:
        """A fresh core for one input stream: `live` streams are timed as they arrive."""
        core = new_core(
            self.cfg.make_encoder(self.cfg.session_id or str(uuid.uuid4())),
            rates=self.cfg.rates, options=self.cfg.options, clock=self.cfg.clock, live=live,
            epoch=time.time() - time.monotonic(), source=label, started_at=time.monotonic(),
        )  # fmt: skip
        if self.metrics is not None:
            core.closed = []  # its closed runs, for the metrics
        return core

    def tally(self, core: Translator) -> None:
        """Add what a finished stream came to into the outcome."""
        self.outcome.frames += core.frames_closed
        self.outcome.bad_lines += core.bad_lines
        if core.last_subtype is not None:
            self.outcome.last_subtype = core.last_subtype
        if core.bad_lines and self.cfg.options.stop_on_invalid:
            self.outcome.rejected = True

    async def abandon(self, core: Translator, exc: Exception) -> None:
        """A stream that failed outside the core: said with the line reached, its open run
        closed with what can still be written; the exit status is 70."""
        self.outcome.internal_error = True
        _stderr([f"translator: {core.source}:{core.line_no}: internal error ({type(exc).__name__}: {exc}); "
                 "this input ends here"])
        core.end(time.monotonic())
        with contextlib.suppress(Exception):
            await self.emit(core)

    def observe(self) -> bool:
        """--metrics: start serving them; False (reported) when the address cannot be served."""
        from translator.shell.metrics import Metrics

        try:
            self.metrics = Metrics.serve(self, self.cfg.metrics or "")
        except (OSError, ValueError) as exc:
            _stderr([f"translator: --metrics {self.cfg.metrics}: {getattr(exc, 'strerror', None) or exc}"])
            self.outcome.io_error = True
            return False
        return True

    async def run(self, body: Callable[[], Awaitable[None]]) -> None:
        """Run a mode's `body` under the signal watcher (and the metrics, if asked for); the
        output's trouble is said here, for every mode alike."""
        if self.cfg.metrics is not None and not self.observe():
            return
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._watch, signals)
                if self.metrics is not None:
                    tg.start_soon(self.metrics.heartbeat)
                try:
                    await body()
                except BrokenPipeError:
                    self.outcome.broken_pipe = True  # the consumer has gone: stop quietly
                except OutputStuck:
                    _stderr(["translator: the output did not drain after the signal; exiting"])
                except OSError as exc:
                    _stderr([f"translator: write error: {exc.strerror}"])
                    self.outcome.io_error = True
                finally:
                    tg.cancel_scope.cancel()

    async def _watch(self, signals: object) -> None:
        async for signum in signals:  # type: ignore[attr-defined]
            self.outcome.signal = signum
            self.out.expire(WRITE_GRACE_S)
            if self.read_scope is not None:
                self.read_scope.cancel()
            return
