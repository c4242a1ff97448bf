"""One input stream's way through the core, written once for every caller: the shells (files
and stdin in shell/direct.py, the others' pump in shell/pump.py), the library API (api.py) and
the batch replay (shell/replay.py).

- `CHUNK`: how much one read of input takes, in every mode;
- `new_core()`: the one place a core (`core.translator.Translator`) is built from the options;
- `Feed`: a chunk inflated (gzip or zstd, told by its first bytes) and fed to the core with its
  arrival time, then what came back taken in one order (`Taken`) for the caller's sink;
- `steps()`: that loop over a whole input, for the callers that need not await (files and
  stdin among them: they are read without an event loop). The async pump of `--follow`,
  `--listen` and `--metrics` is the same loop with its reads and writes awaited (as
  httpcore's `_receive_event` feeds h11), so both give the same bytes and the same
  diagnostics for the same input.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Literal, NamedTuple, cast

from msgspec.structs import replace

from translator.core.compressed import MAX_RATIO, CorruptInput, Decoder
from translator.core.prompts import prompted
from translator.core.rates import RateCard
from translator.core.translator import ESTIMATED, WALL, Options, Translator
from translator.encoders import Encoder
from translator.encoders.observed import Observed, Observer, StreamId, takes

Clock = Literal["auto", "wall", "recorded", "estimated"]
CLOCKS: tuple[Clock, ...] = ("auto", "wall", "recorded", "estimated")
CHUNK = 1 << 18  # a read takes up to this much: big enough that a fast input costs few calls


def core_options(base: Options, clock: str, live: bool, epoch: float) -> Options:
    """The core's options for one stream. `auto` is recorded when the first event carries a
    stamp, else the arrival time for a live input and the ttft/tbt estimate for a replay."""
    if clock not in CLOCKS:
        raise ValueError(f"unknown clock {clock!r}: expected one of {', '.join(CLOCKS)}")
    if clock == "auto":
        return replace(base, clock=WALL if live else ESTIMATED, detect_recorded=True, epoch=epoch)
    return replace(base, clock=clock, detect_recorded=False, epoch=epoch)


def new_core(
    encoder: Encoder,
    *,
    rates: RateCard,
    options: Options,
    clock: str,
    live: bool,
    epoch: float,
    source: str,
    started_at: float = 0.0,
    observer: Observer | None = None,
    stream: StreamId | None = None,
    adopt: bool = True,
) -> Translator:
    """A fresh core for one input stream: `live` streams are timed as they arrive, `epoch`
    is the Unix time of monotonic 0 (a replay passes its file's time, so reruns agree). An
    `observer` is told the runs' moves beside the encoder (encoders/observed.py), the stream
    opened as `stream` (None: the caller opened it; `adopt`: a headless init's own session id
    names it). An observer that takes no move is not put in the way at all."""
    if observer is not None and takes(observer):
        encoder = cast(Encoder, Observed(encoder, prompted(observer), stream, epoch + started_at, adopt))
    return Translator(
        encoder, rates=rates, options=core_options(options, clock, live, epoch), started_at=started_at, source=source
    )


class Taken(NamedTuple):
    """What the core gave since the last take, in the order a sink hands it on."""

    broken: str | None  # the compressed input broke: `translator: <source>: <format>: <why>`
    diagnostics: list[str]  # one per bad line: `translator: <source>:<line>: <reason>: <excerpt>`
    rejects: list[bytes]  # the rejected lines, verbatim (an over-long one in the pieces it came in)
    frames: list[bytes]  # output frames, each one JSON line

    @property
    def said(self) -> list[str]:
        """Every line to report, the cause first: the input's break, then the bad lines."""
        return self.diagnostics if self.broken is None else [self.broken, *self.diagnostics]


def take(core: Translator, broken: str | None = None) -> Taken:
    """Everything the core holds for its sink."""
    return Taken(broken, core.take_diagnostics(), core.take_reject_pieces(), core.take_frames())


class Feed:
    """One input stream's core with its decompressor: `feed()` each chunk as read, `take()`
    what came back, `end()` (or `cancel()`) once. Neither reads nor writes anything."""

    def __init__(self, core: Translator) -> None:
        self.core = core
        ratio = core.options.max_inflate_ratio  # (the fold knows nothing of compression: the default is here)
        self.decoder = Decoder(core.options.max_line_bytes, MAX_RATIO if ratio is None else ratio)
        self.broken: str | None = None  # why the compressed input broke (`gzip: <why>`), once it has
        self._unsaid: str | None = None  # the diagnostic line for it, until taken

    @property
    def over(self) -> bool:
        """Nothing more will be read: the compressed input broke, or the core stopped
        (`end()`, `cancel()`, or a bad line under --on-invalid fail)."""
        return self.broken is not None or self.core.stopped

    def feed(self, data: bytes, now: float) -> int:
        """A chunk that arrived at `now` (monotonic seconds), inflated, to the core, all of it
        at once; how many bytes that gave it (the library's Stream.feed: a shell takes what
        came back after each `step()`). Damaged compressed data ends what can be read."""
        self.push(data)
        size = 0
        while step := self.step(now):
            size += step
        return size

    def push(self, data: bytes) -> None:
        """A chunk as read: its pieces go to the core with `step()`."""
        if not self.over:
            self.decoder.push(data)

    def step(self, now: float) -> int:
        """The next piece of what was pushed (at most a read's worth, however much a compressed
        input expands) to the core at `now`: how many bytes it held; 0 when nothing is left
        until the next push, or the stream is over (see `over`)."""
        if self.over:
            return 0
        try:
            data = self.decoder.pull()
        except CorruptInput as exc:
            self._break(exc)
            return 0
        self.core.feed(data, now)
        return len(data)

    def end(self, now: float) -> None:
        """The input ended: what the decompressor still holds is fed (a stream cut short is
        said), then the core ends (a last line without newline counts; an open run is closed)."""
        if not self.over:
            try:
                self.core.feed(self.decoder.finish(), now)
            except CorruptInput as exc:
                self._break(exc)
        self.core.end(now)

    def cancel(self, now: float) -> None:
        """A signal stopped the stream: an open run is closed as cancelled."""
        self.core.cancel(now)

    def take(self) -> Taken:
        unsaid, self._unsaid = self._unsaid, None
        return take(self.core, unsaid)

    def _break(self, exc: CorruptInput) -> None:
        self.broken = str(exc)
        self._unsaid = f"translator: {self.core.source}: {exc}"


def steps(
    feed: Feed,
    chunks: Iterable[bytes],
    now: float = 0.0,
    *,
    clock: Callable[[], float] | None = None,
    cancelled: Callable[[], bool] | None = None,
) -> Iterator[Taken]:
    """The pump's loop for a caller that need not await: what each chunk gave, then, once the
    input or the stream is over, what its end gave. A replay's chunks all arrive at `now`: its
    times come from its events (or the estimate), not from how fast it is read. A shell reading
    as it goes passes its `clock` (each chunk is timed when it is fed), and `cancelled`, asked
    between the pieces of a chunk and once the chunks stop: True (a signal stopped them)
    closes an open run as cancelled."""
    for chunk in chunks:
        feed.push(chunk)
        while feed.step(now if clock is None else clock()):
            yield feed.take()  # a piece at a time: a compression bomb is never held whole
            if feed.over or (cancelled is not None and cancelled()):
                break
        if feed.over or (cancelled is not None and cancelled()):
            break  # (a break of the compressed data is said with what the end gives)
    end = now if clock is None else clock()
    if cancelled is not None and cancelled():
        feed.cancel(end)
    else:
        feed.end(end)
    yield feed.take()
