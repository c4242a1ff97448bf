"""The lines of a Claude Code session file (or of caliban's stream) as the shim reads them: a
JSON object a line; a line cut by a crash, or one that is no object, is passed over, never an
error (the readers of such files skip them the same way)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import orjson


def entry(line: bytes) -> dict[str, Any] | None:
    """The line's object, or None for a cut line or one that is not an object."""
    try:
        value = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def entries(lines: Iterable[bytes]) -> Iterator[dict[str, Any]]:
    """The objects of `lines`, in order, the others passed over."""
    for line in lines:
        if (found := entry(line)) is not None:
            yield found
