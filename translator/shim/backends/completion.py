"""Each frame the shim writes kept under the SDK's line limit, for both backends
(oneshot/conversation.py, drive/frames.py). What only the shim knows is not patched in here:
each backend hands it to the encoder (encoders/claude_code/frames.py `Completion`), which
writes the init and the result complete."""

from __future__ import annotations

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


def fitted(frames: list[bytes]) -> list[bytes]:
    """The frames, each fitted."""
    return [fit(raw) for raw in frames]
