"""The pump the shells under anyio run (`--follow`, `--listen`, `--metrics`): reads chunks,
hands them to the core with their arrival time, writes what comes back; and what those shells
share around it (stdout awaited, signals). What every shell shares, event loop or not (the
configuration, the outcome, the reject file, the sink), is in sink.py. Nothing here knows the
event format or where input comes from.

Reads take whatever the input has (a pipe read returns as soon as a line is there), and every
read is followed by a write of its output, so output is flushed whenever the input goes quiet.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Awaitable, Callable
from types import FrameType

import anyio
import anyio.lowlevel

from translator.core.feed import Feed, Taken, take
from translator.core.translator import Translator
from translator.diagnostics import stderr as _stderr
from translator.shell.sink import WRITE_GRACE_S, Config, OutputStuck, Sink, Stdout
from translator.stdio import stop_signals


class Output(Stdout):
    """stdout, its writes awaited when it is a pipe or socket, so a slow consumer never stalls
    signal handling."""

    def __init__(self, fd: int, empty_first: bool = False) -> None:
        super().__init__(fd, empty_first)
        self._scope: anyio.CancelScope | None = None
        self._deadline: float | None = None

    async def write(self, data: bytes) -> None:
        if self.empty_first:
            self.begin()
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


class Pump:
    """One input stream's loop, source → core → sink, written once for every shell (as
    httpcore's `_receive_event` feeds h11): the steps of feed.py's `steps()`, awaited. A chunk
    read is handed to the core, decompressed a piece at a time, with its arrival time; what came
    back (frames, diagnostics, rejected lines) goes out after each piece. The shell brings its own `read` and, if not
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
            feed.push(data)
            while size := feed.step(time.monotonic()):
                if shell.metrics is not None:
                    shell.metrics.read(size)
                if fed is not None:
                    fed()
                await shell.put(feed.take(), feed.core, self.write)
                if feed.over:
                    break
                await anyio.lowlevel.checkpoint()  # a compressed chunk's pieces: a signal (a cancel) is heard between them
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


class Shell(Sink):
    """The sink with its writes awaited, and the signal watcher. Its stdout is made non-blocking
    only once the reject file is open: a FIFO's open waits for its reader, which only a stop
    signal's own action ends, and a process so ended cannot put back the flags of a pipe its
    other writers share. `out.close()` puts them back."""

    def __init__(self, cfg: Config, out_fd: int) -> None:
        super().__init__(cfg)
        self.out = Output(out_fd, cfg.output_in_place)
        self.read_scope: anyio.CancelScope | None = None

    async def emit(self, core: Translator, write: Callable[[bytes], Awaitable[None]] | None = None) -> None:
        """What the core holds, out (see `put`)."""
        await self.put(take(core), core, write)

    async def put(self, taken: Taken, core: Translator, write: Callable[[bytes], Awaitable[None]] | None = None) -> None:
        """The sink (`Sink.route`), frames to `write` (default: stdout)."""
        for data in self.route(taken, core):
            await (write or self.out.write)(data)
        self.watched()

    async def abandon(self, core: Translator, exc: Exception) -> None:
        """A stream that failed outside the core (`Sink.abandoned`), with what can still be written."""
        self.abandoned(core, exc)
        with contextlib.suppress(Exception):
            await self.emit(core)

    def observe(self) -> bool:
        """--metrics: start serving them; False (reported) when the address cannot be served."""
        from translator.shell.metrics import Metrics

        try:
            cfg = self.cfg
            mode = "follow" if cfg.follow else "service" if cfg.listen else "pipe"
            self.metrics = Metrics.serve(
                cfg.metrics or "", mode, cfg.follow, cfg.max_connections,
                reading=lambda: self.read_scope is not None, stopping=lambda: self.outcome.signal is not None,
            )  # fmt: skip
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
        stops = stop_signals()
        with anyio.open_signal_receiver(*stops) as signals:
            for signum in stops:  # beside the loop's own handler (which only wakes the loop)
                signal.signal(signum, self._noted)
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._watch, signals)
                if self.metrics is not None:
                    tg.start_soon(self.metrics.heartbeat)
                try:
                    with self.output_trouble():
                        await body()
                finally:
                    tg.cancel_scope.cancel()

    def _noted(self, signum: int, frame: FrameType | None) -> None:
        """A stop signal counts as it comes (the first one): the watcher, a task, may not run
        before the input's end is read or the mode's body returns, and the run would then end
        as if no signal had come (exit 0, its result not `cancelled`)."""
        if self.outcome.signal is None:
            self.outcome.signal = signum

    async def _watch(self, signals: object) -> None:
        async for signum in signals:  # type: ignore[attr-defined]
            if self.outcome.signal is None:
                self.outcome.signal = signum
            self.out.expire(WRITE_GRACE_S)
            if self.read_scope is not None:
                self.read_scope.cancel()
            return
