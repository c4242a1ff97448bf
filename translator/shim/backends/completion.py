"""A translation's frames completed with what only the shim knows, for both backends
(oneshot/conversation.py, drive/frames.py), and each frame kept under the SDK's line limit."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

MAX_LINE = 1_000_000  # bytes; the SDK refuses lines over 1 MiB (its default max_buffer_size)
TRUNCATED = "\n[… truncated by caliban-claude: the frame exceeded the SDK's 1 MiB line limit]"


def fit(line: bytes) -> bytes:
    """The frame, with its longest strings cut until the line is under the SDK's limit."""
    if len(line) <= MAX_LINE:
        return line
    frame = orjson.loads(line)
    limit = MAX_LINE // 2
    while True:
        cut = _cut(frame, limit)
        line = orjson.dumps(cut) + b"\n"
        if len(line) <= MAX_LINE or limit < 64:
            return line
        limit //= 2


def _cut(value: Any, limit: int) -> Any:
    if isinstance(value, str):
        return value[:limit] + TRUNCATED if len(value) > limit else value
    if isinstance(value, list):
        return [_cut(v, limit) for v in value]
    if isinstance(value, dict):
        return {k: _cut(v, limit) for k, v in value.items()}
    return value


def complete(frames: list[bytes], init: Callable[[dict[str, Any]], None],
             result: Callable[[dict[str, Any]], list[bytes]]) -> list[bytes]:
    """A translation's frames with what only the shim knows: `init` completes an init in
    place; `result` completes a result in place and gives the frames to go before it; the
    rest pass as they are, each fitted."""
    out: list[bytes] = []
    for raw in frames:
        # Only an init or a result is completed: the rest pass as they are. (A key cannot
        # hide in a string value: its quotes would be escaped there.)
        if b'"subtype":"init"' not in raw[:64] and b'"result_index":' not in raw:
            out.append(fit(raw))
            continue
        frame = orjson.loads(raw)
        kind = frame.get("type")
        if kind == "system" and frame.get("subtype") == "init":
            init(frame)
        elif kind == "result":
            out.extend(result(frame))
        else:
            out.append(fit(raw))
            continue
        out.append(fit(orjson.dumps(frame) + b"\n"))
    return out
