"""The exporter kept off a live stream's path: importing the SDK and building its providers
(~0.3-0.5 s) happens on a thread of its own, so that the first frames never wait for it, and in
a shell that drains its watch after each step's frames are written (shell/sink.py), a step's
moves are told to the SDK then, not between the frames. The moves wait in the watch's one queue
(encoders/observed.Hold: in order, at most KEPT a stream) and are told to the stream's session
at the next drain once the exporter is ready (at once, where nobody drains: the shim), at the
latest when it is closed."""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from translator.encoders import RunSummary
from translator.encoders.observed import MOVES, Hold, Observer, StreamId
from translator.model import HeadlessFrame, ToolCallEnd, ToolCallStart, TurnEnd, TurnStart
from translator.telemetry.settings import Settings

if TYPE_CHECKING:
    from translator.telemetry.exporter import Telemetry
    from translator.telemetry.session import Session

EVERY = MOVES - {"interrupted", "headless_frame"}  # (nothing of these two is exported)
# What the counters alone need (no logs, no spans): a run's model, its turns' usage and its end.
COUNTED = frozenset({"stream_open", "run_start", "turn_end", "run_end"})
KEPT = 100_000  # moves kept per stream until the exporter is ready (a bound, never reached in practice)
CLOSE_S = 4.0  # as exporter.CLOSE_S: the most the exit waits, the start included


class Deferred:
    """A `Watch` whose exporter is being made on its own thread."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.exporter: Telemetry | None = None
        self.hold = Hold(ready=lambda: self.exporter is not None, bound=KEPT)
        self.thread = threading.Thread(target=self._start, name="telemetry-start", daemon=True)
        self.thread.start()

    def _start(self) -> None:
        self.exporter = made(self.settings)
        self.hold.release()  # what was kept so far goes out now, not at the next drain (an idle follower has none)

    def observer(self, resumed: bool = False) -> Observer:
        """A stream's observer (`resumed`: the shim's --resume, Claude Code's start_type resume)."""
        return self.hold.keep(Opening(lambda: self.exporter, resumed, detailed(self.settings)))

    def drain(self) -> None:
        """The step's frames are out: what the streams kept, told now (once the exporter is ready)."""
        self.hold.drain()

    def close(self, within: float = CLOSE_S) -> None:
        """What every stream kept told, then the last exports; within `within` seconds all told."""
        began = time.monotonic()
        self.thread.join(within)
        if self.exporter is None:
            return  # (never ready: what was kept is lost with the process)
        self.hold.release()
        self.exporter.close(max(0.0, within - (time.monotonic() - began)))


def made(settings: Settings) -> Telemetry:
    """The exporter, the SDK imported and its providers built with the cyclic collector paused,
    then frozen: ~0.3 s of allocations that are never garbage would make the collector run and
    run again over them (a full collection of the SDK's ~100k objects took 20-45 ms, more than
    a 20 MB replay's telemetry), and every later full collection would walk them again."""
    was = gc.isenabled()
    gc.disable()
    try:
        from translator.telemetry.exporter import Telemetry

        exporter = Telemetry(settings)
        gc.freeze()
    finally:
        if was:
            gc.enable()
    return exporter


def detailed(settings: Settings) -> bool:
    """Whether log events or spans are exported (else only the counters are fed)."""
    return "logs" in settings.signals or "traces" in settings.signals


class Opening:
    """One stream's observer: its Claude Code session, made when the stream opens (under its
    one identity), from the exporter `exporter()` gives (a worker's, or the deferred one once
    ready: the hold tells nothing before). `detailed`: events or spans are exported, which take
    every move, timed; the counters alone take four (COUNTED), untimed, so the fold tells it no
    tool's move, no turn's start and no prompt (~60% of a stream's moves, and no prompt looked
    for), and works out no time for it."""

    def __init__(self, exporter: Callable[[], Telemetry | None], resumed: bool = False, detailed: bool = True) -> None:
        self.exporter = exporter
        self.resumed = resumed
        self.timed = detailed
        self.takes = EVERY if detailed else COUNTED
        self.session: Session | None = None

    def stream_open(self, stream: StreamId, t: float) -> None:
        """The session, made once: a stream opens once (the shim's one session is opened before
        its backends' translations open it again)."""
        if self.session is None and (exporter := self.exporter()) is not None:
            self.session = exporter.stream(stream.source, stream.session_id, t, self.resumed)

    def _tell(self, name: str, *args: Any) -> None:
        if self.session is not None:
            getattr(self.session, name)(*args)

    def run_start(self, model: str | None, t: float) -> None:
        self._tell("run_start", model, t)

    def turn_start(self, ev: TurnStart, t: float) -> None:
        self._tell("turn_start", ev, t)

    def tool_start(self, ev: ToolCallStart, t: float) -> None:
        self._tell("tool_start", ev, t)

    def tool_end(self, tool_use_id: str, name: str | None, input: Any, end: ToolCallEnd, t: float) -> None:
        self._tell("tool_end", tool_use_id, name, input, end, t)

    def turn_end(self, ev: TurnEnd, model: str | None, cost: float, t: float) -> None:
        self._tell("turn_end", ev, model, cost, t)

    def run_end(self, run: RunSummary, t: float) -> None:
        self._tell("run_end", run, t)

    def prompt(self, content: Any, t: float) -> None:
        self._tell("prompt", content, t)

    def interrupted(self, t: float) -> None:
        pass  # (nothing of it is exported)

    def headless_frame(self, frame: HeadlessFrame, t: float) -> None:
        pass  # (nothing of a headless frame is exported but what its moves say)
