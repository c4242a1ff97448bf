"""The agent's headless stream-json (its "Dialect B", ADR 0025), read as input.

The fold maps these frames onto the raw events' handlers; this module holds what is specific
to the dialect: its frame names, how its result's subtype maps back to a stop reason, and the
repair of an upstream result frame (ADR 0049 fixes for builds that predate it).
"""

from __future__ import annotations

from typing import Any

from msgspec import Raw

from translator.encoders import RunSummary
from translator.model import RunEnd, Usage
from translator.provider_errors import recognise

# The dialect's frame types (snake_case; the raw events' are PascalCase).
SYSTEM, USER, TEXT, THINKING = "system", "user", "text", "thinking"
TOOL_USE, TOOL_RESULT, MESSAGE, RESULT = "tool_use", "tool_result", "message", "result"
WARNING, HOOK_EVENT = "warning", "hook_event"

ADR_0049_KEYS = ("num_turns", "is_error", "duration_ms", "usage")


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


def repair(upstream: dict[str, Any], run: RunSummary) -> dict[str, Any]:
    """The upstream result with ADR 0049 applied.

    A frame from a build that has ADR 0049 (it carries one of its keys) is correct as printed:
    its values pass through and only the translator's own measurements are added
    (`duration_api_ms`, `duration_source`, after `duration_ms`). An older build's frame gets
    `result` = the final assistant message (when the stream showed one) and every ADR 0049 key
    it lacks, from what the translator saw and measured. Repairing twice is repairing once."""
    success = upstream.get("subtype") == "success"
    if any(key in upstream for key in ADR_0049_KEYS):
        return _with_timing(upstream, run)
    frame = dict(upstream)
    if success and run.answer is not None:
        frame["result"] = run.answer
    added: dict[str, Any] = {
        "num_turns": frame.get("turns", run.turns),
        "is_error": not success,
        "duration_ms": run.duration_ms,
        "duration_api_ms": run.duration_api_ms,
        "duration_source": run.duration_source,
        "usage": {
            "input_tokens": frame.get("total_input_tokens", run.usage["input_tokens"]),
            "output_tokens": frame.get("total_output_tokens", run.usage["output_tokens"]),
        },
    }
    if not success:
        if run.answer is not None:
            added["last_assistant_text"] = run.answer
        added["tool_calls_seen"] = run.tool_calls
    for key, value in added.items():
        frame.setdefault(key, value)
    return frame


def _with_timing(upstream: dict[str, Any], run: RunSummary) -> dict[str, Any]:
    """A post-ADR 0049 frame as it is, plus the translator's API time and clock name (placed
    after `duration_ms`, as in the results the translator writes itself) unless present."""
    timing = {"duration_api_ms": run.duration_api_ms, "duration_source": run.duration_source}
    timing = {k: v for k, v in timing.items() if k not in upstream}
    if not timing:
        return upstream
    frame: dict[str, Any] = {}
    for key, value in upstream.items():
        frame[key] = value
        if key == "duration_ms":
            frame.update(timing)
    frame.update({k: v for k, v in timing.items() if k not in frame})
    return frame
