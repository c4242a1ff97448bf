"""`--format claude-code`'s frames: the constant parts and the pure builders (no state).

Frames, keys, key order and values follow the captures of Claude Code 2.1.332 in
shared/reference/. Values that describe a Claude Code installation (its tools, commands,
version, plugins, paths, permission rules) cannot be known from the agent's events; they are
present with neutral values of the same type (see INIT).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import UTC, datetime
from functools import lru_cache
from itertools import chain
from typing import Any, Protocol

import orjson

from translator.encoders.provider_errors import ApiError
from translator.model import SystemFrame
from translator.version import CLAUDE_CODE

_NL = orjson.OPT_APPEND_NEWLINE


class Completion(Protocol):
    """What the caller knows that the events do not (caliban-claude: the installation, the
    permission mode the app named, how it stopped a run), handed to the encoder: each init and
    result is written complete, never parsed back and patched."""

    def complete_init(self, frame: dict[str, Any]) -> None:
        """The init frame, completed in place."""

    def complete_result(self, frame: dict[str, Any], written: list[bytes]) -> list[dict[str, Any]]:
        """The result frame, completed in place; the frames to go before it. `written`: the
        frames written since they were last taken (read only)."""
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
    "claude_code_version": CLAUDE_CODE,
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
# for each (its `error_during_execution` results). A stop not here (a headless error whose cause
# its message does not name, a variant this build does not know) has none: the key is left out,
# as Claude Code leaves it out of a result whose loop gave no reason.
TERMINAL_REASONS = {
    "Cancelled": "aborted_streaming",
    "HookDenied": "hook_stopped",
    "CompactionFailed": "prompt_too_long",
    "MaxTokensExhausted": "model_error",
    "Refusal": "model_error",
    "ContentFilter": "model_error",
    "StreamIdle": "model_error",
    "ThinkingBudgetExhausted": "model_error",
}
# A headless retry's error category as Claude Code names the error.
RETRY_ERRORS = {"server_error": "server_error", "overloaded": "server_error", "rate_limit": "rate_limit"}


# The frames written for every block and every tool result, serialised by hand around their
# values (each serialised by orjson): the bytes orjson writes for the whole frame, at a third of
# the cost. Keys and their order as in the captures (tests: every frame is the bytes orjson writes for it).
ASSISTANT = (
    b'{"type":"assistant","message":{"id":%b,"type":"message","role":"assistant","model":%b,"content":[%b],'
    b'"stop_reason":null,"stop_sequence":null,"usage":%b,"context_management":null},"parent_tool_use_id":null,'
    b'"session_id":%b,"uuid":%b,"timestamp":%b,"request_id":null%b}\n'
)
THINKING_EXTRA = b',"thinking_duration_ms":%d,"thinking_display":"updates"'  # a thinking block's frame
USER = (
    b'{"type":"user","message":{"role":"user","content":[{"tool_use_id":%b,"type":"tool_result","content":%b,'
    b'"is_error":%b}]},"parent_tool_use_id":null,"session_id":%b,"uuid":%b,"timestamp":%b,"tool_use_result":%b,'
    b'"tool_result_meta":[]}\n'
)
# An MCP tool's result as Claude Code writes it (sdk-mcp/, sdk-ts/mcp_stdio): a success is its
# content blocks, with no is_error; an error its text, the keys in another order.
USER_MCP = (
    b'{"type":"user","message":{"role":"user","content":[{"tool_use_id":%b,"type":"tool_result","content":%b}]},'
    b'"parent_tool_use_id":null,"session_id":%b,"uuid":%b,"timestamp":%b,"tool_use_result":%b,"tool_result_meta":[]}\n'
)
USER_MCP_ERROR = (
    b'{"type":"user","message":{"role":"user","content":[{"type":"tool_result","content":%b,"is_error":true,'
    b'"tool_use_id":%b}]},"parent_tool_use_id":null,"session_id":%b,"uuid":%b,"timestamp":%b,"tool_use_result":%b,'
    b'"tool_result_meta":[]}\n'
)
UNKNOWN_USAGE_JSON = orjson.dumps(UNKNOWN_USAGE)
# A headless turn's usage as its frames carry it until the result gives the run's (an assistant
# frame's, a message_delta's): all zero
ZERO_FRAME = b'"usage":' + UNKNOWN_USAGE_JSON
ZERO_DELTA = b'"usage":' + orjson.dumps({**NO_USAGE, "output_tokens": 0})
# With partial messages, a frame for every delta: a stream event, then its session, its uuid,
# the keys after the uuid (THINKING_DISPLAY, say) and its message id. A delta's whole frame is
# one template: its block's index and its text, then the same.
_STREAM = b'{"type":"stream_event","event":'
_STREAM_TAIL = b',"session_id":%b,"parent_tool_use_id":null,"uuid":%b%b,"api_message_id":%b}\n'
STREAM_EVENT = _STREAM + b"%b" + _STREAM_TAIL
TEXT_DELTA = _STREAM + b'{"type":"content_block_delta","index":%d,"delta":{"type":"text_delta","text":%b}}' + _STREAM_TAIL
THINKING_DELTA = (
    _STREAM + b'{"type":"content_block_delta","index":%d,"delta":{"type":"thinking_delta","thinking":%b}}' + _STREAM_TAIL
)
INPUT_DELTA = (
    _STREAM + b'{"type":"content_block_delta","index":%d,"delta":{"type":"input_json_delta","partial_json":%b}}'
    + _STREAM_TAIL
)
THINKING_DISPLAY = b',"thinking_display":"updates"'
THINKING_TOKENS = (
    b'{"type":"system","subtype":"thinking_tokens","estimated_tokens":%d,"estimated_tokens_delta":%d,'
    b'"session_id":%b,"uuid":%b}\n'
)


def installation(init: SystemFrame) -> dict[str, Any]:
    """What the agent's own headless init says of its installation, under Claude Code's init
    keys (a raw event stream says none of it: those keys keep their neutral values)."""
    facts: dict[str, Any] = {}
    if init.cwd:
        facts["cwd"] = facts["original_cwd"] = init.cwd
    if init.tools is not None:
        facts["tools"] = init.tools
    if init.mcp_servers is not None:
        facts["mcp_servers"] = mcp_servers(init.mcp_servers)
    if init.permission_mode:
        facts["permissionMode"] = init.permission_mode
    return facts


def mcp_servers(servers: Any) -> list[dict[str, Any]]:
    """The agent's MCP servers (names, or objects with a name) as Claude Code lists them: name and status."""
    out = []
    for server in servers if isinstance(servers, list) else ():
        if isinstance(server, dict) and "name" in server:
            out.append({"name": server["name"], "status": server.get("status", "connected")})
        elif isinstance(server, str):
            out.append({"name": server, "status": "connected"})
    return out


def init_parts(session_id: str) -> tuple[bytes, bytes, bytes]:
    """A session's system/init serialised once but for its model and its uuid, which go
    between the three parts."""
    frame = orjson.dumps({**INIT, "session_id": session_id, "model": "\0", "uuid": "\0"}, option=_NL)
    first, middle, last = frame.rsplit(b'"\\u0000"', 2)  # the last two: model and uuid follow session_id
    return first, middle, last


@lru_cache(maxsize=64)
def iso_json(t: float) -> bytes:
    """`iso(t)` as a JSON string."""
    return orjson.dumps(iso(t))


@lru_cache(maxsize=64)
def iso(t: float) -> str:
    """Claude Code's timestamp format: UTC, milliseconds, `Z`. (The frames of one read share
    their time, hence the cache.)"""
    return datetime.fromtimestamp(t, UTC).isoformat(timespec="milliseconds")[:-6] + "Z"


def cc_turns(turns: int, stop: str | None) -> int:
    """`num_turns` as Claude Code counts: the call that failed (API error), or the turn it
    declined to start (max turns), counts as a turn too."""
    return turns + 1 if stop in ("ProviderError", "MaxTurnsReached") else turns


# Where each of a uuid's 32 hex digits goes in its 36-character text (dashes after 8, 12, 16, 20).
_UUID_AT = [j + (j >= 8) + (j >= 12) + (j >= 16) + (j >= 20) for j in range(32)]
_VARIANT = bytes.maketrans(b"0123456789abcdef", b"89ab89ab89ab89ab")  # 10xx: RFC 4122's variant
UUID_BATCH = 256


def uuid4_batch(n: int = UUID_BATCH) -> list[str]:
    """`n` random (version 4, RFC 4122 variant) UUID strings, from one read of the system's
    randomness and a few slice assignments: a fifth of what formatting each one costs."""
    digits = os.urandom(16 * n).hex().encode()
    text = bytearray(36 * n)
    for j, at in enumerate(_UUID_AT):
        text[at::36] = digits[j::32]
    text[14::36] = b"4" * n  # the version
    text[19::36] = digits[16::32].translate(_VARIANT)
    for at in (8, 13, 18, 23):
        text[at::36] = b"-" * n
    s = text.decode()
    return [s[i : i + 36] for i in range(0, 36 * n, 36)]


def uuid4_source() -> Callable[[], str]:
    """A fresh supply of random UUID strings, drawn in batches (one per encoder: none is shared, so
    a forked process never repeats its parent's)."""
    return chain.from_iterable(iter(uuid4_batch, None)).__next__


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
    table: dict[str, dict[str, Any]], model: str, wire: dict[str, int], cost: float,
    limits: Callable[[str], tuple[int, int]],
) -> None:
    """`limits`: a model's (context window, max output tokens), asked when it is new here."""
    entry = table.get(model)
    if entry is None:
        entry = table[model] = model_usage_entry(model)
        entry["contextWindow"], entry["maxOutputTokens"] = limits(model)
    entry["inputTokens"] += wire["input_tokens"]
    entry["outputTokens"] += wire["output_tokens"]
    entry["cacheReadInputTokens"] += wire["cache_read_input_tokens"]
    entry["cacheCreationInputTokens"] += wire["cache_creation_input_tokens"]
    entry["costUSD"] += cost


def api_error_message(error: ApiError, session_id: str, new_id: Callable[[], str], t: float) -> dict[str, Any]:
    """The synthetic assistant message Claude Code prints before an API-error result."""
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
    return {
        "type": "assistant",
        "message": {
            "diagnostics": None, "id": new_id(), "container": None, "model": "<synthetic>",
            "role": "assistant", "stop_details": None, "stop_reason": "stop_sequence",
            "stop_sequence": "", "type": "message", "usage": usage,
            "content": [{"type": "text", "text": error.text}], "context_management": None,
        },
        "parent_tool_use_id": None,
        "session_id": session_id,
        "uuid": new_id(),
        "timestamp": iso(t),
        "error": error.category,
        "request_id": None,
        "is_api_error_message": True,
        "api_error_status": error.status,
        "api_error_type": error.type,
    }
