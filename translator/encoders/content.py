"""Content blocks as Claude Code writes them, from the agent's messages and tool results.

The agent's blocks differ in ways Claude Code's consumers reject or trip on: its headless
frames write block keys alphabetically; a thinking block has no `signature` from non-Anthropic
models, in logs before 2026-07-11 and in every headless frame (the SDK's parser requires the
key); and since 2026-07-11 it drops empty text blocks from the message, so a block's position
in the message need not be its streamed `content_block_index`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any, Protocol

import orjson
from msgspec import Raw

# Claude Code's key order per block type; other keys follow in the agent's order.
KEY_ORDER = {
    "text": ("type", "text"),
    "thinking": ("type", "thinking", "signature"),
    "tool_use": ("type", "id", "name", "input"),
}


def decoded(raw: Raw) -> Any:
    """Blocks the reader kept as checked JSON bytes, built now that they are written out. JSON
    allows a number no double holds (`1e400`), which orjson refuses: such a value is read as the
    stdlib reads it (infinity, which orjson then writes as null), integers the way orjson reads
    them (past 64 bits, a float), so the frame can still be written."""
    data = bytes(raw)
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data, parse_int=lambda digits: int(digits) if len(digits) < 19 else float(digits))


def claude_block(block: Any) -> Any:
    """A content block in Claude Code's shape: its key order; a thinking block's `signature`
    present (`""` when the agent had none, as Claude Code writes one it has not received);
    a tool input that is not an object is `{}`, as in the agent's authoritative message."""
    if not isinstance(block, dict):
        return block
    order = KEY_ORDER.get(block.get("type"))  # type: ignore[arg-type]
    if order is None:
        return block
    out: dict[str, Any] = {key: block.get(key) for key in order}
    out.update((k, v) for k, v in block.items() if k not in out)
    if order[1] == "thinking":
        out["thinking"] = out["thinking"] or ""
        out["signature"] = out["signature"] or ""
    elif order[1] == "text":
        out["text"] = out["text"] or ""
    elif not isinstance(out["input"], dict):
        out["input"] = {}
    return out


def is_empty_text(block: Any) -> bool:
    """An empty text block, which the agent drops from its messages (OpenAI's `"content":""`)."""
    return isinstance(block, dict) and block.get("type") == "text" and not block.get("text")


class Streamed(Protocol):
    kind: str
    tool_id: str
    parts: list[str]


def match_blocks(blocks: Sequence[Streamed], content: list[Any]) -> list[int | None]:
    """For each streamed block, in order, the position of its block in the authoritative
    message (None: not there, e.g. an empty text block the agent dropped). Matched by
    content, never by position: a tool call by its id; text or thinking by equal text, else
    the next unmatched block of its kind (a streamed block with no text matches none)."""
    if in_place(blocks, content):  # what the rules below find then, at a fraction of the cost
        return list(range(len(blocks)))
    taken: set[int] = set()
    found: list[int | None] = []
    cursor = 0
    for block in blocks:
        kinds = [i for i, c in enumerate(content)
                 if i not in taken and isinstance(c, dict) and c.get("type") == block.kind]
        pick: int | None = None
        if block.kind == "tool_use":
            pick = next((i for i in kinds if content[i].get("id") == block.tool_id), None)
        else:
            text = "".join(block.parts)
            ahead = [i for i in kinds if i >= cursor]
            pick = next((i for i in ahead if content[i].get(block.kind) == text), None)
            if pick is None and text and ahead:
                pick = ahead[0]
        if pick is not None:
            taken.add(pick)
            cursor = max(cursor, pick + 1)
        found.append(pick)
    return found


def in_place(blocks: Sequence[Streamed], content: list[Any]) -> bool:
    """Whether each streamed block is the message's block at its own position (the usual
    case): of its kind, and the same call or the same text."""
    if len(blocks) > len(content):
        return False
    for block, c in zip(blocks, content, strict=False):
        kind = block.kind
        if not isinstance(c, dict) or c.get("type") != kind:
            return False
        if c.get("id") != block.tool_id if kind == "tool_use" else c.get(kind) != "".join(block.parts):
            return False
    return True


def tool_result_content(blocks: list[Any]) -> Any:
    """A tool result's content as Claude Code writes it: a plain string when it is all text
    (text blocks whose text is a string; anything else is kept as the blocks it is)."""
    if len(blocks) == 1:  # the usual case, one text block: its text
        block = blocks[0]
        if isinstance(block, dict) and block.get("type") == "text" and isinstance(text := block.get("text", ""), str):
            return text
    if all(isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text", ""), str) for b in blocks):
        return "\n".join(b.get("text", "") for b in blocks)
    return blocks


MCP_ERROR_PREFIX = "Error: execution failed: "  # caliban's text for an MCP tool's error (ToolError::Execution)


def mcp_result(blocks: list[Any], is_error: bool) -> tuple[Any, Any]:
    """An MCP tool's tool_result content and `tool_use_result`, as Claude Code writes them: the
    content blocks (text blocks as `{"type", "text"}`) twice; for an error, its text, and
    `Error: <text>` (caliban's own wording of it taken off)."""
    if not is_error:
        out = [{"type": "text", "text": b.get("text", "")} if isinstance(b, dict) and b.get("type") == "text" else b
               for b in blocks]  # fmt: skip
        return out, out
    text = "\n".join(str(b.get("text", "")) for b in blocks if isinstance(b, dict) and b.get("type") == "text")
    text = text.removeprefix(MCP_ERROR_PREFIX)
    return text, f"Error: {text}"


_CALIBAN_BASH = re.compile(r"\A→ Bash command: .*?\n→ Exit code: (-?\d+)\n→ Stdout:\n(.*)\n\n→ Stderr:\n(.*)\Z", re.S)


def tool_use_result(name: str | None, text: Any) -> Any:
    """Claude Code's `tool_use_result`: Bash gets its structured result (split out of the
    agent's formatted Bash output when it is in that format); other tools get the text."""
    if name == "Bash" and isinstance(text, str):
        match = _CALIBAN_BASH.match(text)
        stdout, stderr = (match.group(2), match.group(3)) if match else (text, "")
        if stderr == "(empty)":
            stderr = ""
        return {"stdout": stdout, "stderr": stderr, "interrupted": False, "isImage": False, "noOutputExpected": False}
    return text
