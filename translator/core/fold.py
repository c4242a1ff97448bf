"""The run fold: the readers' events move the run's state machine (states.py), the open run
gathers what its result will say (open_run.py), and the encoder is told what happened. Sans I/O and
line-free: `Translator` (translator.py) feeds it and catches what fails."""

from __future__ import annotations

from typing import Any

import msgspec
import orjson

from translator.compressed import MAX_RATIO
from translator.core import jsonl as E
from translator.core.clock import Clock, Source
from translator.core.open_run import OpenRun, summary
from translator.core.rates import RateCard, turn_cost
from translator.core.states import QUIET, STAYS, Move, Recovery, RunState, State
from translator.core.stops import classify
from translator.diagnostics import Notice
from translator.encoders import DECODED, RAW, Encoder, RunSummary
from translator.model import (
    RECORDED,
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
    max_inflate_ratio: int = MAX_RATIO  # compressed input: how far it may expand (0: no limit)
    epoch: float = 0.0  # wall-clock seconds at monotonic 0, for the timestamps frames carry


class RunFold:
    """The runs of one stream, one open at a time."""

    line_no: int
    source: str

    def __init__(self, encoder: Encoder, *, rates: RateCard, options: Options, started_at: float) -> None:
        self.options = options
        self.encoder = encoder
        self.rates = rates
        self._clock = Clock(options.clock, started_at, options.epoch)
        self.frames_closed = 0
        self.last_subtype: str | None = None
        # Set to [] by a shell that wants each closed run with its last turn's model (metrics).
        self.closed: list[tuple[RunSummary, str | None]] | None = None
        self.model: str | None = None
        self._frame: OpenRun | None = None
        self._runs = RunState()  # no run / in run / in turn: moves only through states.TRANSITIONS
        self._move_now = 0.0  # the arrival of the move being made (a recovery closes a run then)
        self._out = encoder.out
        self._diags: list[str] = []
        self._warned: set[str] = set()
        self._orphan_of: Encoder | None = None  # the encoder, while a failed run's rest is skipped
        self._delta_mode = encoder.delta_mode
        # Whether events' times are worked out for the encoder (see _stamp).
        self._timed = encoder.timed or self._clock.kind == RECORDED

    def _end_orphan(self) -> None:
        """The failed run is over (its end, or a new run's start): translate again."""
        if self._orphan_of is not None:
            self._drop_frame()
            self.encoder, self._orphan_of = self._orphan_of, None

    def _abort(self, now: float, error: str) -> None:
        """Close the open frame as an error, whatever happens: if not even its result can be
        written, the plainest one is."""
        if self._frame is None:
            return
        try:
            self._close(now, "error", error)
        except Exception:
            self._drop_frame()
            self.frames_closed += 1
            self.last_subtype = "error"
            self._out.append(plain_result(getattr(self.encoder, "session_id", None), error))

    # ------------------------------------------------------------------ frames and time

    def _stamp(self, now: float, src: Source) -> float:
        """An event's time for the encoder: 0.0 for one whose frames carry none, unless the
        recorded clock reads the event's stamp (it keeps the last one)."""
        return self._clock.stamp(now, src, self._frame) if self._timed else 0.0

    def _use_recorded_clock(self) -> None:
        """`--clock auto` found the first event stamped: the stream is timed by its stamps."""
        self._clock.kind = RECORDED
        self._timed = True

    def _open(self, now: float, src: Source) -> OpenRun:
        self._frame = frame = OpenRun(self._clock.run_start(now, src))
        self.encoder.frame_start(self.model, self._stamp(now, src))
        return frame

    def _close_turn_span(self, fr: OpenRun, now: float, end: TurnEnd | None) -> None:
        self._clock.turn_span(fr, now, end, self._runs.state is State.IN_TURN)

    @property
    def clock(self) -> str:
        """The clock the stream is timed by (`--clock auto` decides at the first event)."""
        return self._clock.kind

    def _now_guess(self) -> float:
        return self._frame.last_now if self._frame is not None else self._clock.started_at

    def _summary(
        self, fr: OpenRun, now: float, subtype: str, error: str | None, end: RunEnd | None
    ) -> RunSummary:
        fr.last_model_src = None  # the run is ending: a long line this points to can go
        duration, ttft = self._clock.durations(fr, now, end)
        return summary(fr, subtype, error, end, duration, ttft, self.clock)

    def _finish(self, run: RunSummary, t: float) -> None:
        if self._orphan_of is not None:  # its result was written when it failed
            self._end_orphan()
            return
        self.encoder.result(run, t)
        if self._frame is not None:
            self._clock.run_closed(self._frame)
        if self.closed is not None:
            self.closed.append((run, (self._frame and self._frame.turn_model) or self.model))
        self._drop_frame()
        self.frames_closed += 1
        self.last_subtype = run.subtype

    def _drop_frame(self) -> None:
        """The open run is over (closed, or given up after a failure)."""
        self._frame = None
        self._move(Move.RUN_END, 0.0)  # no recovery: `now` is not read

    def _move(self, move: str, now: float) -> None:
        """Make a move through the table (states.py); a recovery closes the open run first."""
        runs = self._runs
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
            self._diags.append(Notice(self.source, self.line_no, recovery.kind, recovery.says, recovery.level))
        if recovery.closes is not None:
            self._close(self._move_now, "error", recovery.closes)

    @property
    def in_turn(self) -> bool:
        return self._runs.state is State.IN_TURN

    def _close(self, now: float, subtype: str, error: str | None) -> None:
        """End the open frame without its RunEnd (input cut, signal, rejected input)."""
        fr = self._frame
        if fr is None:
            return
        self._close_turn_span(fr, now, None)
        self._finish(self._summary(fr, now, subtype, error, None), self._stamp(now, None))

    # ------------------------------------------------------------------ events

    def _frame_for(self, now: float, src: Source) -> OpenRun:
        fr = self._frame or self._open(now, src)
        fr.last_now = now
        return fr

    def _model_frame(self, now: float, src: Source) -> OpenRun:
        """`_frame_for` an event of the model streaming (a delta, a turn or a tool call
        starting, a tool's input): the run's first and the turn's last model output are timed."""
        fr = self._frame or self._open(now, src)
        fr.last_now = now
        if fr.first_model_now is None:
            fr.first_model_now = now
        if self._runs.state not in MODEL_STAYS:
            self._move(Move.MODEL, now)
        fr.last_model_now = now
        fr.last_model_src = src
        return fr

    def _deltas(self, run: DeltaRun, now: float, one_by_one: bool = False) -> None:
        """Account a run of text/thinking deltas as one. It is kept for the fallback reply while
        no turn has given one, and handed whole to an encoder that takes it so. `one_by_one`:
        to the encoder delta by delta whatever it asked for (a headless turn's deltas: no
        message follows them that would say what they were)."""
        fr = self._model_frame(now, run.last)
        fr.turn_deltas += run.count
        if fr.fallback is not None:
            fr.fallback.append(run)
        if self._delta_mode == RAW and not one_by_one:
            self.encoder.raw_deltas(run, self._stamp(now, None))
        elif self._delta_mode == DECODED or one_by_one:
            t = self._stamp(now, None)
            text, thinking = self.encoder.text_delta, self.encoder.thinking_delta
            for ev in run.deltas:
                if isinstance(ev, AssistantTextDelta):
                    text(ev, t)
                else:
                    thinking(ev, t)

    def _turn_start(self, ev: TurnStart, now: float, numbered: bool = True) -> None:
        """`numbered`: the agent's own TurnStart, not a headless reader's stand-in (those number
        no runs: a headless run ends at its result or at a new init)."""
        index = ev.turn_index
        if index == 0 and numbered:  # a new run
            self._end_orphan()
        fr = self._frame
        retry = fr is not None and fr.open_index == index
        # turn_index restarts at 0 after a completed turn only with a new run: the previous
        # RunEnd was lost.
        restart = fr is not None and not retry and index == 0 and fr.turns and numbered
        self._move(Move.RETRY if retry else Move.RESTART if restart else Move.TURN_START, now)
        self.model = ev.model if self.model is None else self.model
        fr = self._model_frame(now, ev)
        fr.saw_turn = True
        fr.turn_model = ev.model
        fr.message_ids.append(ev.message_id)
        if retry:
            # The same turn sent again (the agent's max_tokens or drain retry): nothing of
            # the abandoned attempt is the reply. Its deltas still count as API time.
            fr.attempts += 1
            if fr.fallback is not None:
                del fr.fallback[fr.fallback_mark :]
            fr.tools.clear()
            self.encoder.turn_retry(ev, fr.attempts, self._stamp(now, ev))
            return
        fr.open_index = index
        fr.attempts = 0
        fr.fallback_mark = len(fr.fallback) if fr.fallback is not None else 0
        fr.turn_deltas = 0
        self.encoder.turn_start(ev, self._stamp(now, ev))

    def _tool_start(self, ev: ToolCallStart, now: float) -> None:
        fr = self._model_frame(now, ev)
        fr.tools[ev.tool_use_id] = (ev.name, [])
        self.encoder.tool_start(ev, self._stamp(now, ev))

    def _tool_input(self, ev: ToolCallInputDelta, now: float) -> None:
        fr = self._model_frame(now, ev)
        fr.turn_deltas += 1
        tool = fr.tools.get(ev.tool_use_id)
        if tool is None:  # (its ToolCallStart was not seen)
            fr.tools[ev.tool_use_id] = tool = (None, [])
        tool[1].append(ev.partial_json)
        self.encoder.tool_input(ev, self._stamp(now, ev))

    def _tool_end(self, ev: ToolCallEnd, now: float) -> None:
        fr = self._frame or self._open(now, ev)  # (_frame_for, inline: a hot path)
        fr.last_now = now
        if self._runs.state not in TOOL_END_STAYS:
            self._move(Move.TOOL_END, now)
        name, parts = fr.tools.pop(ev.tool_use_id, (None, []))
        fr.tool_calls += 1
        t = self._stamp(now, ev)
        self.encoder.tool_call(ev.tool_use_id, name, tool_input("".join(parts)), ev, t)

    def _turn_end(self, ev: TurnEnd, now: float) -> None:
        fr = self._frame or self._open(now, ev)  # (_frame_for and _close_turn_span, inline)
        fr.last_now = now
        self._clock.turn_span(fr, now, ev, self._runs.state is State.IN_TURN)
        fr.turns += 1
        if fr.first_ttft is None:
            fr.first_ttft = ev.ttft.seconds if ev.ttft is not None else 0.0
        ev.usage.add_to(fr.usage)
        model = fr.turn_model or self.model
        cost = 0.0
        if model is not None:
            rate = self.rates.rate(model)
            if rate is not None:
                cost = turn_cost(rate, ev.usage.counts())
            # A turn of no tokens costs 0 at any rate: a headless turn (the dialect reports
            # tokens and cost once, in its result) is not warned of.
            elif model not in self._warned and any(ev.usage.counts().values()):
                self._warned.add(model)
                self._diags.append(
                    f"translator: warning: no rate for model {model!r}; its cost counts as 0"
                )
        fr.cost += cost
        text, last_block = E.reply(ev.assistant_message.content)
        if text:
            fr.answer = text
            fr.fallback = None
            fr.last_text = last_block
        fr.stop_reason = ev.stop_reason
        self._move(Move.TURN_END, now)
        fr.open_index = None
        fr.turn_deltas = 0
        fr.tools.clear()
        self.encoder.turn_end(ev, model, cost, self._stamp(now, ev))

    def _run_end(self, ev: RunEnd, now: float) -> None:
        fr = self._frame_for(now, ev)
        self._close_turn_span(fr, now, None)
        subtype, error = classify(ev.stopped_for)
        self._finish(self._summary(fr, now, subtype, error, ev), self._stamp(now, ev))


def plain_result(session_id: str | None, error: str) -> bytes:
    """A result frame that needs nothing but its error text: written when an encoder failed
    even to write a run's result, so that the run still has one."""
    frame = {"type": "result", "subtype": "error", "is_error": True, "error": error, "session_id": session_id}
    return orjson.dumps(frame) + b"\n"


def tool_input(raw: str) -> Any:
    """A tool call's input from its concatenated `partial_json`: the parsed JSON, the raw string
    when it does not parse (as the model sent it), `{}` when there was none."""
    if not raw.strip():
        return {}
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return raw
