"""The output formats by name, and the one factory every caller builds its encoders with (the
library API, the command line, the batch replay): a format's name → a fresh encoder for one
input stream."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, Protocol

from translator.encoders import Encoder
from translator.encoders.enriched import EnrichedEncoder

if TYPE_CHECKING:
    from translator.encoders.claude_code.frames import Completion

Format = Literal["enriched", "claude-code"]
FORMATS: tuple[Format, ...] = ("enriched", "claude-code")


class Limits(Protocol):
    """What an encoder needs of a rate card (core.rates.RateCard): a model's context window and
    output limit, as Claude Code reports them."""

    def limits(self, model: str) -> tuple[int, int]: ...


def make_encoder(
    format: Format,
    session_id: str,
    *,
    rates: Limits,
    include_partial_messages: bool = False,
    results_only: bool = False,
    new_id: Callable[[], str] | None = None,
    fixed_session_id: bool = False,
    completion: Completion | None = None,
) -> Encoder:
    """A fresh encoder of one output format, for one input stream. `fixed_session_id`: the
    user chose `session_id`; otherwise `claude-code` takes headless input's own (its init's).
    `completion`: what completes `claude-code`'s init and result frames (caliban-claude's)."""
    if format == "claude-code":
        from translator.encoders.claude_code import ClaudeCodeEncoder  # only its users pay for it

        extra: dict[str, Any] = {} if new_id is None else {"new_id": new_id}
        if completion is not None:
            extra["completion"] = completion
        return ClaudeCodeEncoder(
            [], session_id=session_id, fixed_session_id=fixed_session_id, partial=include_partial_messages,
            results_only=results_only, limits=rates.limits, **extra,
        )
    if format == "enriched":
        return EnrichedEncoder(
            [], session_id=session_id, partial=include_partial_messages, results_only=results_only
        )
    raise ValueError(f"unknown format {format!r}: expected one of {', '.join(FORMATS)}")
