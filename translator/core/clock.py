"""How a stream's times are read, behind one interface: `wall` (arrival), `recorded` (the
events' own stamps) or `estimated` (the ttft/tbt the agent reported; the same bytes then give
the same frames however they arrive)."""

from __future__ import annotations

from translator.core import jsonl as E
from translator.core.open_run import OpenRun
from translator.model import ESTIMATED, RECORDED, WALL, Event, TurnEnd

# What an event's recorded time is read from: a typed event (raw, or a headless frame).
Source = Event | None


class Clock:
    """One stream's clock. `now` is always the arrival (monotonic seconds)."""

    def __init__(self, kind: str, started_at: float, epoch: float) -> None:
        self.kind = kind  # wall | recorded | estimated
        self.started_at = started_at
        self.epoch = epoch  # wall-clock seconds at monotonic 0, for the timestamps frames carry
        self._first_run = True
        self._last_ts: float | None = None
        self._estimated_s = 0.0  # estimated API time of the stream's closed runs

    def stamp(self, now: float, src: Source, run: OpenRun | None) -> float:
        """Wall-clock seconds of an event, for the timestamps frames carry. With the estimated
        clock, never the arrival: the stream's start plus the API time estimated so far (it
        grows at each TurnEnd), so the same bytes give the same frames however they arrive."""
        if self.kind == RECORDED:
            return self.when(now, src)
        if self.kind == ESTIMATED:
            return self.epoch + self.started_at + self._estimated_s + (run.api_s if run is not None else 0.0)
        return now + self.epoch

    def when(self, now: float, src: Source) -> float:
        """The clock time of an event: its arrival (wall) or its own stamp (recorded)."""
        if self.kind != RECORDED:
            return now
        ts = None if src is None else E.timestamp_s(src.ts, src.timestamp)
        if ts is None:
            return self._last_ts if self._last_ts is not None else 0.0
        self._last_ts = ts
        return ts

    def run_start(self, now: float, src: Source) -> float | None:
        """When a run opening now began (None for the estimated clock)."""
        if self.kind == ESTIMATED:
            t_start = None
        elif self._first_run and self.kind == WALL:
            t_start = self.started_at  # a live stream's first run began when we started reading
        else:
            t_start = self.when(now, src)
        self._first_run = False
        return t_start

    def turn_span(self, run: OpenRun, now: float, end: TurnEnd | None, in_turn: bool) -> None:
        """Add the API time of the turn just ended (or cut off) to the run."""
        if self.kind == ESTIMATED:
            if end is not None:
                ttft = end.ttft.seconds if end.ttft is not None else 0.0
                tbt = end.tbt.seconds if end.tbt is not None else 0.0
                run.api_s += ttft + tbt * max(run.turn_deltas - 1, 0)
            return
        if in_turn and run.t_prev_end is not None:
            run.api_s += max(self.when(run.last_model_now, run.last_model_src) - run.t_prev_end, 0.0)
        if end is not None:
            run.t_prev_end = self.when(now, end)

    def durations(self, run: OpenRun, now: float, end: Source) -> tuple[float, float | None]:
        """A closing run's duration and time to its first model output (None: not known)."""
        if self.kind == ESTIMATED:
            return run.api_s, run.first_ttft
        ttft = None
        if run.first_model_now is not None and run.t_start is not None and self.kind == WALL:
            ttft = run.first_model_now - run.t_start
        t_end = self.when(now, end) if end is not None else (now if self.kind == WALL else (self._last_ts or 0.0))
        return t_end - (run.t_start or 0.0), ttft

    def run_closed(self, run: OpenRun) -> None:
        if self.kind == ESTIMATED:
            self._estimated_s += run.api_s
