"""The library API: the stable, typed way to use the translator from Python.

A thin facade over the sans-I/O core (`core.translator.Translator` and the encoders), so that embedding
never means wiring an encoder's output list by hand. `translate()` turns a whole input into
frames; `Stream` translates a live input as it arrives. Both move the input through the core
with the steps every shell's pump takes (core/feed.py), and build their encoders as the command
line does (encoders/formats.py).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from os import PathLike, fspath
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypedDict, Unpack, overload

import orjson

from translator.core.feed import CHUNK, CLOCKS, Clock, Feed, core_options, new_core, steps
from translator.core.rates import RateCard
from translator.core.translator import Options
from translator.encoders.formats import FORMATS, Format, make_encoder

if TYPE_CHECKING:
    from translator.encoders.claude_code.frames import Completion
    from translator.schema.frames import ClaudeCodeFrame, EnrichedFrame
from translator.encoders.observed import Observer, StreamId, folder_of

Frame = dict[str, Any]  # one output frame, decoded
READ_SIZE = CHUNK  # how much a file object is asked for at a time


class Readable(Protocol):
    def read(self, size: int = ..., /) -> bytes | str: ...


Input = bytes | str | Readable | Iterable[bytes | str | Frame]
# A card, a card's path, or None: the bundled one. The environment is never read here: the
# command picks its card with `RateCard.default(os.environ)` (CALIBAN_RATES_YAML, as the agent
# reads it at its start, not in its card loader), and a library user can pass the same.
Rates = RateCard | str | PathLike[str] | None


class StreamOptions(TypedDict, total=False):
    """The keyword options of `Stream`, as `translate()` takes them."""

    session_id: str | None
    include_partial_messages: bool
    results_only: bool
    rates: Rates
    on_invalid: Literal["report", "fail"]
    strict: bool
    max_line_bytes: int
    source: str


def _card(rates: Rates) -> RateCard:
    if rates is None:
        return RateCard.bundled()
    return rates if isinstance(rates, RateCard) else RateCard.load(fspath(rates))


class Stream:
    """One input stream (plain, gzip or zstd), translated as it arrives: `feed()` bytes, get the frames they
    completed; `end()` when the input ends (an open run gets its result), or `cancel()` to
    close an open run as cancelled. Neither reads nor writes anything itself.

    Each returned frame is one JSON line (bytes ending in a newline), ready to write out;
    `orjson.loads`/`json.loads` gives the dict. Bad input lines never raise: they are
    reported through `take_diagnostics()` (and kept verbatim for `take_rejects()`), and the
    stream goes on, unless `on_invalid="fail"`, which closes the open run and stops.

    `rates`: a `RateCard`, a card's path, or None: the bundled card. `CALIBAN_RATES_YAML` is
    not read (the API reads only what it is given); `rates=RateCard.default(os.environ)`
    prices as the command line does without `--rates`. `observer`: told the stream's identity
    (`stream_open`), then each run, turn and tool call as the core makes them
    (translator.encoders.observed), beside the frames. `completion` (`claude-code`): the
    caller's facts each init and result frame is completed with before it is written
    (translator.encoders.claude_code.frames.Completion: caliban-claude's)."""

    def __init__(
        self,
        format: Format = "enriched",
        *,
        session_id: str | None = None,
        include_partial_messages: bool = False,
        results_only: bool = False,
        clock: Clock = "auto",
        live: bool = True,
        rates: Rates = None,
        on_invalid: Literal["report", "fail"] = "report",
        strict: bool = False,
        max_line_bytes: int = 64 << 20,
        source: str = "<stream>",
        observer: Observer | None = None,
        completion: Completion | None = None,
    ) -> None:
        card = _card(rates)
        self.session_id = session_id or str(uuid.uuid4())
        encoder = make_encoder(
            format, session_id=self.session_id, fixed_session_id=bool(session_id),
            include_partial_messages=include_partial_messages,
            results_only=results_only, rates=card, completion=completion,
        )
        base = Options(strict=strict, stop_on_invalid=on_invalid == "fail", max_line_bytes=max_line_bytes)
        self._feed = Feed(new_core(
            encoder, rates=card, options=base, clock=clock, live=live, epoch=time.time() - time.monotonic(),
            source=source, started_at=time.monotonic(), observer=observer,
            stream=StreamId(source, self.session_id, folder_of(source)), adopt=not session_id,
        ))  # fmt: skip
        self._core = self._feed.core
        self._diags: list[str] = []
        self._rejects: list[bytes] = []

    def feed(self, data: bytes, now: float | None = None) -> list[bytes]:
        """Consume a chunk (any split: lines may span chunks; gzip or zstd data is inflated)
        that arrived at `now` (`time.monotonic()` seconds; default: now). Returns the frames
        it completed."""
        if not isinstance(data, (bytes, bytearray, memoryview)):  # else a str fails deep inside, unnamed
            raise TypeError(f"Stream.feed() takes bytes, not {type(data).__name__} (encode text first)")
        now = time.monotonic() if now is None else now
        self._feed.feed(data, now)
        if self._feed.broken is not None:  # nothing more can be read: the input ends here
            self._feed.end(now)
        return self._take()

    def end(self, now: float | None = None) -> list[bytes]:
        """The input ended: a last line without a newline counts; an open run is closed
        with an error result ("the input ended before the run finished")."""
        self._feed.end(time.monotonic() if now is None else now)
        return self._take()

    def cancel(self, now: float | None = None) -> list[bytes]:
        """Stop (e.g. on a signal): an open run is closed as `cancelled`."""
        self._feed.cancel(time.monotonic() if now is None else now)
        return self._take()

    def take_diagnostics(self) -> list[str]:
        """One line per bad input line or recovery notice since the last call: `translator: <source>:<line>: …`."""
        diags, self._diags = self._diags, []
        return diags

    def take_rejects(self) -> bytes:
        """The rejected input lines since the last call, verbatim, each with its newline."""
        rejects, self._rejects = self._rejects, []
        return b"".join(rejects)

    @property
    def stopped(self) -> bool:
        """True after `end()`, `cancel()`, or a bad line under `on_invalid="fail"`."""
        return self._core.stopped

    @property
    def run_open(self) -> bool:
        """A run has begun and has not had its result yet."""
        return self._core.run_open

    @property
    def results(self) -> int:
        """How many runs have had their result frame."""
        return self._core.runs_closed

    @property
    def last_subtype(self) -> str | None:
        """The last result's subtype (success, error, max_turns, cancelled, …)."""
        return self._core.last_subtype

    @property
    def bad_lines(self) -> int:
        return self._core.bad_lines

    @property
    def clock(self) -> str:
        """The clock the durations use (wall, recorded or estimated), once the first event has decided it."""
        return self._core.clock

    def _take(self) -> list[bytes]:
        """The frames, for the caller now; the diagnostics and rejects, kept for theirs."""
        taken = self._feed.take()
        self._diags += taken.said
        self._rejects += taken.rejects
        return taken.frames


def _chunks(data: Input) -> Iterator[bytes]:
    if isinstance(data, bytes):
        yield data
    elif isinstance(data, str):
        if data.strip() and "\n" not in data and not data.lstrip().startswith("{"):  # a file's name, by all signs
            raise TypeError(f"the input is its content, not a path: pass open({data!r}, 'rb')")
        yield data.encode()
    elif hasattr(data, "read"):  # a binary file, or a text one (`open(path)`): its str as UTF-8
        while chunk := data.read(READ_SIZE):
            yield chunk.encode() if isinstance(chunk, str) else chunk
    elif isinstance(data, PathLike):  # else "'PosixPath' object is not iterable"
        raise TypeError(f"the input is its content, not a path: pass open({fspath(data)!r}, 'rb')")
    else:
        for item in data:
            if isinstance(item, bytes):
                yield item
            elif isinstance(item, str):
                yield item.encode()
            else:
                yield orjson.dumps(item, option=orjson.OPT_APPEND_NEWLINE)


def translate_bytes(
    data: Input,
    format: Format = "enriched",
    *,
    on_diagnostic: Callable[[str], None] | None = None,
    clock: Clock = "auto",
    **options: Unpack[StreamOptions],
) -> Iterator[bytes]:
    """Like `translate()`, but each frame as its JSON line (bytes ending in a newline)."""
    stream = Stream(format, clock=clock, live=False, **options)
    if on_diagnostic is None:
        import logging  # only a caller that leaves diagnostics to the logger pays for it

        on_diagnostic = logging.getLogger("translator").warning
    report = on_diagnostic
    for taken in steps(stream._feed, _chunks(data)):  # reach-in: this module's own Stream, whose steps these are
        yield from taken.frames
        for line in taken.said:
            report(line)


@overload
def translate(
    data: Input,
    format: Literal["enriched"] = "enriched",
    *,
    on_diagnostic: Callable[[str], None] | None = None,
    clock: Clock = "auto",
    **options: Unpack[StreamOptions],
) -> Iterator[EnrichedFrame]: ...


@overload
def translate(
    data: Input,
    format: Literal["claude-code"],
    *,
    on_diagnostic: Callable[[str], None] | None = None,
    clock: Clock = "auto",
    **options: Unpack[StreamOptions],
) -> Iterator[ClaudeCodeFrame]: ...


def translate(
    data: Input,
    format: Format = "enriched",
    *,
    on_diagnostic: Callable[[str], None] | None = None,
    clock: Clock = "auto",
    **options: Unpack[StreamOptions],
) -> Iterator[EnrichedFrame | ClaudeCodeFrame]:
    """Translate one whole input stream (a saved log) into its output frames, as dicts.

    `data`: the agent's raw events or headless stream-json, as bytes or str (a str of one line
    that is no JSON object is a TypeError: a file's name, read as content, would give nothing), a file object
    (binary or text), or an iterable of chunks (bytes/str, joined as they are: a file's lines keep their
    newlines) or of events as dicts. `format`: "enriched" (default) or "claude-code"; the
    frames are typed per format (translator.schema.frames: `EnrichedFrame`, `ClaudeCodeFrame`,
    narrowed by their "type").
    `options`: those of `Stream` (session_id, include_partial_messages, results_only, rates,
    on_invalid, strict, max_line_bytes, source). The clock defaults to the events' own stamps
    when they have them, else the ttft/tbt estimate, so a replay's durations do not depend on
    how fast it is read. A bad line is passed to `on_diagnostic` (default: a warning on the
    "translator" logger) and skipped. `rates=None` is the bundled card: the environment is not
    read (for the command's choice, `CALIBAN_RATES_YAML` when set, pass
    `rates=RateCard.default(os.environ)`)."""
    for line in translate_bytes(data, format, on_diagnostic=on_diagnostic, clock=clock, **options):
        yield orjson.loads(line)


__all__ = [
    "CLOCKS",
    "FORMATS",
    "Clock",
    "Format",
    "Frame",
    "Input",
    "Rates",
    "Stream",
    "StreamOptions",
    "core_options",
    "translate",
    "translate_bytes",
]
