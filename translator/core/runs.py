"""The runs of one stream, one open at a time: each opened, timed and closed with its result,
through the one table of moves (states.py), with what its recoveries say. The fold (fold.py)
owns one and makes its moves through it; sans I/O, and the time of each move passed in."""

from __future__ import annotations

from collections.abc import Callable

import orjson

from translator.core.clock import Clock, Source
from translator.core.open_run import OpenRun, Totals, summary
from translator.core.states import QUIET, Move, Recovery, RunState, State
from translator.diagnostics import Notice
from translator.encoders import SILENT, Encoder, RunSummary
from translator.model import RECORDED, RunEnd, TurnEnd


class Runs:
    """The open run (`run`, None between runs), the state it is in (`state`, moved only by
    `move`), the clock that times it, and the encoder its frames go to (`encoder`: nothing
    while a failed run's rest is read)."""

    def __init__(
        self,
        encoder: Encoder,
        clock: Clock,
        *,
        source: str,
        line_no: Callable[[], int],
        diags: list[str],
    ) -> None:
        self.encoder = encoder
        self.clock = clock
        self.source = source
        self._line_no = line_no  # the line being read (the facade counts them), for what is said
        self._diags = diags
        self.run: OpenRun | None = None
        self.state = RunState()  # no run / in run / in turn: moves only through states.TRANSITIONS
        self.runs_closed = 0
        self.last_subtype: str | None = None
        self.model: str | None = None  # the stream's model (the first turn's, or a headless init's)
        self._move_now = 0.0  # the arrival of the move being made (a recovery closes a run then)
        self._out = encoder.out
        self._orphan_of: Encoder | None = None  # the encoder, while a failed run's rest is skipped
        # Whether events' times are worked out for the encoder (see stamp).
        self.timed = encoder.timed or clock.kind == RECORDED

    @property
    def in_turn(self) -> bool:
        return self.state.state is State.IN_TURN

    def use_recorded_clock(self) -> None:
        """`--clock auto` found the first event stamped: the stream is timed by its stamps."""
        self.clock.kind = RECORDED
        self.timed = True

    def stamp(self, now: float, src: Source) -> float:
        """An event's time for the encoder: 0.0 for one whose frames carry none, unless the
        recorded clock reads the event's stamp (it keeps the last one)."""
        return self.clock.stamp(now, src, self.run) if self.timed else 0.0

    def now_guess(self) -> float:
        """The latest arrival known (for a stop that comes with no time of its own)."""
        return self.run.last_now if self.run is not None else self.clock.started_at

    def move(self, move: str, now: float) -> None:
        """Make a move through the table (states.py); a recovery closes the open run first."""
        runs = self.state
        to = QUIET[move].get(runs.state)
        if to is not None:  # (the table's own entry: nothing said or closed)
            runs.state = to
            return
        self._move_now = now
        runs.move(move, self._recover)

    def _recover(self, recovery: Recovery) -> None:
        """A recovery move is said at the line it happened (not while a failed run's rest is
        read into nothing: that run has its result and its report), then closes what it closes."""
        if self._orphan_of is None:
            self._diags.append(Notice(self.source, self._line_no(), recovery.kind, recovery.says, recovery.level))
        if recovery.closes is not None:
            self.close(self._move_now, "error", recovery.closes)

    # ------------------------------------------------------------------ opening

    def open(self, now: float, src: Source) -> OpenRun:
        self.run = run = OpenRun(self.clock.run_start(now, src))
        self.encoder.run_start(self.model, self.stamp(now, src))
        return run

    def run_for(self, now: float, src: Source) -> OpenRun:
        """The open run, or a new one; `now` is its latest arrival."""
        run = self.run or self.open(now, src)
        run.last_now = now
        return run

    def close_turn_span(self, run: OpenRun, now: float, end: TurnEnd | None) -> None:
        self.clock.turn_span(run, now, end, self.state.state is State.IN_TURN)

    # ------------------------------------------------------------------ closing

    def skip_rest(self) -> None:
        """A run failed: the rest of it is read into nothing, so that it has one result."""
        if self._orphan_of is None:
            self._orphan_of, self.encoder = self.encoder, SILENT

    def end_orphan(self) -> None:
        """The failed run is over (its end, or a new run's start): translate again."""
        if self._orphan_of is not None:
            self._drop()
            self.encoder, self._orphan_of = self._orphan_of, None

    def summary(self, run: OpenRun, now: float, subtype: str, error: str | None, end: RunEnd | None) -> RunSummary:
        """What the run came to (see open_run.summary), timed by the clock."""
        run.last_model_src = None  # the run is ending: a long line this points to can go
        duration, ttft = self.clock.durations(run, now, end)
        result = summary(run, subtype, error, end, duration, ttft, self.clock.kind)
        result.model = run.turn_model or self.model
        return result

    def finish(self, run: RunSummary, t: float) -> None:
        """The open run's result is written (unless its failure wrote one) and the run is over."""
        if self._orphan_of is not None:  # its result was written when it failed
            self.end_orphan()
            return
        self.encoder.result(run, t)
        if self.run is not None:
            self.clock.run_closed(self.run)
        self._drop()
        self.runs_closed += 1
        self.last_subtype = run.subtype

    def _drop(self) -> None:
        """The open run is over (closed, or given up after a failure)."""
        self.run = None
        self.move(Move.RUN_END, 0.0)  # no recovery: `now` is not read

    def input_end(self, now: float) -> None:
        """The input ended: an open run is closed (the table says how)."""
        self.move(Move.INPUT_END, now)

    def end(
        self,
        now: float,
        subtype: str,
        error: str | None,
        end: RunEnd | None,
        *,
        src: Source = None,
        t: float | None = None,
        totals: Totals | None = None,
    ) -> None:
        """The one way the open run closes, whatever closes it (its RunEnd, what stands for
        one in the headless dialect, or the translator: input cut, signal, rejected input):
        its last span timed, its result written at `t` (default: `src`'s time, read after the
        summary), with what a headless run reports once (`totals`)."""
        run = self.run
        assert run is not None
        self.close_turn_span(run, now, None)
        if totals is not None and run.answer is None and totals.answer is not None:
            run.answer = totals.answer
        result = self.summary(run, now, subtype, error, end)
        if totals is not None:
            result.usage = totals.usage
            if totals.upstream is not None:  # repaired key by key, keeping its order and every key it has
                result.upstream = totals.upstream
                if totals.cost_usd is not None:  # the agent's figure is the run's cost
                    result.cost_usd = totals.cost_usd
            result.tool_calls = totals.tool_calls
        self.finish(result, self.stamp(now, src) if t is None else t)

    def close(self, now: float, subtype: str, error: str | None) -> None:
        """End the open run without its RunEnd (input cut, signal, rejected input)."""
        if self.run is not None:
            self.end(now, subtype, error, None)

    def abort(self, now: float, error: str) -> None:
        """Close the open run as an error, whatever happens: if not even its result can be
        written, the plainest one is."""
        if self.run is None:
            return
        try:
            self.close(now, "error", error)
        except Exception:
            self._drop()
            self.runs_closed += 1
            self.last_subtype = "error"
            self._out.append(plain_result(getattr(self.encoder, "session_id", None), error))


def plain_result(session_id: str | None, error: str) -> bytes:
    """A result frame that needs nothing but its error text: written when an encoder failed
    even to write a run's result, so that the run still has one."""
    frame = {"type": "result", "subtype": "error", "is_error": True, "error": error, "session_id": session_id}
    return orjson.dumps(frame) + b"\n"
