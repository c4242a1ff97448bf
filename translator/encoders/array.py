"""The frames as one JSON array (`--output-format json`), as `claude -p --output-format json
--verbose` prints them and caliban-claude's print mode does: for jq users who read a whole
conversation (`jq '.[-1].result'`). Written as the frames come (each frame opens the array or
follows a comma), closed at the end: the memory is a stream's, not the whole output's."""

from __future__ import annotations

from typing import Any

import orjson

# Keys of the stream-json result that Claude Code's json document has not.
STREAM_ONLY = ("model_usage_since_last_result", "written_at")


def document(raw: bytes) -> dict[str, Any]:
    """A frame as the json output holds it: without the keys only stream-json has."""
    frame: dict[str, Any] = orjson.loads(raw)
    for key in STREAM_ONLY:
        frame.pop(key, None)
    return frame


class JsonArray:
    """The array's pieces, frame by frame; `end()` closes it (`[]` when there was none)."""

    def __init__(self, claude_code: bool) -> None:
        self.claude_code = claude_code
        self.opened = False

    def take(self, frames: list[bytes]) -> list[bytes]:
        out = []
        for raw in frames:
            if self.claude_code and any(f'"{key}":'.encode() in raw for key in STREAM_ONLY):
                raw = orjson.dumps(document(raw))
            out.append((b"," if self.opened else b"[") + raw.rstrip(b"\n"))
            self.opened = True
        return out

    def end(self) -> bytes:
        return b"]\n" if self.opened else b"[]\n"
