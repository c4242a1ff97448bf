"""The one place the shim meets the translator: caliban's headless stream-json in, Claude
Code frames out, through the project's own core (sans-I/O `Translator` with the claude-code
encoder), fed chunk by chunk as caliban writes. One instance spans the whole conversation, so
`result_index` counts and the cost adds up across caliban runs, as in one Claude Code session.
"""

from __future__ import annotations

import time

from translator.encoders.claude_code import ClaudeCodeEncoder
from translator.fold import WALL, Options, Translator
from translator.rates import RateCard


class Translation:
    """feed(bytes) → the complete Claude Code frames (JSON lines) they produced."""

    def __init__(self, session_id: str, *, partial: bool) -> None:
        rates = RateCard.bundled()
        encoder = ClaudeCodeEncoder([], session_id=session_id, partial=partial, limits=rates.limits)
        options = Options(clock=WALL, epoch=time.time() - time.monotonic())
        self._core = Translator(encoder, rates=rates, options=options, started_at=time.monotonic(), source="caliban")
        self._out = encoder.out

    def feed(self, data: bytes) -> list[bytes]:
        self._core.feed(data, time.monotonic())
        frames = self._out[:]
        self._out.clear()
        return frames

    def take_diagnostics(self) -> list[str]:
        return self._core.take_diagnostics()
