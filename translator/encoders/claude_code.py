"""`--format claude-code`: what the Claude Code CLI prints for the same conversation.

Frames, keys, key order and values follow the captures of Claude Code 2.1.332 in
shared/reference/. Values that describe a Claude Code installation (its tools, commands,
version, plugins, paths, permission rules) cannot be known from the agent's events; they are
present with neutral values of the same type (see INIT). Other deviations, each because the
agent's events do not carry the value, are listed in the README's field table.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

import orjson

from translator.encoders import DECODED, RAW, SKIP, RunSummary
from translator.encoders.content import (
    claude_block,
    is_empty_text,
    match_blocks,
    tool_result_content,
    tool_use_result,
)
from translator.events import Event, text_run
from translator.provider_errors import ApiError, api_error

_NL = orjson.OPT_APPEND_NEWLINE
THINKING_MARK = b'"type":"AssistantThinkingDelta"'
CHARS_PER_TOKEN = 4  # Claude Code's rough token estimate for thinking text
NO_USAGE = {"input_tokens": 0, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
# A turn's usage arrives only with its TurnEnd: frames written before it carry zeros.
UNKNOWN_USAGE = {**NO_USAGE, "output_tokens": 0, "service_tier": "standard"}

# system/init, in Claude Code's key order. Installation facts get neutral values of their type.
INIT: dict[str, Any] = {
    "type": "system",
    "subtype": "init",
    "cwd": "",
    "session_id": None,
    "tools": [],
    "mcp_servers": [],
    "model": None,
    "permissionMode": "default",
    "slash_commands": [],
    "terminal_slash_commands": [],
    "apiKeySource": "none",
    "claude_code_version": "",
    "output_style": "default",
    "agents": [],
    "skills": [],
    "plugins": [],
    "capabilities": [],
    "analytics_disabled": True,
    "product_feedback_disabled": True,
    "served_by_anthropic": False,
    "uuid": None,
    "sandbox_enabled": False,
    "memory_paths": {},
    "original_cwd": "",
    "additional_directories": [],
    "messaging_socket_path": "",
    "fast_mode_state": "off",
    "fast_mode_disabled_reason": "",
    "per_turn_effort_active": False,
    "ultrathink_available": False,
    "ultrathink_typed_raises": False,
    "view_mode": "default",
}
SUBAGENT_STATS = {
    "spawned": 0,
    "requested": {"background": 0, "foreground": 0, "unset": 0},
    "started_in_background": 0,
    "max_depth": 0,
    "spawned_by_subagents": 0,
    "completed": 0,
    "failed": 0,
    "killed": {"parent": 0, "user": 0, "system": 0},
    "refused": {"depth_limit": 0, "concurrency_limit": 0, "budget": 0},
    "by_type": {},
}
# The agent's stop reasons that end a run without an answer, and Claude Code's terminal reason
# for each (its `error_during_execution` results).
TERMINAL_REASONS = {
    "Cancelled": "aborted_streaming",
    "HookDenied": "hook_stopped",
    "CompactionFailed": "prompt_too_long",
    "MaxTokensExhausted": "model_error",
    "Refusal": "model_error",
    "ContentFilter": "model_error",
    "StreamIdle": "model_error",
    "ThinkingBudgetExhausted": "model_error",
    "Error": "model_error",  # a headless result's error of unstated origin
}
# A headless retry's error category as Claude Code names the error.
RETRY_ERRORS = {"server_error": "server_error", "overloaded": "server_error", "rate_limit": "rate_limit"}


@lru_cache(maxsize=64)
def iso(t: float) -> str:
    """Claude Code's timestamp format: UTC, milliseconds, `Z`. (The frames of one read share
    their time, hence the cache.)"""
    return datetime.fromtimestamp(t, UTC).isoformat(timespec="milliseconds")[:-6] + "Z"


def cc_turns(turns: int, stop: str | None) -> int:
    """`num_turns` as Claude Code counts: the call that failed (API error), or the turn it
    declined to start (max turns), counts as a turn too."""
    return turns + 1 if stop in ("ProviderError", "MaxTurnsReached") else turns


def uuid4() -> str:
    """A random (version 4, RFC 4122 variant) UUID string; uuid.uuid4() costs twice as much."""
    h = os.urandom(16).hex()
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{'89ab'[int(h[16], 16) & 3]}{h[17:20]}-{h[20:]}"


def wire_usage(usage: dict[str, int]) -> dict[str, int]:
    """The agent's usage (input includes the cache counters) in Anthropic's disjoint counters."""
    write = usage.get("cache_creation_input_tokens", 0)
    read = usage.get("cache_read_input_tokens", 0)
    return {
        "input_tokens": max(usage["input_tokens"] - write - read, 0),
        "cache_creation_input_tokens": write,
        "cache_read_input_tokens": read,
        "output_tokens": usage["output_tokens"],
    }


def result_usage(wire: dict[str, int], api_error: bool = False) -> dict[str, Any]:
    """A result's `usage`, in Claude Code's shape and key order."""
    # API-error results print output_tokens_details first; assigning it again keeps its place.
    usage: dict[str, Any] = {"output_tokens_details": {"thinking_tokens": 0}} if api_error else {}
    usage.update(wire)
    usage["output_tokens_details"] = {"thinking_tokens": 0}
    usage.update(
        {
            "server_tool_use": {"web_search_requests": 0, "web_fetch_requests": 0},
            "service_tier": "standard",
            "cache_creation": {"ephemeral_1h_input_tokens": 0, "ephemeral_5m_input_tokens": 0},
            "inference_geo": "",
            "iterations": [],
            "speed": "standard",
            "fallback_credit": None,
        }
    )
    return usage


def model_usage_entry(model: str) -> dict[str, Any]:
    return {
        "inputTokens": 0,
        "outputTokens": 0,
        "cacheReadInputTokens": 0,
        "cacheCreationInputTokens": 0,
        "webSearchRequests": 0,
        "costUSD": 0.0,
        "contextWindow": 0,
        "maxOutputTokens": 0,
        "thinkingTokens": 0,
        "cacheCreationEphemeral5mInputTokens": 0,
        "cacheCreationEphemeral1hInputTokens": 0,
        "canonicalModel": model,
        "provider": "",
        "costBasis": "list",
    }


def add_model_usage(
    table: dict[str, dict[str, Any]], model: str, wire: dict[str, int], cost: float, limits: tuple[int, int]
) -> None:
    entry = table.get(model)
    if entry is None:
        entry = table[model] = model_usage_entry(model)
        entry["contextWindow"], entry["maxOutputTokens"] = limits
    entry["inputTokens"] += wire["input_tokens"]
    entry["outputTokens"] += wire["output_tokens"]
    entry["cacheReadInputTokens"] += wire["cache_read_input_tokens"]
    entry["cacheCreationInputTokens"] += wire["cache_creation_input_tokens"]
    entry["costUSD"] += cost


class Block:
    """One content block of the turn being streamed."""

    __slots__ = ("done", "index", "input", "kind", "name", "parts", "t_start", "tool_id")

    def __init__(self, kind: str, index: int, t: float, tool_id: str = "", name: str = "") -> None:
        self.kind = kind  # text | thinking | tool_use
        self.index = index  # the API's content block index
        self.parts: list[str] = []  # text, thinking or partial_json as it streamed
        self.tool_id = tool_id
        self.name = name
        self.input: Any = {}  # a tool call's input, once known
        self.t_start = t
        self.done = False


class ClaudeCodeEncoder:
    def __init__(
        self,
        out: list[bytes],
        *,
        session_id: str,
        partial: bool = False,
        results_only: bool = False,
        limits: Callable[[str], tuple[int, int]] = lambda model: (0, 0),
        new_id: Callable[[], str] = uuid4,
    ) -> None:
        self.out = out
        self.session_id = session_id
        self.partial = partial and not results_only
        self.frames = not results_only
        # Without partial messages a text block's deltas are needed only when the block must
        # be shown before its TurnEnd (a tool call follows it); thinking deltas are needed at
        # once (thinking_tokens). So deltas come raw and are decoded when that is known.
        self.delta_mode = SKIP if results_only else DECODED if self.partial else RAW
        self.translates_headless = True
        # A turn's tool calls that no event announced are answered from its TurnEnd's copy of
        # the results (see turn_end).
        self.needs = frozenset({"TurnEnd.tool_results"})
        self.limits = limits  # model -> (context window, max output tokens)
        self.new_id = new_id
        self.model = ""
        # Across the stream (Claude Code's session).
        self.result_index = 0
        self.cost = 0.0
        self.api_ms = 0
        self.model_usage: dict[str, dict[str, Any]] = {}
        self._new_frame(0.0)

    # ---------------------------------------------------------------- frame and turn state

    def _new_frame(self, t: float) -> None:
        self.frame_model_usage: dict[str, dict[str, Any]] = {}
        self.last_turn_end = t
        self._new_turn("", self.model)

    def _new_turn(self, message_id: str, model: str) -> None:
        self.message_id = message_id
        self.turn_model = model
        self.blocks: list[Block] = []  # this turn's blocks, in order
        self.emitted = 0  # how many of them have their assistant frame out
        self.holding = False  # completed blocks wait behind a thinking block (see _complete)
        self.results: list[dict[str, Any]] = []  # tool results waiting for the turn's end
        self.answered: set[str] = set()  # tool calls whose result frame is out
        self.pending: list[tuple[bytes, Callable[[], list[Event]]]] = []  # raw deltas, undecoded
        self.thinking_tokens = 0

    def _emit(self, frame: dict[str, Any]) -> None:
        self.out.append(orjson.dumps(frame, option=_NL))

    def _stream(self, event: dict[str, Any], **extra: Any) -> None:
        """A `stream_event` (callers check `partial`: only partial messages have them)."""
        self._emit(
            {
                "type": "stream_event",
                "event": event,
                "session_id": self.session_id,
                "parent_tool_use_id": None,
                "uuid": self.new_id(),
                **extra,
                "api_message_id": self.message_id,
            }
        )

    # ---------------------------------------------------------------- blocks

    def _open(self, kind: str, index: int, t: float, tool_id: str = "", name: str = "") -> Block:
        block = Block(kind, index, t, tool_id, name)
        self.blocks.append(block)
        if self.partial:
            if kind == "text":
                start: dict[str, Any] = {"type": "text", "text": ""}
            elif kind == "thinking":
                start = {"type": "thinking", "thinking": "", "signature": ""}
            else:
                start = {"type": "tool_use", "id": tool_id, "name": name, "input": {}}
            extra = {"thinking_display": "updates"} if kind == "thinking" else {}
            self._stream({"type": "content_block_start", "index": index, "content_block": start}, **extra)
        return block

    def _current(self, kind: str, index: int, t: float) -> Block:
        """The open block of this kind and index; a new one ends the previous block."""
        if self.blocks:
            last = self.blocks[-1]
            if not last.done and last.kind == kind and last.index == index:
                return last
            self._complete(last, t)
        return self._open(kind, index, t)

    def _complete(self, block: Block, t: float) -> None:
        """The events prove `block` complete: its assistant frame goes out now. Without partial
        messages a thinking block, and the blocks after it, wait for the turn's end (only
        TurnEnd carries the signature) or for a tool call (which must not wait)."""
        if block.done:
            return
        block.done = True
        if not self.partial and (block.kind == "thinking" or self.holding):
            self.holding = True
            return
        self._flush(t)

    def _release(self, t: float) -> None:
        """Write every completed block now, held thinking included (without its signature)."""
        self.holding = False
        self._flush(t)

    def _flush(self, t: float) -> None:
        while self.emitted < len(self.blocks) and self.blocks[self.emitted].done:
            self._write(self.blocks[self.emitted], t, None, None)

    def _write(self, block: Block, t: float, content: dict[str, Any] | None, usage: dict[str, Any] | None) -> None:
        """The block's assistant frame (from `content`, the authoritative message block, when
        given); with partial messages, after its signature and before its content_block_stop."""
        self.emitted += 1
        block.done = True
        if content is not None:
            content = claude_block(content)
        else:
            if block.kind == "text":
                content = {"type": "text", "text": "".join(block.parts)}
            elif block.kind == "thinking":
                content = {"type": "thinking", "thinking": "".join(block.parts), "signature": ""}
            else:
                content = {"type": "tool_use", "id": block.tool_id, "name": block.name, "input": block.input}
        if self.partial and block.kind == "thinking":  # "" when the block ended before its TurnEnd
            self._stream(
                {"type": "content_block_delta", "index": block.index,
                 "delta": {"type": "signature_delta", "signature": content.get("signature", "")}}
            )
        if self.frames and not is_empty_text(content):  # the agent drops empty text blocks
            self._emit(self._assistant(block, t, content, usage))
        if self.partial:
            self._stream({"type": "content_block_stop", "index": block.index})

    def _assistant(self, block: Block, t: float, content: dict[str, Any], usage: dict[str, Any] | None) -> dict[str, Any]:
        frame: dict[str, Any] = {
            "type": "assistant",
            "message": {
                "id": self.message_id,
                "type": "message",
                "role": "assistant",
                "model": self.turn_model,
                "content": [content],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": usage or UNKNOWN_USAGE,
                "context_management": None,
            },
            "parent_tool_use_id": None,
            "session_id": self.session_id,
            "uuid": self.new_id(),
            "timestamp": iso(t),
            "request_id": None,
        }
        if block.kind == "thinking":
            frame["thinking_duration_ms"] = max(0, round((t - block.t_start) * 1000))
            frame["thinking_display"] = "updates"
        return frame

    # ---------------------------------------------------------------- the fold's events

    def frame_start(self, model: str | None, t: float) -> None:
        self.model = model or self.model
        self._new_frame(t)
        if self.frames:
            self._emit({**INIT, "session_id": self.session_id, "model": self.model, "uuid": self.new_id()})

    def turn_start(self, ev: Event, t: float) -> None:
        self._new_turn(ev["message_id"], ev["model"])
        self.model = ev["model"]
        if self.partial:
            self._emit(
                {"type": "system", "subtype": "status", "status": "requesting",
                 "session_id": self.session_id, "uuid": self.new_id()}
            )
            message: dict[str, Any] = {
                "id": self.message_id, "type": "message", "role": "assistant",
                "model": self.turn_model, "content": [], "stop_reason": None,
                "stop_sequence": None, "usage": UNKNOWN_USAGE,
            }
            self._stream(
                {"type": "message_start", "message": message},
                ttft_ms=max(0, round((t - self.last_turn_end) * 1000)),
                thinking_display="updates",
            )

    def turn_retry(self, ev: Event, attempt: int, t: float) -> None:
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

    def raw_deltas(self, lines: bytes, decode: Callable[[], list[Event]], t: float) -> None:
        self.pending.append((lines, decode))
        if THINKING_MARK in lines:
            self._resolve(t)

    def _resolve(self, t: float) -> None:
        """Decode the raw deltas kept so far, now that their content is needed."""
        pending, self.pending = self.pending, []
        for lines, decode in pending:
            run = text_run(lines)
            if run is not None:  # the usual case, one text block's run of deltas: taken whole
                block = self._current("text", run[0], t)
                block.parts.extend(run[1])
                continue
            for ev in decode():
                if ev["type"] == "AssistantTextDelta":
                    self._text(ev, t)
                else:
                    self._thinking(ev, t)

    def text_delta(self, ev: Event, t: float) -> None:
        self._resolve(t)
        self._text(ev, t)

    def thinking_delta(self, ev: Event, t: float) -> None:
        self._resolve(t)
        self._thinking(ev, t)

    def _text(self, ev: Event, t: float) -> None:
        block = self._current("text", ev["content_block_index"], t)
        block.parts.append(ev["text"])
        if self.partial:
            self._stream(
                {"type": "content_block_delta", "index": block.index,
                 "delta": {"type": "text_delta", "text": ev["text"]}}
            )

    def _thinking(self, ev: Event, t: float) -> None:
        block = self._current("thinking", ev["content_block_index"], t)
        block.parts.append(ev["text"])
        delta = int(len(ev["text"]) / CHARS_PER_TOKEN + 0.5)
        self.thinking_tokens += delta
        if self.frames:
            self._emit(
                {"type": "system", "subtype": "thinking_tokens", "estimated_tokens": self.thinking_tokens,
                 "estimated_tokens_delta": delta, "session_id": self.session_id, "uuid": self.new_id()}
            )
        if self.partial:
            self._stream(
                {"type": "content_block_delta", "index": block.index,
                 "delta": {"type": "thinking_delta", "thinking": ev["text"]}},
                thinking_display="updates",
            )

    def tool_start(self, ev: Event, t: float) -> None:
        self._resolve(t)
        if self.blocks:
            self._complete(self.blocks[-1], t)
        self._release(t)  # text before a tool call shows before the tool runs
        index = self.blocks[-1].index + 1 if self.blocks else 0
        self._open("tool_use", index, t, ev["tool_use_id"], ev["name"])

    def _tool(self, tool_use_id: str) -> Block | None:
        return next((b for b in self.blocks if b.kind == "tool_use" and b.tool_id == tool_use_id), None)

    def tool_input(self, ev: Event, t: float) -> None:
        block = self._tool(ev["tool_use_id"])
        if block is None or block.done:
            return
        chunk = ev["partial_json"]
        if self.partial:
            self._stream(
                {"type": "content_block_delta", "index": block.index,
                 "delta": {"type": "input_json_delta", "partial_json": chunk}}
            )
        block.parts.append(chunk)
        # A prefix of a JSON object never parses: once the input does, it is all there.
        if chunk.rstrip().endswith("}"):
            try:
                block.input = orjson.loads("".join(block.parts))
            except orjson.JSONDecodeError:
                return
            self._complete(block, t)

    def tool_call(self, tool_use_id: str, name: str | None, input: Any, end: Event, t: float) -> None:
        self._resolve(t)
        block = self._tool(tool_use_id)
        if block is None:  # its start was lost: the call still shows
            index = self.blocks[-1].index + 1 if self.blocks else 0
            block = self._open("tool_use", index, t, tool_use_id, name or "")
        if not block.done:
            block.input = input if isinstance(input, dict) else {}  # as the agent's message has it
            self._complete(block, t)
        self._release(t)  # the call's frame must come before its result
        self._user(tool_use_id, block.name, end["content"], end["is_error"], t)

    def _user(self, tool_use_id: str, name: str, content: list[Any], is_error: bool, t: float) -> None:
        """The `user` frame of a tool's result."""
        self.answered.add(tool_use_id)
        if not self.frames:
            return
        text = tool_result_content(content)
        frame = {
            "type": "user",
            "message": {
                "role": "user",
                "content": [{"tool_use_id": tool_use_id, "type": "tool_result", "content": text, "is_error": is_error}],
            },
            "parent_tool_use_id": None,
            "session_id": self.session_id,
            "uuid": self.new_id(),
            "timestamp": iso(t),
            "tool_use_result": tool_use_result(name, text),
            "tool_result_meta": [],
        }
        if self.partial:
            # Claude Code closes the message stream (message_delta with the turn's stop reason
            # and usage, message_stop) before the results; the agent reports those at TurnEnd,
            # which follows the last tool's end: the results wait for it.
            self.results.append(frame)
        else:
            self._emit(frame)

    def turn_end(self, ev: Event, model: str | None, cost: float, t: float) -> None:
        wire = wire_usage(ev["usage"])
        usage = {**wire, "service_tier": "standard"}
        content = ev["assistant_message"]["content"]
        self.pending = []  # blocks only deltas announced are written from the message below
        # Blocks not written yet are written from the authoritative message (it carries the
        # thinking signatures), each matched to its block there by content.
        matched = match_blocks(self.blocks, content)
        for block, at in zip(self.blocks[self.emitted :], matched[self.emitted :], strict=True):
            self._write(block, t, None if at is None else content[at], usage)
        # Blocks no event announced (a headless turn without partial messages, say); a tool
        # call among them is answered from TurnEnd's own copy of the results.
        copies = ev.get("tool_results")  # declared in `needs`: the fold never skips them
        results = {
            r.get("tool_use_id"): r
            for message in (copies if isinstance(copies, list) else ())
            if isinstance(message, dict) and isinstance(message.get("content"), list)
            for r in message["content"]
            if isinstance(r, dict)
        }
        index = self.blocks[-1].index if self.blocks else -1
        taken = set(matched)
        for at, block_content in enumerate(content):
            if at in taken or is_empty_text(block_content):
                continue
            index += 1
            kind = block_content.get("type") if isinstance(block_content, dict) else None
            block = self._open(kind if kind in ("text", "thinking", "tool_use") else "text", index, t)
            if kind == "tool_use":
                block.tool_id, block.name = block_content.get("id", ""), block_content.get("name", "")
            self._write(block, t, block_content, usage)
            result = results.get(block.tool_id) if kind == "tool_use" else None
            if result is not None and block.tool_id not in self.answered:
                self._user(block.tool_id, block.name, result.get("content", []), result.get("is_error", False), t)
        if self.partial:
            self._stream(
                {"type": "message_delta", "delta": {"stop_reason": ev["stop_reason"], "stop_sequence": None},
                 "usage": wire}
            )
            self._stream({"type": "message_stop"})
        for frame in self.results:
            self._emit(frame)
        name = model or self.turn_model
        add_model_usage(self.frame_model_usage, name, wire, cost, self.limits(name))
        add_model_usage(self.model_usage, name, wire, cost, self.limits(name))
        self.cost += cost
        self.last_turn_end = t
        self._new_turn("", self.model)

    def passthrough(self, line: bytes) -> None:
        if self.frames:
            self.out.append(line + b"\n")

    def headless_frame(self, frame: Event, line: bytes, t: float) -> None:
        """Headless frames with no raw-event counterpart: a retry becomes Claude Code's
        `api_retry`; warnings, hook events and echoed prompts pass through unchanged."""
        if not self.frames:
            return
        if frame.get("type") == "system" and frame.get("subtype") == "api_retry":
            status = frame.get("error_status")
            self._emit(
                {
                    "type": "system", "subtype": "api_retry", "attempt": frame.get("attempt"),
                    "max_retries": frame.get("max_retries"), "retry_delay_ms": frame.get("retry_delay_ms"),
                    "error_status": status, "error": RETRY_ERRORS.get(str(frame.get("error_category")), "unknown"),
                    "session_id": self.session_id, "uuid": self.new_id(),
                }
            )
        elif frame.get("type") != "user":
            self.out.append(line + b"\n")

    # ---------------------------------------------------------------- the result

    def result(self, run: RunSummary, t: float) -> None:
        self.pending = []  # an unfinished block is not written
        self._release(t)  # a run cut off inside a turn: what was proven complete is written
        if run.upstream is not None:  # headless input reports tokens and cost once, at its end
            self._headless_totals(run.upstream, run.usage)
        for pending in self.results:
            self._emit(pending)
        self.results = []
        self.api_ms += run.duration_api_ms
        stopped = run.stopped_for
        kind = stopped if isinstance(stopped, str) else next(iter(stopped), None) if stopped else None
        frame: dict[str, Any] = {
            "duration_api_ms": self.api_ms,
            "stop_reason": run.stop_reason,
            "session_id": self.session_id,
            "total_cost_usd": self.cost,
            "usage": result_usage(wire_usage(run.usage), api_error=kind == "ProviderError"),
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
            frame["errors"] = [str(stopped[kind])]
        elif kind == "MaxTurnsReached":
            frame["terminal_reason"] = "max_turns"
            frame["subtype"] = "error_max_turns"
            frame["errors"] = [f"Reached maximum number of turns ({stopped[kind]})"]
        elif kind == "ProviderError":
            error = api_error(str(stopped[kind]))
            self._api_error_message(error, t)
            frame.update(stop_reason="stop_sequence", terminal_reason="api_error", subtype="success")
            frame.update(api_error_status=error.status, api_error_type=error.type, result=error.text)
        else:
            if kind is None and run.subtype == "cancelled":  # our own cancellation (a signal)
                frame["terminal_reason"] = "aborted_tools" if run.tools_running else "aborted_streaming"
            else:
                frame["terminal_reason"] = TERMINAL_REASONS.get(kind or "", "aborted_streaming")
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
        self.result_index += 1
        self._emit(frame)

    def _headless_totals(self, upstream: dict[str, Any], usage: dict[str, int]) -> None:
        cost = upstream.get("total_cost_usd")
        cost = float(cost) if isinstance(cost, (int, float)) else 0.0
        self.cost += cost
        wire = wire_usage(usage)
        for table in (self.model_usage, self.frame_model_usage):
            add_model_usage(table, self.model, wire, cost, self.limits(self.model))

    def _api_error_message(self, error: ApiError, t: float) -> None:
        """The synthetic assistant message Claude Code prints before an API-error result."""
        if not self.frames:
            return
        usage = {
            "output_tokens_details": None,
            "input_tokens": 0,
            "output_tokens": 0,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
            "server_tool_use": {"web_search_requests": 0, "web_fetch_requests": 0},
            "service_tier": None,
            "cache_creation": {"ephemeral_1h_input_tokens": 0, "ephemeral_5m_input_tokens": 0},
            "inference_geo": None,
            "iterations": None,
            "speed": None,
            "fallback_credit": None,
        }
        self._emit(
            {
                "type": "assistant",
                "message": {
                    "diagnostics": None, "id": self.new_id(), "container": None, "model": "<synthetic>",
                    "role": "assistant", "stop_details": None, "stop_reason": "stop_sequence",
                    "stop_sequence": "", "type": "message", "usage": usage,
                    "content": [{"type": "text", "text": error.text}], "context_management": None,
                },
                "parent_tool_use_id": None,
                "session_id": self.session_id,
                "uuid": self.new_id(),
                "timestamp": iso(t),
                "error": error.category,
                "request_id": None,
                "is_api_error_message": True,
                "api_error_status": error.status,
                "api_error_type": error.type,
            }
        )
