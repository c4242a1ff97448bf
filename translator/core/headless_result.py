"""The agent's headless stream-json (its "Dialect B", ADR 0025), read as input.

The reader (headless.py) maps its frames onto the fold's moves; this module holds the
rest of what is specific to the dialect: how its result's subtype maps back to a stop reason.
(The repair of an upstream result frame is output: translator/encoders/enriched.py.)"""

from __future__ import annotations

import re
from typing import Any

from msgspec import Raw

from translator.core.stops import THINKING_BUDGET, UNSTATED
from translator.model import ResultFrame, RunEnd, Usage, provider_error

RESULT = "result"  # the type of a run's last frame (snake_case; the raw events' are PascalCase)
# What the agent writes in a headless result's `error` for the stops that say their cause
# (caliban f33a2d0, agent-core stream/recovery.rs and stream/mod.rs): read back into that stop, as
# the raw events would have named it. Any other text ("Error") is a cause the dialect does not say.
STOP_TEXTS = {"Model declined to respond.": "Refusal", "Response blocked by content filter.": "ContentFilter"}
HOOK_DENIED = ("before_run: ", "before_turn: ", "after_turn: ", "before_tool hook failed: ")
# The driver's text for `StreamIdle` (whole seconds). Its provider's idle error is written alike
# ("stream idle for {:?}") but never ends a run as a `ProviderError`: the agent turns it into
# this stop (agent-core stream/mod.rs).
IDLE = re.compile(r"stream idle for (\d+)s")


def stopped_for(result: ResultFrame) -> Any:
    """The raw events' `stopped_for` that gives this result's subtype (and error text): for
    `error`, the stop its message names, else `Error` (its cause unknown here)."""
    subtype, error = result.subtype, result.error
    if subtype == "success":
        return "EndOfTurn"
    if subtype == "max_turns":
        return {"MaxTurnsReached": result.turns or 0}
    if subtype == "cancelled":
        return "Cancelled"
    if subtype == "max_tokens":
        return "MaxTokensExhausted"
    if subtype == "budget_exceeded":
        return {"BudgetExceeded": error or "budget exceeded"}
    if error is None:  # (a subtype the agent does not write says what it is)
        return {"Error": UNSTATED if subtype == "error" else subtype}
    idle = IDLE.fullmatch(error)
    if idle:  # before the provider's messages: one of them starts alike
        return {"StreamIdle": {"secs": int(idle[1]), "nanos": 0}}
    if provider_error(error):
        return {"ProviderError": error}
    if error == THINKING_BUDGET:
        return "ThinkingBudgetExhausted"
    stop = STOP_TEXTS.get(error) or ("HookDenied" if error.startswith(HOOK_DENIED) else "Error")
    return {stop: error}


def run_end(result: ResultFrame) -> RunEnd:
    """A `RunEnd` standing for an upstream result frame (tokens are the result's flat totals)."""
    return RunEnd(
        final_messages=Raw(b"[]"),
        total_usage=Usage(input_tokens=result.total_input_tokens or 0, output_tokens=result.total_output_tokens or 0),
        turn_count=result.turns or 0,
        stopped_for=stopped_for(result),
        turns_without_edit=result.turns_without_edit or 0,
        no_edit_nudge_emitted=result.no_edit_nudge_emitted is True,
    )

