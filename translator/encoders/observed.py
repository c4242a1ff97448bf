"""The watch: what the core produces, told beside the frames to whatever is not an output format
(telemetry, session files, the results table's rows, the metrics), through one channel.

The core knows nothing of it: a shell that wants a stream watched passes an `Observer` and the
stream's identity to `feed.new_core`, which puts `Observed` between the core and the stream's
encoder. Every move goes on to the encoder unchanged (the frames are the same bytes watched or
not); the observer is told first, with the time the fold worked out for it (the run's clock:
wall, recorded or estimated, as the frames are timed). The stream's identity (`StreamId`) is
decided once, where the stream opens, and told first (`stream_open`): every watcher files the
stream under that one session id. An observer never raises into the core: what it cannot do it
counts and says itself.

- `Observer`: one stream's moves; `FanOut`: several observers of one stream as one;
- `Kept`: an observer whose moves wait until the step's frames are written (`Hold.drain`), so a
  live stream's frames never wait for a file write or an exporter;
- `Watch`: what a shell holds for the process (an observer per stream, drained after each
  step); `watch_of()` makes one of several.
"""

from __future__ import annotations

import os
import posixpath
import re
import threading
import uuid
from collections.abc import Callable
from typing import Any, NamedTuple, Protocol

from translator.encoders import Encoder, RunSummary
from translator.model import HeadlessFrame, SystemFrame, ToolCallEnd, ToolCallStart, TurnEnd, TurnStart


class StreamId(NamedTuple):
    """Who a stream is, decided once: the source as shown, the session id every output files
    it under, and the working directory it ran in (the session file's project folder)."""

    source: str
    session_id: str
    cwd: str


NAMESPACE = uuid.UUID("7b7c2f0e-49a1-4b5e-9c1d-0c6a1e5d2b49")  # this tool's uuid5 namespace
_PLAIN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")  # one folder's file name: never `..`, never a `/`


def plain(session_id: str) -> bool:
    """Whether an id can name a file as it is (letters, digits, `.`, `_`, `-`; a letter or digit
    first): an id is data — a log's own, a client's — and only such a one is used in a path."""
    return _PLAIN.fullmatch(session_id) is not None


def session_id_of(source: str) -> str:
    """A log's session id: uuid5 of its full path or URL, its bytes (a UTF-8 name: of its text),
    the same on every replay and in every mode (the batch's, the direct shell's)."""
    import hashlib  # (only for a named log: ~1 ms at the first import)

    digest = hashlib.sha1(NAMESPACE.bytes + os.fsencode(source)).digest()  # uuid.uuid5 takes text only
    return str(uuid.UUID(bytes=digest[:16], version=5))


def identity(source: str, given: str | None, nth: int = 0) -> StreamId:
    """Who a stream of the shells is: `given` (--session-id) if any, else for a file or URL the
    id of its full path (of the path and `nth` for a followed file's later streams: cut back or
    replaced, another conversation), else (stdin, a socket's connection) a random one; its
    folder the file's (a URL's), else the working directory. A headless log's own init may
    still name it (Observed, unless `given`)."""
    named = "://" in source or os.path.isfile(source)
    if given is not None:
        session = given
    elif named:
        path = source if "://" in source else os.path.abspath(source)
        session = session_id_of(path if nth == 0 else f"{path}#{nth}")
    else:
        session = str(uuid.uuid4())
    return StreamId(source, session, folder_of(source))


def folder_of(source: str) -> str:
    """The folder a log is in (a URL's own), or the working directory for stdin and sockets:
    the project a replayed session is filed under."""
    if "://" in source:
        return posixpath.dirname(source)
    return os.path.dirname(os.path.abspath(source)) if os.path.isfile(source) else os.getcwd()


MOVES = frozenset({"stream_open", "run_start", "turn_start", "tool_start", "tool_end", "turn_end", "run_end", "prompt",
                   "interrupted", "headless_frame"})  # fmt: skip


class Observer(Protocol):
    """One input stream's runs as they happen (`t`: Unix seconds on the run's clock). `timed`:
    whether it needs the moves' times (else the fold may leave them 0 for a format that
    writes none: the table's rows and the metrics do not). It may say which moves it acts
    on (`takes`, read by `takes()`): the others are not told it, so a watcher that needs few
    costs the stream nothing for the rest (no tee between the fold and the encoder for them,
    no prompt looked for)."""

    timed: bool

    def stream_open(self, stream: StreamId, t: float) -> None: ...
    def run_start(self, model: str | None, t: float) -> None: ...
    def turn_start(self, ev: TurnStart, t: float) -> None: ...
    def tool_start(self, ev: ToolCallStart, t: float) -> None: ...
    # `input` is the call's input as decoded from its deltas (the encoder's `tool_call`)
    def tool_end(self, tool_use_id: str, name: str | None, input: Any, end: ToolCallEnd, t: float) -> None: ...
    # `cost` priced by the same rate card as the frames
    def turn_end(self, ev: TurnEnd, model: str | None, cost: float, t: float) -> None: ...
    def run_end(self, run: RunSummary, t: float) -> None: ...
    # The next (or open) run's prompt, from the shell that has it before the run (the shim)
    def prompt(self, content: Any, t: float) -> None: ...
    # The app interrupted the open run (the shim)
    def interrupted(self, t: float) -> None: ...
    # A frame of the agent's headless stream-json as read, before the moves made of it (where
    # the log says what no move does: its init's cwd, an echoed prompt)
    def headless_frame(self, frame: HeadlessFrame, t: float) -> None: ...


def takes(observer: Observer) -> frozenset[str]:
    """The moves `observer` acts on: those its `takes` names, every move for one that names none
    (an observer of the library's user)."""
    named: frozenset[str] = getattr(observer, "takes", MOVES)
    return named


# Observed's tees: each of the encoder's moves, by the observer's moves it tells (stream_open:
# the first move of any of them opens the stream).
TEES = {"run_start": {"stream_open", "run_start"}, "turn_start": {"turn_start"}, "tool_start": {"tool_start"},
        "tool_call": {"tool_end"}, "turn_end": {"turn_end"}, "result": {"stream_open", "run_end"},
        "headless_frame": {"stream_open", "headless_frame"}}  # fmt: skip


class Observed:
    """An encoder that tells `observer` each move, then hands it to `inner`. The stream opens
    at its first move, as `stream` (None: the caller opened it, the shim's one session over its
    backends' translations): a headless log whose first line is its init names it itself, with
    its session id (unless `adopt` is false: --session-id wins) and working directory, as the
    frames do. It asks the fold for times when the observer needs them even if the inner
    format writes none (`timed`), the one cost of watching. A move the observer does not take
    goes straight to `inner` (its method bound here: no tee)."""

    def __init__(self, inner: Encoder, observer: Observer, stream: StreamId | None = None, t: float = 0.0,
                 adopt: bool = True) -> None:  # fmt: skip
        self.inner = inner
        self.observer = observer
        self.timed = inner.timed or observer.timed
        # The bulk goes straight through, bound once rather than looked up (`__getattr__`) per call.
        self.raw_deltas, self.text_delta, self.thinking_delta = inner.raw_deltas, inner.text_delta, inner.thinking_delta
        self.tool_input, self.passthrough = inner.tool_input, inner.passthrough
        wanted = takes(observer)
        for move, tells in TEES.items():
            if wanted.isdisjoint(tells) and hasattr(inner, move):
                setattr(self, move, getattr(inner, move))
        self.opening = stream  # until the first move
        self.opened_at = t
        self.adopt = adopt

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def _open(self, frame: HeadlessFrame | None = None) -> None:
        stream, self.opening = self.opening, None
        assert stream is not None
        if isinstance(frame, SystemFrame) and frame.subtype == "init":
            session = (frame.own_session() if self.adopt else None) or stream.session_id
            stream = StreamId(stream.source, session, frame.cwd or stream.cwd)
        self.observer.stream_open(stream, self.opened_at)

    def run_start(self, model: str | None, t: float) -> None:
        if self.opening is not None:
            self._open()
        self.observer.run_start(model, t)
        self.inner.run_start(model, t)

    def turn_start(self, ev: TurnStart, t: float) -> None:
        self.observer.turn_start(ev, t)
        self.inner.turn_start(ev, t)

    def tool_start(self, ev: ToolCallStart, t: float) -> None:
        self.observer.tool_start(ev, t)
        self.inner.tool_start(ev, t)

    def tool_call(self, tool_use_id: str, name: str | None, input: Any, end: ToolCallEnd, t: float) -> None:
        self.observer.tool_end(tool_use_id, name, input, end, t)
        self.inner.tool_call(tool_use_id, name, input, end, t)

    def turn_end(self, ev: TurnEnd, model: str | None, cost: float, t: float) -> None:
        self.observer.turn_end(ev, model, cost, t)
        self.inner.turn_end(ev, model, cost, t)

    def result(self, run: RunSummary, t: float) -> None:
        if self.opening is not None:  # (a result alone: a run that failed before it began)
            self._open()
        self.observer.run_end(run, t)
        self.inner.result(run, t)

    def headless_frame(self, frame: HeadlessFrame, line: bytes, t: float, moves: bool) -> None:
        if self.opening is not None:
            self._open(frame)
        self.observer.headless_frame(frame, t)
        self.inner.headless_frame(frame, line, t, moves)  # type: ignore[attr-defined]  # (HeadlessOutput's)


class Quiet:
    """An observer told nothing it acts on: a watcher names only the moves it needs, and takes
    (`takes`) just those it defines."""

    timed = False
    takes: frozenset[str] = frozenset()

    def __init_subclass__(cls) -> None:
        super().__init_subclass__()
        cls.takes = frozenset(move for move in MOVES if getattr(cls, move) is not getattr(Quiet, move))

    def stream_open(self, stream: StreamId, t: float) -> None:
        pass

    def run_start(self, model: str | None, t: float) -> None:
        pass

    def turn_start(self, ev: TurnStart, t: float) -> None:
        pass

    def tool_start(self, ev: ToolCallStart, t: float) -> None:
        pass

    def tool_end(self, tool_use_id: str, name: str | None, input: Any, end: ToolCallEnd, t: float) -> None:
        pass

    def turn_end(self, ev: TurnEnd, model: str | None, cost: float, t: float) -> None:
        pass

    def run_end(self, run: RunSummary, t: float) -> None:
        pass

    def prompt(self, content: Any, t: float) -> None:
        pass

    def interrupted(self, t: float) -> None:
        pass

    def headless_frame(self, frame: HeadlessFrame, t: float) -> None:
        pass


class FanOut:
    """Several observers of one stream, told each move in turn (the one assembler)."""

    def __init__(self, observers: list[Observer]) -> None:
        self.observers = observers
        self.timed = any(o.timed for o in observers)
        self.takes = frozenset[str]().union(*map(takes, observers))

    def stream_open(self, stream: StreamId, t: float) -> None:
        for o in self.observers:
            o.stream_open(stream, t)

    def run_start(self, model: str | None, t: float) -> None:
        for o in self.observers:
            o.run_start(model, t)

    def turn_start(self, ev: TurnStart, t: float) -> None:
        for o in self.observers:
            o.turn_start(ev, t)

    def tool_start(self, ev: ToolCallStart, t: float) -> None:
        for o in self.observers:
            o.tool_start(ev, t)

    def tool_end(self, tool_use_id: str, name: str | None, input: Any, end: ToolCallEnd, t: float) -> None:
        for o in self.observers:
            o.tool_end(tool_use_id, name, input, end, t)

    def turn_end(self, ev: TurnEnd, model: str | None, cost: float, t: float) -> None:
        for o in self.observers:
            o.turn_end(ev, model, cost, t)

    def run_end(self, run: RunSummary, t: float) -> None:
        for o in self.observers:
            o.run_end(run, t)

    def prompt(self, content: Any, t: float) -> None:
        for o in self.observers:
            o.prompt(content, t)

    def interrupted(self, t: float) -> None:
        for o in self.observers:
            o.interrupted(t)

    def headless_frame(self, frame: HeadlessFrame, t: float) -> None:
        for o in self.observers:
            o.headless_frame(frame, t)


class Hold:
    """One watch's queue of moves until the frames are out. `waits`: moves wait for the next
    `drain()` (a streaming shell drains after each step's frames are written; the first drain
    sets it); else they are told at once (a batch's file, the shim). `ready`: whether the
    watchers can be told at all yet (the telemetry's exporter is made on a thread of its own);
    until then everything is kept (at most `bound` moves a stream)."""

    def __init__(self, waits: bool = False, ready: Callable[[], bool] = lambda: True, bound: int = 100_000) -> None:
        self.waits = waits
        self.ready = ready
        self.bound = bound
        self.kept: list[Kept] = []  # the streams with moves kept
        self.lock = threading.Lock()  # (the telemetry's start thread releases too)

    def keep(self, observer: Observer) -> Kept:
        return Kept(self, observer)

    def drain(self) -> None:
        """The step's frames are out: every stream's kept moves told (once the watchers are ready)."""
        self.waits = True
        self.release()

    def release(self) -> None:
        if not self.kept or not self.ready():
            return
        with self.lock:
            kept, self.kept = self.kept, []
        for stream in kept:
            stream.release()


class Kept:
    """One stream's observer under a `Hold`: its moves kept in order, told when released."""

    def __init__(self, hold: Hold, inner: Observer) -> None:
        self.hold = hold
        self.inner = inner
        self.timed = inner.timed
        self.takes = takes(inner)
        self.moves: list[tuple[Callable[..., None], tuple[Any, ...]]] = []
        self.lock = threading.Lock()  # the telemetry's start thread releases while the stream goes on

    def _tell(self, move: Callable[..., None], *args: Any) -> None:
        hold = self.hold
        with self.lock:
            if hold.waits or self.moves or not hold.ready():
                if not self.moves:
                    with hold.lock:
                        hold.kept.append(self)
                if len(self.moves) < hold.bound:
                    self.moves.append((move, args))
                return
        move(*args)

    def release(self) -> None:
        """The kept moves told, in order."""
        with self.lock:
            moves, self.moves = self.moves, []
            for move, args in moves:
                move(*args)

    def stream_open(self, stream: StreamId, t: float) -> None:
        self._tell(self.inner.stream_open, stream, t)

    def run_start(self, model: str | None, t: float) -> None:
        self._tell(self.inner.run_start, model, t)

    def turn_start(self, ev: TurnStart, t: float) -> None:
        self._tell(self.inner.turn_start, ev, t)

    def tool_start(self, ev: ToolCallStart, t: float) -> None:
        self._tell(self.inner.tool_start, ev, t)

    def tool_end(self, tool_use_id: str, name: str | None, input: Any, end: ToolCallEnd, t: float) -> None:
        self._tell(self.inner.tool_end, tool_use_id, name, input, end, t)

    def turn_end(self, ev: TurnEnd, model: str | None, cost: float, t: float) -> None:
        self._tell(self.inner.turn_end, ev, model, cost, t)

    def run_end(self, run: RunSummary, t: float) -> None:
        self._tell(self.inner.run_end, run, t)

    def prompt(self, content: Any, t: float) -> None:
        self._tell(self.inner.prompt, content, t)

    def interrupted(self, t: float) -> None:
        self.inner.interrupted(t)  # at once: a flag on the open run (the shim's control thread), no output

    def headless_frame(self, frame: HeadlessFrame, t: float) -> None:
        self._tell(self.inner.headless_frame, frame, t)


class Watch(Protocol):
    """What a shell holds for the whole process: an observer for each input stream it opens
    (told `stream_open` first), and what they kept, told once the step's frames are written
    (the streaming shells call `drain` then: shell/sink.py)."""

    def observer(self) -> Observer: ...
    def drain(self) -> None: ...


class Watches:
    """Several watches as one: a stream's observers fan out."""

    def __init__(self, watches: list[Watch]) -> None:
        self.watches = watches

    def observer(self) -> Observer:
        return FanOut([w.observer() for w in self.watches])

    def drain(self) -> None:
        for w in self.watches:
            w.drain()


def watch_of(watches: list[Watch]) -> Watch | None:
    """The one watch of several (none: None; one: itself)."""
    if len(watches) < 2:
        return watches[0] if watches else None
    return Watches(watches)


def observer_of(observers: list[Observer]) -> Observer | None:
    """The one observer of several (none: None; one: itself)."""
    if len(observers) < 2:
        return observers[0] if observers else None
    return FanOut(observers)
