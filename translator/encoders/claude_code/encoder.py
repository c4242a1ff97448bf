"""`--format claude-code`: what the Claude Code CLI prints for the same conversation.

Frames, keys, key order and values follow the captures of Claude Code 2.1.332 in
shared/reference/. Values that describe a Claude Code installation (its tools, commands,
version, plugins, paths, permission rules) cannot be known from the agent's events; they are
present with neutral values of the same type (see INIT). Other deviations, each because the
agent's events do not carry the value, are listed in the field table of docs/claude-code.md.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
from msgspec import Raw
from orjson import dumps

from translator.encoders import DECODED, RAW, SKIP, RunSummary
from translator.encoders.claude_code.blocks import TurnBlocks
from translator.encoders.claude_code.frames import (
    _NL,
    INIT,
    RETRY_ERRORS,
    THINKING_DISPLAY,
    UNKNOWN_USAGE,
    USER,
    USER_MCP,
    USER_MCP_ERROR,
    ZERO_DELTA,
    ZERO_FRAME,
    Completion,
    api_error_message,
    init_parts,
    installation,
    iso_json,
    uuid4_source,
    wire_usage,
)
from translator.encoders.claude_code.session import Session
from translator.encoders.content import (
    decoded,
    is_empty_text,
    match_blocks,
    mcp_result,
    tool_result_content,
    tool_use_result,
)
from translator.encoders.provider_errors import api_error
from translator.model import (
    AssistantTextDelta,
    AssistantThinkingDelta,
    DeltaRun,
    HeadlessFrame,
    SystemFrame,
    ToolCallEnd,
    ToolCallInputDelta,
    ToolCallStart,
    TurnEnd,
    TurnStart,
)


class ClaudeCodeEncoder:
    raw_deltas: Callable[[DeltaRun, float], None]
    text_delta: Callable[[AssistantTextDelta, float], None]
    thinking_delta: Callable[[AssistantThinkingDelta, float], None]
    tool_start: Callable[[ToolCallStart, float], None]
    tool_input: Callable[[ToolCallInputDelta, float], None]

    def __init__(
        self,
        out: list[bytes],
        *,
        session_id: str,
        fixed_session_id: bool = False,
        partial: bool = False,
        results_only: bool = False,
        limits: Callable[[str], tuple[int, int]] = lambda model: (0, 0),
        new_id: Callable[[], str] | None = None,
        completion: Completion | None = None,
    ) -> None:
        """`completion`: the caller's facts each init and result are completed with."""
        self.out = out
        self.completion = completion
        self.session_id = session_id
        self.fixed_session_id = fixed_session_id  # the user's --session-id: the agent's own id does not replace it
        self.partial = partial and not results_only
        self.frames = not results_only
        # Without partial messages a text block's deltas are needed only when the block must
        # be shown before its TurnEnd (a tool call follows it); thinking deltas are needed at
        # once (thinking_tokens). So deltas come raw and are decoded when that is known.
        self.delta_mode = SKIP if results_only else DECODED if self.partial else RAW
        self.timed = True
        self.translates_headless = True
        self.new_id = new_id = new_id or uuid4_source()
        self.model = ""
        self.installation: dict[str, Any] = {}  # of the agent's last headless init (none in raw events)
        self.session = Session(session_id, partial=self.partial, frames=self.frames, limits=limits, new_id=new_id)
        self.turn = turn = TurnBlocks(self.out, session_id, new_id, partial=self.partial, frames=self.frames)
        # Deltas and tool calls as they stream build the open turn's blocks: the fold calls the
        # turn's own methods (for most of a stream's events, one call less).
        self.raw_deltas = turn.raw_deltas
        self.text_delta = turn.text_delta
        self.thinking_delta = turn.thinking_delta
        self.tool_start = turn.tool_start
        self.tool_input = turn.tool_input
        self._init = init_parts(session_id)
        self.session_json = dumps(session_id)
        self.answer: list[bytes] = []  # a headless final answer's frames, until the result
        self._new_frame(0.0)

    # ---------------------------------------------------------------- frame and turn state

    def _new_frame(self, t: float) -> None:
        self.session.new_frame()
        self.last_turn_end = t
        self._new_turn("", self.model)

    def _new_turn(self, message_id: str, model: str) -> None:
        self.turn.start(message_id, model)
        self.minted = False  # the turn's message id made here: headless input names none, gives no usage per turn
        self.results: list[bytes] = []  # tool results' frames waiting for the turn's end
        self.answered: set[str] = set()  # tool calls whose result frame is out

    def _emit(self, frame: dict[str, Any]) -> None:
        self.out.append(orjson.dumps(frame, option=_NL))

    # ---------------------------------------------------------------- the fold's events

    def run_start(self, model: str | None, t: float) -> None:
        self.model = model or self.model
        self._new_frame(t)
        if self.installation or (self.frames and self.completion is not None):
            # (headless input: the agent's init said where and with what it runs)
            frame = {**INIT, "session_id": self.session_id, "model": self.model, "uuid": self.new_id(), **self.installation}
            if self.completion is not None:
                self.completion.complete_init(frame)
            self._emit(frame)
        elif self.frames:
            first, middle, last = self._init
            self.out.append(b"".join((first, dumps(self.model), middle, dumps(self.new_id()), last)))

    def turn_start(self, ev: TurnStart, t: float) -> None:
        self._flush_answer(b"")
        message_id = ev.message_id or f"msg_{self.new_id()}"
        self._new_turn(message_id, ev.model)
        self.minted = not ev.message_id
        self.model = ev.model
        if self.partial:
            self._emit(
                {"type": "system", "subtype": "status", "status": "requesting",
                 "session_id": self.session_id, "uuid": self.new_id()}
            )
            message: dict[str, Any] = {
                "id": message_id, "type": "message", "role": "assistant",
                "model": ev.model, "content": [], "stop_reason": None,
                "stop_sequence": None, "usage": UNKNOWN_USAGE,
            }
            ttft_ms = b',"ttft_ms":%d' % max(0, round((t - self.last_turn_end) * 1000))
            self.turn.stream({"type": "message_start", "message": message}, ttft_ms + THINKING_DISPLAY)

    def turn_retry(self, ev: TurnStart, attempt: int, t: float) -> None:
        """The open turn sent again: its unfinished blocks are never written; Claude Code's
        `api_retry` (what it prints before re-sending a request) marks the point, and the new
        attempt streams as a new message (its own id). Blocks of the abandoned attempt already
        written stay: they were complete, and carry the abandoned attempt's message id."""
        if self.frames:
            self._emit(
                {"type": "system", "subtype": "api_retry", "attempt": attempt, "max_retries": 0,
                 "retry_delay_ms": 0, "error_status": None, "error": "unknown",
                 "session_id": self.session_id, "uuid": self.new_id()}
            )
        self.turn_start(ev, t)

    def tool_call(self, tool_use_id: str, name: str | None, input: Any, end: ToolCallEnd, t: float) -> None:
        turn = self.turn
        turn.resolve(t)
        block = turn.tools.get(tool_use_id)
        if block is None:  # its start was lost: the call still shows
            block = turn.open_tool(t, tool_use_id, name or "")
        if not block.done:
            block.input = input if isinstance(input, dict) else {}  # as the agent's message has it
            turn.complete(block, t)
        turn.release(t)  # the call's frame must come before its result
        self._user(tool_use_id, block.name, decoded(end.content), end.is_error, t)

    def _user(self, tool_use_id: str, name: str, content: list[Any], is_error: bool, t: float) -> None:
        """The `user` frame of a tool's result."""
        self.answered.add(tool_use_id)
        if not self.frames:
            return
        if name.startswith("mcp__"):
            shown, result = mcp_result(content, is_error)
            ids = (dumps(shown), dumps(tool_use_id)) if is_error else (dumps(tool_use_id), dumps(shown))
            frame = (USER_MCP_ERROR if is_error else USER_MCP) % (
                *ids, self.session_json, dumps(self.new_id()), iso_json(t), dumps(result))  # fmt: skip
        else:
            text = tool_result_content(content)
            text_json = dumps(text)
            result = tool_use_result(name, text)
            frame = USER % (
                dumps(tool_use_id), text_json, dumps(is_error), self.session_json, dumps(self.new_id()), iso_json(t),
                text_json if result is text else dumps(result),
            )  # fmt: skip
        if self.partial:
            # Claude Code closes the message stream (message_delta with the turn's stop reason
            # and usage, message_stop) before the results; the agent reports those at TurnEnd,
            # which follows the last tool's end: the results wait for it.
            self.results.append(frame)
        else:
            self.out.append(frame)

    def turn_end(self, ev: TurnEnd, model: str | None, cost: float, t: float) -> None:
        wire = wire_usage(ev.usage.counts())
        content = ev.assistant_message.content
        turn = self.turn
        # headless input's final answer (no tool call: the result follows at once) waits for the
        # result, which gives the run's usage: its frames carry it (the calls before it, none)
        answer = self.minted and not any(isinstance(b, dict) and b.get("type") == "tool_use" for b in content)
        mark = len(self.out)
        turn.pending = []  # blocks only deltas announced are written from the message below
        # Blocks not written yet are written from the authoritative message (it carries the
        # thinking signatures), each matched to its block there by content.
        matched = match_blocks(turn.blocks, content)
        unwritten = len(turn.blocks) - turn.emitted
        untaken = len(content) - (len(matched) - matched.count(None))  # at least the unannounced blocks
        if unwritten or untaken:
            usage = dumps({**wire, "service_tier": "standard"})
            for block, at in zip(turn.blocks[turn.emitted :], matched[turn.emitted :], strict=True):
                turn.write(block, t, None if at is None else content[at], usage)
            taken = set(matched)
            unannounced = [at for at, c in enumerate(content) if at not in taken and not is_empty_text(c)]
            if unannounced:
                self._unannounced(content, unannounced, ev.tool_results, usage, t)
        if self.partial:
            turn.stream(
                {"type": "message_delta", "delta": {"stop_reason": ev.stop_reason, "stop_sequence": None},
                 "usage": wire}
            )
            turn.stream({"type": "message_stop"})
        if answer and self.frames:
            self.answer, self.out[mark:] = self.out[mark:], []
        self.out.extend(self.results)
        self.session.add(model or turn.turn_model, wire, cost)
        self.last_turn_end = t
        self._new_turn("", self.model)

    def _unannounced(self, content: list[Any], positions: list[int], copies: Raw, usage: bytes, t: float) -> None:
        """The message's blocks at `positions`, which no event announced (a headless turn
        without partial messages, say); a tool call among them is answered from TurnEnd's own
        copy of the results (`copies`)."""
        turn = self.turn
        blocks = decoded(copies)
        results = {
            r.get("tool_use_id"): r
            for message in (blocks if isinstance(blocks, list) else ())
            if isinstance(message, dict) and isinstance(message.get("content"), list)
            for r in message["content"]
            if isinstance(r, dict)
        }
        index = turn.blocks[-1].index if turn.blocks else -1
        for at in positions:
            block_content = content[at]
            index += 1
            kind = block_content.get("type") if isinstance(block_content, dict) else None
            block = turn.open(kind if kind in ("text", "thinking", "tool_use") else "text", index, t)
            if kind == "tool_use":
                tool_id, name = block_content.get("id"), block_content.get("name")
                # the message's own values, unchecked: a name or id that is no text names nothing
                block.tool_id, block.name = (v if isinstance(v, str) else "" for v in (tool_id, name))
                turn.tools.setdefault(block.tool_id, block)
            turn.write(block, t, block_content, usage)
            result = results.get(block.tool_id) if kind == "tool_use" else None
            if result is not None and block.tool_id not in self.answered:
                self._user(block.tool_id, block.name, result.get("content", []), result.get("is_error", False), t)

    def passthrough(self, line: bytes) -> None:
        if self.frames:
            self.out.append(line + b"\n")

    def headless_frame(self, frame: HeadlessFrame, line: bytes, t: float, moves: bool) -> None:
        """Headless frames with no raw-event counterpart (the others are written from their
        moves): a retry becomes Claude Code's `api_retry`; warnings and hook events pass
        through unchanged."""
        if isinstance(frame, SystemFrame) and frame.subtype == "init":
            own = frame.own_session()
            if own and not self.fixed_session_id and own != self.session_id:
                self._adopt(own)
            if self.frames:
                self.installation = installation(frame)  # for the init run_start writes next
        if moves or not self.frames:
            return
        if isinstance(frame, SystemFrame) and frame.subtype == "api_retry":
            self._emit(
                {
                    "type": "system", "subtype": "api_retry", "attempt": frame.attempt,
                    "max_retries": frame.max_retries, "retry_delay_ms": frame.retry_delay_ms,
                    "error_status": frame.error_status, "error": RETRY_ERRORS.get(str(frame.error_category), "unknown"),
                    "session_id": self.session_id, "uuid": self.new_id(),
                }
            )
        else:
            self.out.append(line + b"\n")

    def _adopt(self, session_id: str) -> None:
        """The agent's own session id (its headless init's) for the run that init begins and
        those after it, as `claude -p` reports the id a script resumes with."""
        self.session_id = self.session.session_id = self.turn.session_id = session_id
        self.session_json = self.turn.session_json = dumps(session_id)
        self._init = init_parts(session_id)

    # ---------------------------------------------------------------- the result

    def _flush_answer(self, usage: bytes) -> None:
        """The held final answer's frames, their usage (all zero) replaced by `usage`'s counters
        (the unescaped bytes `"usage":{` appear in a frame only as its keys, never in a value)."""
        if not self.answer:
            return
        frames, self.answer = self.answer, []
        if usage:
            frames = [f.replace(ZERO_FRAME, b'"usage":' + usage[:-1] + b',"service_tier":"standard"}')
                      .replace(ZERO_DELTA, b'"usage":' + usage) for f in frames]  # fmt: skip
        self.out.extend(frames)

    def result(self, run: RunSummary, t: float) -> None:
        self.turn.pending = []  # an unfinished block is not written
        self.turn.release(t)  # a run cut off inside a turn: what was proven complete is written
        self._flush_answer(dumps(wire_usage(run.usage)) if run.upstream is not None else b"")
        if run.upstream is not None:  # headless input reports tokens and cost once, at its end
            cost = run.upstream.get("total_cost_usd")
            cost = float(cost) if isinstance(cost, (int, float)) else 0.0
            if cost or any(run.usage.values()):  # no call answered (an API error): `{}`, as Claude Code
                self.session.add(self.model, wire_usage(run.usage), cost)
        self.out.extend(self.results)
        self.results = []
        error = api_error(str(run.stop_value)) if run.stop_kind == "ProviderError" else None
        if error is not None and self.frames:  # Claude Code's synthetic message before the result
            self._emit(api_error_message(error, self.session_id, self.new_id, t))
        frame = self.session.result(run, error)
        if self.completion is not None:
            for before in self.completion.complete_result(frame, self.out):
                self._emit(before)
        self._emit(frame)
