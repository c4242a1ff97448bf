"""Output formats. The fold decides what happened; an encoder decides how it is written.

Every encoder appends complete, newline-terminated JSON frames to its `out` list. Each method
is told `t`, the event's wall-clock time in Unix seconds (for the timestamps a format carries).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import msgspec

from translator.model import (
    AssistantTextDelta,
    AssistantThinkingDelta,
    DeltaRun,
    ToolCallEnd,
    ToolCallInputDelta,
    ToolCallStart,
    TurnEnd,
    TurnStart,
)

# How an encoder takes the text/thinking deltas (the bulk of a stream):
SKIP = "skip"  # not at all: the fold counts them (decoded and checked like every line)
RAW = "raw"  # a run of them at once, as one `DeltaRun` (raw_deltas)
DECODED = "decoded"  # decoded, one call per delta (and tool-input deltas as they come)


# A Struct rather than a dataclass: built in C at import (a dataclass costs ~0.5 ms a start).
class RunSummary(msgspec.Struct):
    """What one run came to; its result frame is written from this."""

    subtype: str  # success | error | max_turns | cancelled | max_tokens
    error: str | None  # for subtype "error"
    answer: str | None  # the last non-empty assistant reply, if any turn had one
    fallback_text: str  # all text deltas of the run, used only when `answer` is None
    turns: int
    usage: dict[str, int]  # the agent's semantics: input_tokens includes the cache counters
    cost_usd: float
    duration_ms: int
    duration_api_ms: int
    duration_source: str  # wall | recorded | estimated
    tool_calls: int
    turns_without_edit: int | None  # None when the run had no RunEnd
    no_edit_nudge_emitted: bool | None
    stop_reason: str | None = None  # the last turn's
    ttft_ms: int | None = None  # time to the run's first model output, where it is known
    message_ids: list[str] | None = None  # the provider's message id of each turn
    last_text: str | None = None  # the last non-empty text block of any turn
    tools_running: bool = False  # the run ended with a tool call started but not finished
    upstream: dict[str, Any] | None = None  # the agent's own result frame (headless input)
    # `RunEnd.stopped_for` read once (stops.variant): the variant's name (None when the
    # translator closed the run itself) and its value.
    stop_kind: str | None = None
    stop_value: Any = None
    # RunEnd's whole history as it came (a reference, never decoded here; None when the translator
    # closed the run itself): where a raw log keeps the run's prompt, for the session files.
    final_messages: msgspec.Raw | None = None
    # The model of the run's last turn (the stream's, before any turn): what its cost is counted under.
    model: str | None = None


class Encoder(Protocol):
    """The frames an output format writes, one method per thing the fold observes."""

    out: list[bytes]  # one frame (a line, newline included) per item
    delta_mode: str  # SKIP, RAW or DECODED
    # Whether any frame it writes carries the times (`t`) it is told: when none does, the fold
    # does not work them out (on the recorded clock it still reads each event's stamp) and tells 0.0.
    timed: bool

    def run_start(self, model: str | None, t: float) -> None: ...
    def turn_start(self, ev: TurnStart, t: float) -> None: ...
    # The open turn sent again (same turn_index before its TurnEnd): `attempt` is 1, 2, …
    def turn_retry(self, ev: TurnStart, attempt: int, t: float) -> None: ...
    def text_delta(self, ev: AssistantTextDelta, t: float) -> None: ...
    def thinking_delta(self, ev: AssistantThinkingDelta, t: float) -> None: ...
    def raw_deltas(self, run: DeltaRun, t: float) -> None: ...
    def tool_start(self, ev: ToolCallStart, t: float) -> None: ...
    def tool_input(self, ev: ToolCallInputDelta, t: float) -> None: ...
    def tool_call(self, tool_use_id: str, name: str | None, input: Any, end: ToolCallEnd, t: float) -> None: ...
    def turn_end(self, ev: TurnEnd, model: str | None, cost: float, t: float) -> None: ...
    def result(self, run: RunSummary, t: float) -> None: ...
    def passthrough(self, line: bytes) -> None: ...


class _Silent:
    """An encoder that writes nothing: a failed run's rest is read into it."""

    def __getattr__(self, name: str) -> Callable[..., None]:
        return lambda *args, **kwargs: None


SILENT: Any = _Silent()
