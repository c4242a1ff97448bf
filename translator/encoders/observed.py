"""What the core produces, watched beside the frames: runs, turns and tool calls with their
times, for the exporters that are not an output format (telemetry, session files).

The core knows nothing of it: a shell that wants to watch a stream passes an `Observer` to
`feed.new_core`, which puts `Observed` between the core and the stream's encoder. Every move
goes on to the encoder unchanged (the frames are the same bytes watched or not); the observer
is told first, with the time the fold worked out for it (the run's clock: wall, recorded or
estimated, as the frames are timed). An observer never raises into the core: what it cannot
do it counts and says itself.
"""

from __future__ import annotations

from typing import Any, Protocol

from translator.encoders import Encoder, RunSummary
from translator.model import HeadlessFrame, ToolCallEnd, ToolCallStart, TurnEnd, TurnStart


class Observer(Protocol):
    """One input stream's runs as they happen (`t`: Unix seconds on the run's clock)."""

    def run_start(self, model: str | None, t: float) -> None: ...
    def turn_start(self, ev: TurnStart, t: float) -> None: ...
    def tool_start(self, ev: ToolCallStart, t: float) -> None: ...
    # `input` is the call's input as decoded from its deltas (the encoder's `tool_call`)
    def tool_end(self, tool_use_id: str, name: str | None, input: Any, end: ToolCallEnd, t: float) -> None: ...
    # `cost` priced by the same rate card as the frames
    def turn_end(self, ev: TurnEnd, model: str | None, cost: float, t: float) -> None: ...
    def run_end(self, run: RunSummary, t: float) -> None: ...
    # A frame of the agent's headless stream-json as read, before the moves made of it (where
    # the log says what no move does: its init's cwd, an echoed prompt)
    def headless_frame(self, frame: HeadlessFrame, t: float) -> None: ...


class Observed:
    """An encoder that tells `observer` each move, then hands it to `inner`. It asks the fold
    for times even when the inner format writes none (`timed`), the one cost of watching."""

    def __init__(self, inner: Encoder, observer: Observer) -> None:
        self.inner = inner
        self.observer = observer
        self.timed = True
        # The bulk goes straight through, bound once rather than looked up (`__getattr__`) per call.
        self.raw_deltas, self.text_delta, self.thinking_delta = inner.raw_deltas, inner.text_delta, inner.thinking_delta
        self.tool_input, self.passthrough = inner.tool_input, inner.passthrough

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def run_start(self, model: str | None, t: float) -> None:
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
        self.observer.run_end(run, t)
        self.inner.result(run, t)

    def headless_frame(self, frame: HeadlessFrame, line: bytes, t: float, moves: bool) -> None:
        self.observer.headless_frame(frame, t)
        self.inner.headless_frame(frame, line, t, moves)  # type: ignore[attr-defined]  # (HeadlessOutput's)


class Watch(Protocol):
    """What a shell holds for the whole process: an observer for each input stream it opens
    (a stream is one session: the same session id as its frames)."""

    def stream(self, source: str, session_id: str, t: float) -> Observer: ...
    # What its observers kept to do after the frames (the file writes of --transcripts), done:
    # the streaming shells call it after each step's frames are written (shell/sink.py)
    def drain(self) -> None: ...


class Observers:
    """Several observers of one stream, told each move in turn."""

    def __init__(self, observers: list[Observer]) -> None:
        self.observers = observers

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

    def headless_frame(self, frame: HeadlessFrame, t: float) -> None:
        for o in self.observers:
            o.headless_frame(frame, t)


class Watches:
    """Several watches as one (--transcripts and the telemetry at once): a stream's observers fan out."""

    def __init__(self, watches: list[Watch]) -> None:
        self.watches = watches

    def stream(self, source: str, session_id: str, t: float) -> Observer:
        return Observers([w.stream(source, session_id, t) for w in self.watches])

    def drain(self) -> None:
        for w in self.watches:
            w.drain()
