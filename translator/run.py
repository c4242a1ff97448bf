"""The state of one open run, the same for both input dialects (the headless reader keeps its
own in its reader): what the result will say, and what the clock needs to time it."""

from __future__ import annotations

from translator.events import Event
from translator.model import DeltaRun

MAX_MS = 1 << 53  # the largest integer every JSON reader takes exactly


def to_ms(seconds: float) -> int:
    """Whole milliseconds, never negative and never more than a JSON number holds exactly."""
    ms = seconds * 1000
    return round(min(ms, MAX_MS)) if ms > 0 else 0


class Frame:
    """State of one open input frame (one run). Nothing in it outlives the frame."""

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
        self.last_model_src: bytes | Event | None = None  # that event, for its recorded time
        self.tools: dict[str, tuple[str | None, list[str]]] = {}
        self.last_now = 0.0
        self.first_model_now: float | None = None  # arrival of the run's first model event
        self.first_ttft: float | None = None  # the first turn's reported ttft (seconds)
        self.stop_reason: str | None = None  # the last turn's
        self.message_ids: list[str] = []
        self.last_text: str | None = None  # the last non-empty text block of any turn
