"""Every byte-exact sample of the agent's output (fixtures/samples/, see its README), in both
formats, with and without partial messages, default and strict decoding."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import orjson
import pytest
from support_fixtures import FIXTURES, frames_of, reported

from translator.core.rates import RateCard
from translator.core.translator import Options, Translator
from translator.diagnostics import KINDS
from translator.encoders.claude_code import ClaudeCodeEncoder
from translator.encoders.enriched import EnrichedEncoder

SAMPLES = FIXTURES / "samples"
ALL = sorted(p for p in SAMPLES.glob("*/*") if p.suffix in (".ndjson", ".jsonl"))
# What a sample is reported for, (line, kind): the one deliberately invalid line (the agent's own
# test of skipping malformed input), and the recovery moves (core/states.py) — the samples of a
# single event, and the excerpts that stop inside a run, are cut off; Stage A retries its turn.
REPORTS = {
    "raw-verbatim/attach_rs_skips_malformed_lines.ndjson": [(1, "invalid_json"), (2, "truncated")],
    "raw-serde-from-tests/stream_mod_serde_text_delta.ndjson": [(1, "truncated")],
    "raw-serde-from-tests/stream_mod_serde_turn_end.ndjson": [(1, "truncated")],
    "headless-verbatim-docs/adr0025_tool_frames.ndjson": [(3, "truncated")],
    "raw-derived-from-code/stage_a_max_tokens_retry.ndjson": [(4, "retried_turn")],
}
MODES = list(itertools.product(["enriched", "claude-code"], [False, True], [False, True]))


def translate(path: Path, fmt: str, partial: bool, strict: bool) -> tuple[list[dict[str, Any]], list[str], Translator]:
    rates = RateCard.bundled()
    ids = itertools.count()
    encoder: Any
    if fmt == "enriched":
        encoder = EnrichedEncoder([], session_id="S", partial=partial)
    else:
        encoder = ClaudeCodeEncoder([], session_id="S", partial=partial, limits=rates.limits,
                                    new_id=lambda: f"id-{next(ids)}")
    core = Translator(encoder, rates=rates, options=Options(clock="estimated", strict=strict))
    core.feed(path.read_bytes(), 0.0)
    core.end(0.0)
    diagnostics = [d for d in core.take_diagnostics() if "warning: no rate" not in d]
    return frames_of(core.take_output()), diagnostics, core


def ends(path: Path, fmt: str) -> int:
    """How many runs the sample ends (RunEnds, or upstream results), at least the one the
    input's end closes. In the Claude Code format each echoed prompt after the first also
    closes an input frame (see docs/headless.md)."""
    types = [orjson.loads(ln).get("type") for ln in path.read_bytes().splitlines()
             if ln.startswith(b"{")]
    echoes = max(types.count("user") - 1, 0) if fmt == "claude-code" else 0
    return max(types.count("RunEnd") + types.count("result"), 1) + echoes


def test_the_samples_are_there() -> None:
    assert len(ALL) >= 30
    assert set(REPORTS) <= {f"{p.parent.name}/{p.name}" for p in ALL}


@pytest.mark.parametrize(("fmt", "partial", "strict"), MODES)
@pytest.mark.parametrize("path", ALL, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_one_result_per_run_and_what_is_reported(path: Path, fmt: str, partial: bool, strict: bool) -> None:
    frames, diagnostics, core = translate(path, fmt, partial, strict)
    expected = REPORTS.get(f"{path.parent.name}/{path.name}", [])
    assert reported(diagnostics) == expected
    # A recovery is said, not rejected: only bad lines count and go to the rejects.
    bad = [line for line, kind in expected if kind in KINDS]
    assert core.bad_lines == len(bad)
    assert core.take_rejects().count(b"\n") == len(bad)
    results = [f for f in frames if f.get("type") == "result"]
    assert len(results) == ends(path, fmt)


@pytest.mark.parametrize("partial", [False, True])
@pytest.mark.parametrize("path", ALL, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_claude_code_frame_parses_with_the_sdk(path: Path, partial: bool) -> None:
    from claude_agent_sdk._internal.message_parser import parse_message

    frames, *_ = translate(path, "claude-code", partial, False)
    for frame in frames:
        if frame["type"] in ("system", "assistant", "user", "result", "stream_event"):
            assert parse_message(frame) is not None, frame
