"""A caliban session made from a Claude Code session file, for a session that exists only as
that file (an SDK `fork_session()` copy, a session store's file the SDK wrote into a config dir
of its own, a file copied from another machine): Claude Code resumes those and sends their
history, so the file is where a session is looked up, and caliban is given its conversation.

The conversation is the file's chain as the SDKs read it back (`get_session_messages`: from
the newest line that is no sidechain, back along `parentUuid`), its user and assistant lines in
caliban's message format (`caliban-provider`'s `Message`: text, image, tool_use, tool_result and
thinking blocks; crates/caliban-sessions `PersistedSession`). No system message: on `--resume`
caliban puts its own prompt first (`apply_system_and_schema`)."""

from __future__ import annotations

import os
import time
from typing import Any

import orjson

from translator.shim.entries import entries

Block = dict[str, Any]
Message = dict[str, Any]  # {"role": "user"|"assistant", "content": [Block, ...]}


def chain(lines: list[bytes]) -> list[dict[str, Any]]:
    """The conversation's lines in order: the newest user or assistant line that is no
    sidechain, and its ancestors (a cut or foreign line is skipped; a loop ends the walk)."""
    by_uuid: dict[str, dict[str, Any]] = {}
    leaf: dict[str, Any] | None = None
    for entry in entries(lines):
        if not isinstance(entry.get("uuid"), str):
            continue
        by_uuid[entry["uuid"]] = entry
        if entry.get("type") in ("user", "assistant") and not entry.get("isSidechain"):
            leaf = entry
    walked: list[dict[str, Any]] = []
    seen: set[str] = set()
    while leaf is not None and leaf["uuid"] not in seen:
        seen.add(leaf["uuid"])
        walked.append(leaf)
        parent = leaf.get("parentUuid")
        leaf = by_uuid.get(parent) if isinstance(parent, str) else None
    return walked[::-1]


def _block(block: Any) -> Block | None:
    """One content block as caliban holds it, or None for what it has no block for (redacted
    thinking, server tools, documents)."""
    if not isinstance(block, dict):
        return None
    kind = block.get("type")
    if kind == "text" and isinstance(block.get("text"), str):
        return {"type": "text", "text": block["text"]}
    if kind == "tool_use" and isinstance(block.get("id"), str) and isinstance(block.get("name"), str):
        return {"type": "tool_use", "id": block["id"], "name": block["name"], "input": block.get("input", {})}
    if kind == "tool_result" and isinstance(block.get("tool_use_id"), str):
        content = block.get("content", "")
        inner = [{"type": "text", "text": content}] if isinstance(content, str) else content
        blocks = [b for b in map(_block, inner if isinstance(inner, list) else []) if b is not None]
        return {"type": "tool_result", "tool_use_id": block["tool_use_id"], "content": blocks,
                "is_error": block.get("is_error") is True}  # fmt: skip
    if kind == "thinking" and isinstance(block.get("thinking"), str):
        thought: Block = {"type": "thinking", "thinking": block["thinking"]}
        if isinstance(block.get("signature"), str):
            thought["signature"] = block["signature"]
        return thought
    source = block.get("source")
    if kind == "image" and isinstance(source, dict) and source.get("type") in ("base64", "url"):
        return {"type": "image", "source": source}
    return None


def messages(entries: list[dict[str, Any]]) -> tuple[list[Message], int]:
    """caliban's messages for the chain's user and assistant lines (no meta lines: the CLI's
    reminders), one message per run of a role (Claude Code writes a line per block), and how
    many blocks had no caliban form. A tool call without its result (a turn cut short) and a
    result without its call go, or the provider would refuse the history."""
    out: list[Message] = []
    dropped = 0
    for entry in entries:
        role, body = entry.get("type"), entry.get("message")
        if role not in ("user", "assistant") or entry.get("isMeta") or not isinstance(body, dict):
            continue
        content = body.get("content")
        raw = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if not isinstance(raw, list):
            continue
        blocks = [b for b in map(_block, raw) if b is not None]
        dropped += len(raw) - len(blocks)
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        elif blocks:
            out.append({"role": role, "content": blocks})
    return _paired(out), dropped


def _paired(found: list[Message]) -> list[Message]:
    """Each tool call kept only with its result in the next message, and the other way round;
    the history starts with the user's message, as providers take it."""
    paired: list[Message] = []
    for n, message in enumerate(found):
        after = found[n + 1]["content"] if n + 1 < len(found) else []
        before = found[n - 1]["content"] if n > 0 else []
        results = {b["tool_use_id"] for b in after if b["type"] == "tool_result"}
        calls = {b["id"] for b in before if b["type"] == "tool_use"}
        kept = [b for b in message["content"]
                if (b["type"] != "tool_use" or b["id"] in results)
                and (b["type"] != "tool_result" or b["tool_use_id"] in calls)]  # fmt: skip
        if kept and paired and paired[-1]["role"] == message["role"]:
            paired[-1]["content"].extend(kept)  # (what stood between them went)
        elif kept and (paired or message["role"] == "user"):
            paired.append({"role": message["role"], "content": kept})
    return paired


def seed(transcript: str, target: str, name: str) -> int | None:
    """Write caliban's session `name` at `target` (a new file, never one that is there) from the
    Claude Code file `transcript`; the count of blocks left out, or None when there is no file
    to read or nothing could be written."""
    try:
        with open(transcript, "rb") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return None
    entries = chain(lines)
    conversation, dropped = messages(entries)
    models = [e["message"].get("model") for e in entries if e.get("type") == "assistant"]
    model = next((m for m in reversed(models) if isinstance(m, str)), "")
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    first = next((e["timestamp"] for e in entries if isinstance(e.get("timestamp"), str)), now)
    session = {"name": name, "created_at": first, "updated_at": now,
               "provider": model.split("/")[0] if "/" in model else "anthropic", "model": model,
               "messages": conversation, "total_usage": {"input_tokens": 0, "output_tokens": 0},
               "todos": [], "plan_mode": False}  # fmt: skip
    try:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError:
        return None
    with open(fd, "wb") as fh:
        fh.write(orjson.dumps(session, option=orjson.OPT_INDENT_2))
    return dropped
