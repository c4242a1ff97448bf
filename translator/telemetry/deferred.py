"""The exporter kept off a live stream's path: importing the SDK and building its providers
(~0.3-0.5 s) happens on a thread of its own, so that the first frames never wait for it, and in
a shell that drains its watch after each step's frames are written (shell/sink.py), a step's
moves are told to the SDK then, not between the frames. What a stream's runs do meanwhile is kept
(in order, at most KEPT moves) and told to its session at the next drain once the exporter is
ready (at once, where nobody drains: the shim), at the latest when it is closed."""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any

from translator.encoders import RunSummary
from translator.model import HeadlessFrame, ToolCallEnd, ToolCallStart, TurnEnd, TurnStart
from translator.telemetry.settings import Settings

if TYPE_CHECKING:
    from translator.telemetry.exporter import Telemetry
    from translator.telemetry.session import Session

KEPT = 100_000  # moves kept per stream until the exporter is ready (a bound, never reached in practice)
CLOSE_S = 4.0  # as exporter.CLOSE_S: the most the exit waits, the start included


class Deferred:
    """A `Watch` whose exporter is being made on its own thread."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.exporter: Telemetry | None = None
        self.drained = False  # a shell drains it after each step: moves wait for that
        self.waiting: list[Pending] = []  # streams that have kept moves
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._start, name="telemetry-start", daemon=True)
        self.thread.start()

    def _start(self) -> None:
        from translator.telemetry.exporter import Telemetry

        self.exporter = Telemetry(self.settings)
        self.catch_up()  # what was kept so far goes out now, not at the next drain (an idle follower has none)

    def catch_up(self) -> None:
        with self.lock:
            waiting, self.waiting = self.waiting, []
        for pending in waiting:
            pending.catch_up()

    def stream(self, source: str, session_id: str, t: float, resumed: bool = False) -> Pending:
        pending = Pending(self, source, session_id, t, resumed)
        self.wait(pending)
        return pending

    def wait(self, pending: Pending) -> None:
        with self.lock:
            self.waiting.append(pending)

    def drain(self) -> None:
        """The step's frames are out: what the streams kept, told now (once the exporter is ready)."""
        self.drained = True
        if self.exporter is not None and self.waiting:
            self.catch_up()

    def close(self, within: float = CLOSE_S) -> None:
        """What every stream kept told, then the last exports; within `within` seconds all told."""
        began = time.monotonic()
        self.thread.join(within)
        if self.exporter is None:
            return  # (never ready: what was kept is lost with the process)
        self.catch_up()
        self.exporter.close(max(0.0, within - (time.monotonic() - began)))


class Pending:
    """One stream's observer: its moves kept until the exporter is ready, then its session's."""

    def __init__(self, deferred: Deferred, source: str, session_id: str, t: float, resumed: bool = False) -> None:
        self.deferred = deferred
        self.opened = (source, session_id, t, resumed)
        self.session: Session | None = None
        self.kept: list[tuple[str, tuple[Any, ...]]] = []
        self.lock = threading.Lock()  # the start thread catches up while the stream goes on

    def catch_up(self) -> None:
        """Become the session (once the exporter is there) and tell it what was kept."""
        with self.lock:
            exporter = self.deferred.exporter
            if self.session is None and exporter is not None:
                self.session = exporter.stream(*self.opened)
            if self.session is not None:
                kept, self.kept = self.kept, []
                for name, args in kept:
                    getattr(self.session, name)(*args)

    def _tell(self, name: str, *args: Any) -> None:
        with self.lock:
            session = self.session
            if session is None or self.deferred.drained:  # kept for the next drain
                if not self.kept:
                    self.deferred.wait(self)
                if len(self.kept) < KEPT:
                    self.kept.append((name, args))
                return
        getattr(session, name)(*args)

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

    def headless_frame(self, frame: HeadlessFrame, t: float) -> None:
        pass  # (nothing of a headless frame is exported but what its moves say)

    def prompted(self, text: str) -> None:
        self._tell("prompted", text)
