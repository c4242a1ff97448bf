"""Output formats. The fold decides what happened; an encoder decides how it is written.

Every encoder appends complete, newline-terminated JSON frames to the `out` list it was given.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from translator.events import Event


@dataclass(slots=True)
class RunSummary:
    """What one input frame (one run) came to; the result frame is written from this."""

    session_id: str
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
    stopped_for: Any  # RunEnd.stopped_for as the agent wrote it; None when synthesized


class Encoder(Protocol):
    """The frames an output format writes, one method per thing the fold observes."""

    wants_deltas: bool  # whether text/thinking deltas must be decoded for this encoder

    def init(self, session_id: str, model: str | None) -> None: ...
    def text_delta(self, ev: Event) -> None: ...
    def thinking_delta(self, ev: Event) -> None: ...
    def tool_call(self, tool_use_id: str, name: str | None, input: Any, end: Event) -> None: ...
    def turn_end(self, ev: Event) -> None: ...
    def result(self, run: RunSummary) -> None: ...
    def passthrough(self, line: bytes) -> None: ...
