"""The agent's headless stream-json (its "Dialect B", ADR 0025), read as input.

The fold maps these frames onto the raw events' handlers; this module holds what is specific
to the dialect: its frame names and how its result's subtype maps back to a stop reason. (The
repair of an upstream result frame is output: translator/encoders/enriched.py.)
"""

from __future__ import annotations

from typing import Any

from msgspec import Raw

from translator.encoders.provider_errors import recognise
from translator.model import RunEnd, Usage

# The dialect's frame types (snake_case; the raw events' are PascalCase).
SYSTEM, USER, TEXT, THINKING = "system", "user", "text", "thinking"
TOOL_USE, TOOL_RESULT, MESSAGE, RESULT = "tool_use", "tool_result", "message", "result"
WARNING, HOOK_EVENT = "warning", "hook_event"


def stopped_for(result: dict[str, Any]) -> Any:
    """The raw events' `stopped_for` that gives this result's subtype (and error text)."""
    subtype = result.get("subtype")
    error = result.get("error")
    if subtype == "success":
        return "EndOfTurn"
    if subtype == "max_turns":
        return {"MaxTurnsReached": result.get("turns", 0)}
    if subtype == "cancelled":
        return "Cancelled"
    if subtype == "max_tokens":
        return "MaxTokensExhausted"
    if subtype == "budget_exceeded":
        return {"BudgetExceeded": error or "budget exceeded"}
    return {"ProviderError" if recognise(error) else "Error": error or str(subtype)}


def run_end(result: dict[str, Any]) -> RunEnd:
    """A `RunEnd` standing for an upstream result frame (tokens are the result's flat totals)."""
    return RunEnd(
        final_messages=Raw(b"[]"),
        total_usage=Usage(
            input_tokens=_count(result.get("total_input_tokens")),
            output_tokens=_count(result.get("total_output_tokens")),
        ),
        turn_count=_count(result.get("turns")),
        stopped_for=stopped_for(result),
        turns_without_edit=_count(result.get("turns_without_edit")),
        no_edit_nudge_emitted=result.get("no_edit_nudge_emitted") is True,
    )


def _count(value: Any) -> int:
    return value if type(value) is int and value >= 0 else 0
