"""The default format: the agent's own headless stream-json, with the ADR 0049 result frame
(written from the run, or repaired from the agent's own result frame when the input is headless).

Keys keep the agent's names and order; the Claude Code names (`num_turns`, `usage`, `is_error`,
`duration_ms`) ride alongside the legacy ones, plus `duration_api_ms` and `duration_source`.
"""

from __future__ import annotations

from typing import Any

import orjson

from translator.encoders import DECODED, SKIP, RunSummary
from translator.model import (
    CACHE_KEYS,
    AssistantTextDelta,
    AssistantThinkingDelta,
    DeltaRun,
    HeadlessFrame,
    ResultFrame,
    SystemFrame,
    ToolCallEnd,
    ToolCallInputDelta,
    ToolCallStart,
    TurnEnd,
    TurnStart,
)

_NL = orjson.OPT_APPEND_NEWLINE
COST_DECIMALS = 10  # far below a cent; drops the float noise of summing per-turn costs
ADR_0049_KEYS = ("num_turns", "is_error", "duration_ms", "usage")  # an upstream frame that has one is fixed


class EnrichedEncoder:
    def __init__(
        self, out: list[bytes], *, session_id: str, partial: bool = False, results_only: bool = False
    ) -> None:
        self.out = out
        self.session_id = session_id
        self._frames = not results_only
        self._partial = partial and not results_only
        self._init_sent = False
        self._headless = False  # the open run is headless input: its frames pass as they came
        self._run_session: str | None = None  # the session its init names, which its frames carry
        self.delta_mode = DECODED if self._partial else SKIP
        self.timed = False  # no frame of this format carries a time
        self.translates_headless = False

    def _emit(self, frame: dict[str, Any]) -> None:
        self.out.append(orjson.dumps(frame, option=_NL))

    def _init(self, model: str | None) -> None:
        """One init frame per input stream, before anything else."""
        if self._init_sent:
            return
        self._init_sent = True
        if self._frames:
            frame: dict[str, Any] = {"type": "system", "subtype": "init", "session_id": self.session_id}
            if model is not None:
                frame["model"] = model
            self._emit(frame)

    def run_start(self, model: str | None, t: float) -> None:
        if not self._headless:
            self._init(model)

    def turn_start(self, ev: TurnStart, t: float) -> None:
        pass

    def turn_retry(self, ev: TurnStart, attempt: int, t: float) -> None:
        pass  # like the agent's driver: the attempt's deltas were printed, its message never is

    def text_delta(self, ev: AssistantTextDelta, t: float) -> None:
        if self._partial and not self._headless:
            self._emit({"type": "text", "delta": ev.text})

    def thinking_delta(self, ev: AssistantThinkingDelta, t: float) -> None:
        if self._partial and not self._headless:
            self._emit({"type": "thinking", "delta": ev.text})

    def raw_deltas(self, run: DeltaRun, t: float) -> None:
        pass  # never asked for: this encoder skips deltas or takes them decoded

    def tool_start(self, ev: ToolCallStart, t: float) -> None:
        pass

    def tool_input(self, ev: ToolCallInputDelta, t: float) -> None:
        pass

    def tool_call(self, tool_use_id: str, name: str | None, input: Any, end: ToolCallEnd, t: float) -> None:
        if self._frames and not self._headless:
            self._emit({"type": "tool_use", "id": tool_use_id, "name": name, "input": input})
            self._emit(
                {
                    "type": "tool_result",
                    "tool_use_id": tool_use_id,
                    "is_error": end.is_error,
                    "content": orjson.Fragment(bytes(end.content)),  # as it came, never rebuilt
                }
            )

    def turn_end(self, ev: TurnEnd, model: str | None, cost: float, t: float) -> None:
        # With partial messages the agent prints deltas instead of end-of-turn messages.
        if self._frames and not self._partial and not self._headless:
            message = ev.assistant_message
            self._emit({"type": "message", "role": message.role, "content": message.content})

    def passthrough(self, line: bytes) -> None:
        self._init(None)
        if self._frames:
            self.out.append(line + b"\n")

    def headless_frame(self, frame: HeadlessFrame, line: bytes, t: float, moves: bool) -> None:
        """Headless input is already this format: every frame but the result passes as it
        is, and the moves made of them are not written (the result is repaired: see result).
        A frame that makes no moves (a warning, a hook event) leaves a raw run's moves written."""
        if moves:
            self._headless = True
        if isinstance(frame, ResultFrame):
            return
        if isinstance(frame, SystemFrame) and frame.subtype == "init":
            self._run_session = frame.session_id
        self._init_sent = True  # the stream brings its own init
        if self._frames:
            self.out.append(line + b"\n")

    def result(self, run: RunSummary, t: float) -> None:
        """The run's result: the agent's repaired, or one of ours (a headless run that lost its
        own, or whose own was rejected, in the session its frames carry)."""
        self._headless = False  # the run is over
        session, self._run_session = self._run_session, None
        if run.upstream is not None:
            self._emit(repair(run.upstream, run))
            return
        self._init(None)
        self._emit(result_frame(run, session or self.session_id))


def result_frame(run: RunSummary, session_id: str) -> dict[str, Any]:
    """The ADR 0049 result frame, in the agent's key order."""
    usage = run.usage
    success = run.subtype == "success"
    frame: dict[str, Any] = {"type": "result", "subtype": run.subtype}
    if success:
        frame["result"] = run.answer if run.answer is not None else run.fallback_text
    frame["session_id"] = session_id
    frame["total_cost_usd"] = round(run.cost_usd, COST_DECIMALS)
    frame["turns"] = run.turns
    frame["total_input_tokens"] = usage["input_tokens"]
    frame["total_output_tokens"] = usage["output_tokens"]
    frame["num_turns"] = run.turns
    frame["is_error"] = not success
    frame["duration_ms"] = run.duration_ms
    frame["duration_api_ms"] = run.duration_api_ms
    frame["duration_source"] = run.duration_source
    frame["usage"] = {
        "input_tokens": usage["input_tokens"],
        "output_tokens": usage["output_tokens"],
        **{k: usage[k] for k in CACHE_KEYS if k in usage},
    }
    if not success:
        if run.error is not None:
            frame["error"] = run.error
        last = run.answer if run.answer is not None else run.fallback_text
        if last:  # no turn had text: the streamed text, as the agent's driver falls back
            frame["last_assistant_text"] = last
        frame["tool_calls_seen"] = run.tool_calls
    if run.turns_without_edit is not None:
        frame["turns_without_edit"] = run.turns_without_edit
    if run.no_edit_nudge_emitted is not None:
        frame["no_edit_nudge_emitted"] = run.no_edit_nudge_emitted
    return frame


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
