"""The run fold: the readers' events move the run's state machine (states.py), the open run
gathers what its result will say (open_run.py), and the encoder is told what happened. Sans I/O and
line-free: `Translator` (translator.py) owns one, feeds it and catches what fails.

Its public moves are the raw events' (`turn_start`, `deltas`, `tool_start`, `tool_input`,
`tool_end`, `turn_end`, `run_end`), and what the headless dialect needs besides, said as
arguments of those moves (`numbered=False`, `one_by_one=True`) or as moves of their own
(`open_run`, `new_run`, `tool_use`, `tool_ran`, `close_run`): no reader touches its state."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec
import orjson

from translator.core.clock import Clock, Source
from translator.core.open_run import OpenRun, Totals
from translator.core.rates import RateCard, turn_cost
from translator.core.runs import Runs
from translator.core.states import STAYS, Move, State
from translator.core.stops import classify
from translator.encoders import DECODED, RAW, Encoder
from translator.model import (
    WALL,
    AssistantTextDelta,
    DeltaRun,
    RunEnd,
    ToolCallEnd,
    ToolCallInputDelta,
    ToolCallStart,
    TurnEnd,
    TurnStart,
)

MODEL_STAYS, TOOL_END_STAYS = STAYS[Move.MODEL], STAYS[Move.TOOL_END]  # (the hot handlers' moves)


# A Struct rather than a dataclass: built in C at import (a dataclass costs ~0.5 ms a start).
class Options(msgspec.Struct):
    """What the core needs to know; the CLI fills it."""

    clock: str = WALL  # wall | recorded | estimated
    detect_recorded: bool = False  # --clock auto: use `recorded` if the first event is stamped
    strict: bool = False  # also reject fields serde does not write
    stop_on_invalid: bool = False  # --on-invalid fail
    max_line_bytes: int = 64 << 20
    max_inflate_ratio: int | None = None  # compressed input: how far it may expand (0: no limit; None: the Feed's default)
    epoch: float = 0.0  # wall-clock seconds at monotonic 0, for the timestamps frames carry


class RunFold:
    """The moves of one stream's runs: each event's move through the runs (runs.py), what the
    open run gathers from it, and what the encoder is told."""

    def __init__(
        self,
        encoder: Encoder,
        *,
        rates: RateCard,
        options: Options,
        started_at: float,
        source: str,
        line_no: Callable[[], int],
        diags: list[str],
    ) -> None:
        self.options = options
        self.rates = rates
        clock = Clock(options.clock, started_at, options.epoch)
        self.runs = Runs(encoder, clock, source=source, line_no=line_no, diags=diags)
        self._diags = diags
        self._warned: set[str] = set()
        self._delta_mode = encoder.delta_mode
        # Every raw event but the deltas (which move as runs) goes to its move by class.
        self.moves: dict[type, Callable[[Any, float], None]] = {
            TurnStart: self.turn_start,
            ToolCallStart: self.tool_start,
            ToolCallInputDelta: self.tool_input,
            ToolCallEnd: self.tool_end,
            TurnEnd: self.turn_end,
            RunEnd: self.run_end,
        }

    @property
    def run(self) -> OpenRun | None:
        """The open run (to read: it changes only through the moves)."""
        return self.runs.run

    @property
    def in_turn(self) -> bool:
        return self.runs.in_turn

    def _model_run(self, now: float, src: Source) -> OpenRun:
        """The open run (or a new one) at an event of the model streaming (a delta, a turn or
        a tool call starting, a tool's input): the run's first and the turn's last model
        output are timed."""
        runs = self.runs
        run = runs.run or runs.open(now, src)
        run.last_now = now
        if run.first_model_now is None:
            run.first_model_now = now
        if runs.state.state not in MODEL_STAYS:
            runs.move(Move.MODEL, now)
        run.last_model_now = now
        run.last_model_src = src
        return run

    # ------------------------------------------------------------------ the raw events' moves

    def deltas(self, run: DeltaRun, now: float, one_by_one: bool = False) -> None:
        """Account a run of text/thinking deltas as one. It is kept for the fallback reply while
        no turn has given one, and handed whole to an encoder that takes it so. `one_by_one`:
        to the encoder delta by delta whatever it asked for (a headless turn's deltas: no
        message follows them that would say what they were)."""
        open_run = self._model_run(now, run.last)
        open_run.turn_deltas += run.count
        if open_run.fallback is not None:
            open_run.fallback.append(run)
        runs = self.runs
        if self._delta_mode == RAW and not one_by_one:
            runs.encoder.raw_deltas(run, runs.stamp(now, None))
        elif self._delta_mode == DECODED or one_by_one:
            t = runs.stamp(now, None)
            text, thinking = runs.encoder.text_delta, runs.encoder.thinking_delta
            for ev in run.deltas:
                if isinstance(ev, AssistantTextDelta):
                    text(ev, t)
                else:
                    thinking(ev, t)

    def turn_start(self, ev: TurnStart, now: float, numbered: bool = True) -> None:
        """`numbered`: the agent's own TurnStart, not a headless reader's stand-in (those number
        no runs: a headless run ends at its result or at a new init)."""
        runs = self.runs
        index = ev.turn_index
        if index == 0 and numbered:  # a new run
            runs.end_orphan()
        run = runs.run
        retry = run is not None and run.open_index == index
        # turn_index restarts at 0 after a completed turn only with a new run: the previous
        # RunEnd was lost.
        restart = run is not None and not retry and index == 0 and run.turns and numbered
        runs.move(Move.RETRY if retry else Move.RESTART if restart else Move.TURN_START, now)
        runs.model = ev.model if runs.model is None else runs.model
        run = self._model_run(now, ev)
        run.start_turn(ev, retry)
        if retry:
            runs.encoder.turn_retry(ev, run.attempts, runs.stamp(now, ev))
            return
        runs.encoder.turn_start(ev, runs.stamp(now, ev))

    def tool_start(self, ev: ToolCallStart, now: float) -> None:
        run = self._model_run(now, ev)
        run.tools[ev.tool_use_id] = (ev.name, [])
        self.runs.encoder.tool_start(ev, self.runs.stamp(now, ev))

    def tool_input(self, ev: ToolCallInputDelta, now: float) -> None:
        self._model_run(now, ev).tool_input(ev.tool_use_id, ev.partial_json)
        self.runs.encoder.tool_input(ev, self.runs.stamp(now, ev))

    def tool_end(self, ev: ToolCallEnd, now: float) -> None:
        runs = self.runs
        run = runs.run or runs.open(now, ev)  # (run_for, inline: a hot path)
        run.last_now = now
        if runs.state.state not in TOOL_END_STAYS:
            runs.move(Move.TOOL_END, now)
        name, parts = run.tools.pop(ev.tool_use_id, (None, []))
        run.tool_calls += 1
        t = runs.stamp(now, ev)
        runs.encoder.tool_call(ev.tool_use_id, name, tool_input("".join(parts)), ev, t)

    def turn_end(self, ev: TurnEnd, now: float) -> None:
        runs = self.runs
        run = runs.run or runs.open(now, ev)  # (run_for and close_turn_span, inline)
        run.last_now = now
        runs.clock.turn_span(run, now, ev, runs.state.state is State.IN_TURN)
        model = run.turn_model or runs.model
        cost = self._cost(model, ev)
        run.end_turn(ev, cost)
        runs.move(Move.TURN_END, now)
        run.turn_closed()
        runs.encoder.turn_end(ev, model, cost, runs.stamp(now, ev))

    def _cost(self, model: str | None, ev: TurnEnd) -> float:
        """A turn's price by the rate card (a model without a rate is warned of once)."""
        if model is None:
            return 0.0
        rate = self.rates.rate(model)
        if rate is not None:
            return turn_cost(rate, ev.usage.counts())
        # A turn of no tokens costs 0 at any rate: a headless turn (the dialect reports
        # tokens and cost once, in its result) is not warned of.
        if model not in self._warned and any(ev.usage.counts().values()):
            self._warned.add(model)
            self._diags.append(f"translator: warning: no rate for model {model!r}; its cost counts as 0")
        return 0.0

    def run_end(self, ev: RunEnd, now: float) -> None:
        self.runs.run_for(now, ev)
        subtype, error = classify(ev.stopped_for)
        self.runs.end(now, subtype, error, ev, src=ev)

    # ------------------------------------------------------------------ the headless dialect's

    def new_run(self, now: float, model: str | None = None) -> None:
        """A headless init: the stream's model is the init's (`model`, when it names one), a
        failed run's rest is over, and an open run that had a turn lost its result (the table
        closes it)."""
        runs = self.runs
        if model is not None:
            runs.model = model
        runs.end_orphan()
        if runs.run is not None and runs.run.saw_turn:
            runs.move(Move.NEW_RUN, now)

    def open_run(self, now: float, src: Source) -> OpenRun:
        """The open run, or one opened by a frame of the dialect's own (a headless run's reply
        is found its own way: never from the deltas' fallback)."""
        runs = self.runs
        run = runs.run
        if run is None:
            runs.move(Move.RUN_START, now)
            run = runs.run_for(now, src)
            run.fallback = None
        run.last_now = now
        return run

    def tool_use(self, tool_use_id: str, name: str, input_json: str) -> None:
        """A tool call of the open run known whole at once (a headless tool_use, written after
        it ran): its name and input wait for its end."""
        assert self.runs.run is not None
        self.runs.run.tools[tool_use_id] = (name, [input_json])

    def tool_ran(self, seconds: float) -> None:
        """A tool of the open run ran for `seconds`: its own run time is not API time."""
        assert self.runs.run is not None
        self.runs.run.api_s -= seconds

    def close_run(self, end: RunEnd, now: float, t: float, totals: Totals) -> None:
        """Close the open run at what stands for its RunEnd (a headless result, or the next
        echoed prompt), with what the dialect reports once, at its end (`totals`)."""
        subtype, error = classify(end.stopped_for)
        self.runs.end(now, subtype, error, end, t=t, totals=totals)


def tool_input(raw: str) -> Any:
    """A tool call's input from its concatenated `partial_json`: the parsed JSON, the raw string
    when it does not parse (as the model sent it), `{}` when there was none."""
    if not raw.strip():
        return {}
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return raw
