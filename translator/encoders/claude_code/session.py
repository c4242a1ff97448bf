"""`--format claude-code`'s session: what Claude Code adds up across the stream (cost, API
time, model usage, results written) and the result frame each run ends with."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from translator.encoders import RunSummary
from translator.encoders.claude_code.frames import (
    SUBAGENT_STATS,
    TERMINAL_REASONS,
    add_model_usage,
    cc_turns,
    result_usage,
    wire_usage,
)
from translator.encoders.provider_errors import ApiError


class Session:
    """The totals one Claude Code session keeps across its runs, and its result frames."""

    def __init__(
        self,
        session_id: str,
        *,
        partial: bool,
        frames: bool,
        limits: Callable[[str], tuple[int, int]],
        new_id: Callable[[], str],
    ) -> None:
        self.session_id = session_id
        self.partial = partial
        self.frames = frames
        self.limits = limits  # model -> (context window, max output tokens)
        self.new_id = new_id
        self.result_index = 0
        self.cost = 0.0
        self.api_ms = 0
        self.model_usage: dict[str, dict[str, Any]] = {}
        self.frame_model_usage: dict[str, dict[str, Any]] = {}  # since the last result

    def new_frame(self) -> None:
        self.frame_model_usage = {}

    def add(self, model: str, wire: dict[str, int], cost: float) -> None:
        """A turn's usage (Anthropic's counters) and cost, or a headless run's totals."""
        for table in (self.frame_model_usage, self.model_usage):
            add_model_usage(table, model, wire, cost, self.limits)
        self.cost += cost

    def result(self, run: RunSummary, error: ApiError | None) -> dict[str, Any]:
        """The run's result frame; `error`: what Claude Code reports for its provider error."""
        self.api_ms += run.duration_api_ms
        kind, value = run.stop_kind, run.stop_value
        frame: dict[str, Any] = {
            "duration_api_ms": self.api_ms,
            "stop_reason": run.stop_reason,
            "session_id": self.session_id,
            "total_cost_usd": self.cost,
            "usage": result_usage(wire_usage(run.usage), api_error=error is not None),
            "modelUsage": self.model_usage,
            "permission_denials": [],
            "terminal_reason": "completed",
            "fast_mode_state": "off",
            "fast_mode_disabled_reason": "",
            "subagent_stats": SUBAGENT_STATS,
            "safety_stops": 0,
            "is_error": run.subtype != "success",
            "num_turns": cc_turns(run.turns, kind),
        }
        success = kind == "EndOfTurn"
        if success:
            answer = run.last_text if run.last_text is not None else (run.answer or run.fallback_text)
            frame.update(subtype="success", api_error_status=None, result=answer, ttft_ms=run.ttft_ms or 0)
        elif kind == "BudgetExceeded":
            frame["terminal_reason"] = "budget_exhausted"
            frame["subtype"] = "error_max_budget_usd"
            frame["errors"] = [str(value)]
        elif kind == "MaxTurnsReached":
            frame["terminal_reason"] = "max_turns"
            frame["subtype"] = "error_max_turns"
            frame["errors"] = [f"Reached maximum number of turns ({value})"]
        elif error is not None:
            frame.update(stop_reason="stop_sequence", terminal_reason="api_error", subtype="success")
            frame.update(api_error_status=error.status, api_error_type=error.type, result=error.text)
        else:
            if kind is None:  # no RunEnd: our own cancellation (a signal), or a cut
                running = run.subtype == "cancelled" and run.tools_running
                frame["terminal_reason"] = "aborted_tools" if running else "aborted_streaming"
            elif kind in TERMINAL_REASONS:
                frame["terminal_reason"] = TERMINAL_REASONS[kind]
            else:  # a cause not known here
                del frame["terminal_reason"]
            frame["subtype"] = "error_during_execution"
            frame["errors"] = [run.error or f"the run was {run.subtype}"]
        frame.update(type="result", duration_ms=run.duration_ms, uuid=self.new_id())
        if self.partial:
            frame["begun_message_ids"] = run.message_ids or []
        if success:
            ttft = run.ttft_ms or 0
            frame.update(ttft_stream_ms=ttft, time_to_request_ms=0, first_content_frame_ms=ttft)
        frame.update(queued_turn_count=0, result_index=self.result_index)
        if self.frames:  # `--output-format json` has no per-result model usage
            frame["model_usage_since_last_result"] = self.frame_model_usage
        if run.upstream is not None and "structured_output" in run.upstream:  # the agent's --json-schema answer
            frame["structured_output"] = run.upstream["structured_output"]
        self.result_index += 1
        return frame
