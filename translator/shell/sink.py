"""What every streaming shell shares around its streams, with no event loop in it: the
configuration, the outcome, the reject file, and the sink (what the core gave goes to stderr,
the reject file and the metrics, its frames become writes of about BATCH bytes). The shell
without an event loop (direct.py) and the ones under anyio (pump.py) write those pieces their
own way; everything else about them is here, once.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import msgspec

from translator.core.feed import Taken, new_core
from translator.core.rates import RateCard
from translator.core.translator import Options, Translator
from translator.diagnostics import once
from translator.diagnostics import stderr as _stderr
from translator.encoders import Encoder, observed
from translator.encoders.array import JsonArray
from translator.encoders.observed import Observer, identity, observer_of

if TYPE_CHECKING:
    from translator.shell.metrics import Metrics

BATCH = 1 << 20  # output is written in pieces of about this size
WRITE_GRACE_S = 5.0  # after a signal, how long a blocked downstream may hold up the last frames
# What the system runs out of (file descriptors, memory): no fault of a file's (exit 71).
SCARCE = (errno.EMFILE, errno.ENFILE, errno.ENOMEM)


# Config and Outcome are msgspec Structs rather than dataclasses: the same classes (keyword
# or positional arguments, defaults, mutable), built in C, where a dataclass execs generated
# code at every start (~1 ms for these two). Nothing is validated on construction.
class Config(msgspec.Struct):
    sources: list[str]
    make_encoder: Callable[[str], Encoder]  # session id -> a fresh encoder for one stream
    rates: RateCard
    options: Options = msgspec.field(default_factory=Options)
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
    output_in_place: bool = False  # -o FILE written in place: emptied by the first write (Stdout.begin)
    watch: observed.Watch | None = None  # told every stream's runs (telemetry, session files): encoders/observed.py
    array: JsonArray | None = None  # --output-format json: the frames as one JSON array


class Outcome(msgspec.Struct):
    """What happened, for the exit status."""

    last_subtype: str | None = None
    bad_lines: int = 0
    rejected: bool = False  # --on-invalid fail tripped
    missing_input: bool = False
    out_of_resources: bool = False  # an input could not be opened for want of fds (SCARCE)
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


class Stdout:
    """stdout as a file descriptor. Pipes and sockets are made non-blocking, so that a shell
    can wait for them beside its signals; their flags are restored on close."""

    def __init__(self, fd: int, empty_first: bool = False) -> None:
        self.fd = fd
        self.empty_first = empty_first  # a file written in place (-o with --follow): emptied by the first write
        try:
            mode = os.fstat(fd).st_mode
        except OSError:  # closed (>&-): said by the first write, as the output's trouble
            mode = 0
        self._was_blocking: bool | None = None
        if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode):
            self._was_blocking = os.get_blocking(fd)
            os.set_blocking(fd, False)

    def begin(self) -> None:
        """Before the first write: a file written in place is emptied now, not when opened, so
        that a run that fails before its first frame leaves it as it was."""
        if self.empty_first:
            self.empty_first = False
            os.ftruncate(self.fd, 0)

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


class Sink:
    """A shell's streams and where what they give goes (the reject file is opened here: an
    OSError when it cannot be)."""

    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        self.outcome = Outcome()
        self.rejects = RejectFile(cfg.reject_file, self.outcome) if cfg.reject_file else None
        self.metrics: Metrics | None = None  # with --metrics, fed once per chunk
        self.said: set[str] = set()  # the warnings about no line said so far (each once per command)
        self.array = cfg.array

    def route(self, taken: Taken, core: Translator) -> Iterator[bytes]:
        """The sink: a broken input said on stderr (exit 65), diagnostics to stderr, rejected
        lines to the reject file, at once; the frames returned as the writes to make."""
        if taken.broken is not None:
            _stderr([taken.broken])
            self.outcome.bad_data = True
        if taken.diagnostics:
            _stderr(once(taken.diagnostics, self.said), "warning")
        if taken.rejects and self.rejects is not None:
            self.rejects.write(taken.rejects)
        if self.metrics is not None:
            self.metrics.update(core, taken.diagnostics)
        return batches(taken.frames if self.array is None else self.array.take(taken.frames))

    def new_core(self, label: str, live: bool, nth: int = 0) -> Translator:
        """A fresh core for one input stream: `live` streams are timed as they arrive; `nth`, the
        stream's number in its file (a followed file's later ones)."""
        stream = identity(label, self.cfg.session_id, nth)
        watchers: list[Observer] = [] if self.cfg.watch is None else [self.cfg.watch.observer()]
        if self.metrics is not None:
            watchers.append(self.metrics.observer())  # its closed runs, counted
        return new_core(
            self.cfg.make_encoder(stream.session_id),
            rates=self.cfg.rates, options=self.cfg.options, clock=self.cfg.clock, live=live,
            epoch=time.time() - time.monotonic(), source=label, started_at=time.monotonic(),
            observer=observer_of(watchers), stream=stream, adopt=self.cfg.session_id is None,
        )  # fmt: skip

    def watched(self) -> None:
        """The step's frames are out: what watches the streams does what it kept for after them."""
        if self.cfg.watch is not None:
            self.cfg.watch.drain()

    def tally(self, core: Translator) -> None:
        """Add what a finished stream came to into the outcome."""
        self.outcome.bad_lines += core.bad_lines
        if core.last_subtype is not None:
            self.outcome.last_subtype = core.last_subtype
        if core.bad_lines and self.cfg.options.stop_on_invalid:
            self.outcome.rejected = True

    def abandoned(self, core: Translator, exc: Exception) -> None:
        """A stream that failed outside the core: said with the line reached, its open run
        closed (the shell writes what can still be written); the exit status is 70."""
        self.outcome.internal_error = True
        _stderr([f"translator: {core.source}:{core.line_no}: internal error ({type(exc).__name__}: {exc}); "
                 "this input ends here"])
        core.end(time.monotonic())

    @contextlib.contextmanager
    def output_trouble(self) -> Iterator[None]:
        """The output's trouble, said here for every shell alike: it ends every input."""
        try:
            yield
        except BrokenPipeError:
            self.outcome.broken_pipe = True  # the consumer has gone: stop quietly
        except OutputStuck:
            _stderr(["translator: the output did not drain after the signal; exiting"])
        except OSError as exc:
            _stderr([f"translator: write error: {exc.strerror}"])
            self.outcome.io_error = True

    def close(self) -> None:
        if self.rejects is not None:
            self.rejects.close()
        if self.metrics is not None:
            self.metrics.close()
