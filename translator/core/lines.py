"""Chunks of input → complete lines, as the core reads them (after h11's `_receivebuffer`).

A chunk's complete lines are handed on in place (the hot path never copies them); what this
holds is the unfinished line at a chunk's end, in the pieces it came in and joined once when
its newline arrives. A line that grows past the limit is not held at all: from then to its
newline it streams to the rejects, piece by piece, and is reported once it ends.
"""

from __future__ import annotations

from collections.abc import Callable

EXCERPT_BYTES = 80


class LineBuffer:
    """The unfinished line between chunks. `reject(piece)` keeps rejected bytes, `skipped(reason,
    excerpt)` reports a skipped line once it has ended."""

    def __init__(self, max_line_bytes: int, reject: Callable[[bytes], None], skipped: Callable[[str, bytes], None]) -> None:
        self.max_line_bytes = max_line_bytes
        self._reject = reject
        self._skipped = skipped
        self._pending: list[bytes] = []
        self._pending_len = 0
        # An unfinished line being skipped: (bytes so far, excerpt, why; None: over-long).
        self._discarding: tuple[int, bytes, str | None] | None = None

    @property
    def pending_bytes(self) -> int:
        """How many bytes of an unfinished line are held."""
        return self._pending_len

    def head(self, data: bytes) -> tuple[bytes | None, bytes | None, int]:
        """Where a chunk meets the line before it: the held line it completes (or None), the
        chunk (None when a skipped line takes all of it), and where its own lines begin."""
        if self._discarding is not None:
            nl = data.find(b"\n")
            if nl < 0:
                self._discard_piece(data)
                return None, None, 0
            self._discard_piece(data[:nl])
            self._finish_discard()
            data = data[nl + 1 :]
        if self._pending:
            nl = data.find(b"\n")
            if nl >= 0:
                self._pending.append(data[:nl])
                line = b"".join(self._pending)
                self._pending.clear()
                self._pending_len = 0
                return line, data, nl + 1
        return None, data, 0

    def hold(self, tail: bytes) -> None:
        """Keep a chunk's unfinished last line; past the limit, skip it instead."""
        self._pending.append(tail)
        self._pending_len += len(tail)
        if self._pending_len > self.max_line_bytes:
            self.skip(None)

    def skip(self, reason: str | None) -> None:
        """From now to its newline, the unfinished line goes to the rejects, piece by piece as
        it came, and is not held: never joined, not even for the excerpt."""
        if not self._pending:
            return
        pieces = self._pending
        self._pending, self._pending_len = [], 0
        excerpt = b""
        for piece in pieces:
            excerpt += piece[: EXCERPT_BYTES - len(excerpt)]
            if len(excerpt) == EXCERPT_BYTES:
                break
        self._discarding = (0, excerpt, reason)
        for piece in pieces:
            self._discard_piece(piece)

    def finish(self) -> bytes | None:
        """The input ended: the last line if it had no newline (a skipped one is reported)."""
        if self._discarding is not None:
            self._finish_discard()
        elif self._pending:
            line = b"".join(self._pending)
            self._pending.clear()
            self._pending_len = 0
            return line
        return None

    def _discard_piece(self, piece: bytes) -> None:
        assert self._discarding is not None
        size, excerpt, reason = self._discarding
        self._discarding = (size + len(piece), excerpt, reason)
        self._reject(piece)

    def _finish_discard(self) -> None:
        assert self._discarding is not None
        size, excerpt, reason = self._discarding
        self._discarding = None
        self._reject(b"\n")
        self._skipped(reason or f"line longer than {self.max_line_bytes} bytes ({size} bytes)", excerpt)
