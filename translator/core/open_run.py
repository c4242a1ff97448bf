"""The state of one open run, the same for both input dialects (the headless reader keeps its
own in its reader): what the result will say, and what the clock needs to time it. The fold
changes it through the bookkeeping here; readers only read it."""

from __future__ import annotations

from typing import Any

import msgspec

from translator.core import jsonl as E
from translator.core.stops import variant
from translator.encoders import RunSummary
from translator.model import AssistantTextDelta, DeltaRun, Event, RunEnd, TurnEnd, TurnStart

MAX_MS = 1 << 53  # the largest integer every JSON reader takes exactly


def to_ms(seconds: float) -> int:
    """Whole milliseconds, never negative and never more than a JSON number holds exactly."""
    ms = seconds * 1000
    return round(min(ms, MAX_MS)) if ms > 0 else 0


class OpenRun:
    """State of one open run. Nothing in it outlives the run."""

    __slots__ = (
        "answer",
        "api_s",
        "attempts",
        "cost",
        "fallback",
        "fallback_mark",
        "first_model_now",
        "first_ttft",
        "last_model_now",
        "last_model_src",
        "last_now",
        "last_text",
        "message_ids",
        "open_index",
        "saw_turn",
        "stop_reason",
        "t_prev_end",
        "t_start",
        "tool_calls",
        "tools",
        "turn_deltas",
        "turn_model",
        "turns",
        "usage",
    )  # fmt: skip

    def __init__(self, t_start: float | None) -> None:
        self.t_start = t_start  # clock time the frame began (None for the estimated clock)
        self.t_prev_end = t_start  # end of the previous turn, where the next API span begins
        self.api_s = 0.0
        self.turns = 0
        self.usage: dict[str, int] = {"input_tokens": 0, "output_tokens": 0}
        self.cost = 0.0
        self.tool_calls = 0
        self.answer: str | None = None
        # Runs of delta lines, kept only while no turn has produced a reply: they are the
        # fallback reply.
        self.fallback: list[DeltaRun] | None = []
        self.fallback_mark = 0  # where the open turn's attempt began in `fallback`
        self.saw_turn = False
        self.open_index: int | None = None  # turn_index of the TurnStart awaiting its TurnEnd
        self.attempts = 0  # retries of the open turn so far
        self.turn_model: str | None = None
        self.turn_deltas = 0
        self.last_model_now = 0.0  # arrival of the turn's latest model-streamed event
        self.last_model_src: Event | None = None  # that event, for its recorded time
        self.tools: dict[str, tuple[str | None, list[str]]] = {}
        self.last_now = 0.0
        self.first_model_now: float | None = None  # arrival of the run's first model event
        self.first_ttft: float | None = None  # the first turn's reported ttft (seconds)
        self.stop_reason: str | None = None  # the last turn's
        self.message_ids: list[str] = []
        self.last_text: str | None = None  # the last non-empty text block of any turn

    def start_turn(self, ev: TurnStart, retry: bool) -> None:
        """A turn starts, or (`retry`) the open one is sent again: the agent's max_tokens or
        drain retry, nothing of whose abandoned attempt is the reply (its deltas still count
        as API time)."""
        self.saw_turn = True
        self.turn_model = ev.model
        self.message_ids.append(ev.message_id)
        if retry:
            self.attempts += 1
            if self.fallback is not None:
                del self.fallback[self.fallback_mark :]
            self.tools.clear()
            return
        self.open_index = ev.turn_index
        self.attempts = 0
        self.fallback_mark = len(self.fallback) if self.fallback is not None else 0
        self.turn_deltas = 0

    def end_turn(self, ev: TurnEnd, cost: float) -> None:
        """What a turn's end adds to the run (the turn is closed by `turn_closed`, after the move)."""
        self.turns += 1
        if self.first_ttft is None:
            self.first_ttft = ev.ttft.seconds if ev.ttft is not None else 0.0
        ev.usage.add_to(self.usage)
        self.cost += cost
        text, last_block = E.reply(ev.assistant_message.content)
        if text:
            self.answer = text
            self.fallback = None
            self.last_text = last_block
        self.stop_reason = ev.stop_reason

    def turn_closed(self) -> None:
        self.open_index = None
        self.turn_deltas = 0
        self.tools.clear()

    def tool_input(self, tool_use_id: str, partial_json: str) -> None:
        """A piece of a tool call's input (its ToolCallStart may not have been seen)."""
        self.turn_deltas += 1
        tool = self.tools.get(tool_use_id)
        if tool is None:
            self.tools[tool_use_id] = tool = (None, [])
        tool[1].append(partial_json)


class Totals(msgspec.Struct):
    """What a headless run reports once, at its end (the fold's `close_run` takes it)."""

    usage: dict[str, int]
    tool_calls: int
    answer: str | None = None  # the reply, where no message frame gave one (partial messages)
    upstream: dict[str, Any] | None = None  # the agent's own result frame, as read
    cost_usd: float | None = None


def summary(
    run: OpenRun, subtype: str, error: str | None, end: RunEnd | None, duration: float, ttft: float | None, clock: str
) -> RunSummary:
    """What the run came to: its state, its end (None when the translator closed it), and how
    long it took by `clock`."""
    stop_kind, stop_value = variant(None if end is None else end.stopped_for)
    return RunSummary(
        subtype=subtype,
        error=error,
        answer=run.answer,
        fallback_text=fallback_text(run.fallback) if run.answer is None and run.fallback else "",
        turns=run.turns if end is None else end.turn_count,
        usage=run.usage,  # the sum of TurnEnd.usage, as the agent's driver reports it
        cost_usd=run.cost,
        duration_ms=to_ms(duration),
        duration_api_ms=to_ms(run.api_s),
        duration_source=clock,
        tool_calls=run.tool_calls,
        turns_without_edit=None if end is None else end.turns_without_edit,
        no_edit_nudge_emitted=None if end is None else end.no_edit_nudge_emitted,
        stop_kind=stop_kind,
        stop_value=stop_value,
        stop_reason=run.stop_reason,
        ttft_ms=None if ttft is None else to_ms(ttft),
        message_ids=run.message_ids,
        last_text=run.last_text,
        tools_running=bool(run.tools),
        final_messages=None if end is None else end.final_messages,
    )


def fallback_text(kept: list[DeltaRun]) -> str:
    """The run's text deltas joined (used only when no turn gave a reply)."""
    return "".join(ev.text for run in kept for ev in run.deltas if type(ev) is AssistantTextDelta)
