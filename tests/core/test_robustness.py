"""Never a dead stream: whatever the bytes, every format keeps going, every output line is
JSON, and every run that began ends with a result."""

from __future__ import annotations

import random

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st
from support_fixtures import FIXTURES, SCENARIOS, events

from translator.core.rates import RateCard
from translator.core.translator import Options, Translator
from translator.encoders.claude_code import ClaudeCodeEncoder
from translator.encoders.enriched import EnrichedEncoder

LINES = [ln for name in SCENARIOS for ln in events(name).splitlines()] + [
    ln for name in ("multi_input_frames.replay", "tool_use_two_turns.partial.pre0049", "api_error")
    for ln in (FIXTURES / "headless" / f"{name}.jsonl").read_bytes().splitlines()
]
FORMATS = [
    lambda: EnrichedEncoder([], session_id="S"),
    lambda: EnrichedEncoder([], session_id="S", partial=True),
    lambda: ClaudeCodeEncoder([], session_id="S"),
    lambda: ClaudeCodeEncoder([], session_id="S", partial=True),
]


def mangle(line: bytes, rng: random.Random) -> bytes:
    """A line cut, glued to another, with a byte flipped, or a field of the wrong type."""
    roll = rng.random()
    if roll < 0.25:
        return line[: rng.randrange(len(line) + 1)]
    if roll < 0.5:
        return line[: rng.randrange(len(line) + 1)] + rng.choice(LINES)
    if roll < 0.75:
        i = rng.randrange(len(line))
        return line[:i] + bytes([rng.randrange(256)]) + line[i + 1 :]
    try:
        ev = orjson.loads(line)
        key = rng.choice([k for k in ev if k != "type"] or ["type"])
        ev[key] = rng.choice([None, 7, "x", [], {}, True])
        return orjson.dumps(ev)
    except (orjson.JSONDecodeError, TypeError, IndexError):
        return line


@settings(max_examples=500, deadline=None)
@given(st.integers(min_value=0, max_value=2**32), st.integers(min_value=0, max_value=3), st.booleans())
def test_mangled_streams_never_stop_the_translation(seed: int, fmt: int, strict: bool) -> None:
    rng = random.Random(seed)
    lines = [rng.choice(LINES) for _ in range(rng.randrange(1, 60))]
    lines = [mangle(ln, rng) if rng.random() < 0.3 else ln for ln in lines]
    data = b"\n".join(lines) + b"\n"
    rates = RateCard.bundled()
    core = Translator(FORMATS[fmt](), rates=rates, options=Options(clock="estimated", strict=strict))
    cut = rng.randrange(len(data) + 1)
    core.feed(data[:cut], 0.0)
    core.feed(data[cut:], 1.0)
    began = core.run_open or core.runs_closed
    core.end(2.0)
    out = core.take_output().splitlines()
    frames = [orjson.loads(line) for line in out]  # every line is JSON
    assert all(isinstance(f, dict) for f in frames)
    if began:
        assert any(f.get("type") == "result" for f in frames)
    assert not core.run_open
    # a handler never met a value the shape checks let through and could not take
    assert not [d for d in core.take_diagnostics() if "cannot be translated" in d]
