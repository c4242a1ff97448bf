"""Headless input in either format: the encoder decides what of it to write (the default
format passes the frames as they came, and none of the moves the reader makes of them), while
what the run measured is the same whatever the format."""

from __future__ import annotations

from typing import Any, cast

import pytest
from support_fixtures import SESSION, events, frames_of, results, translate_bytes

from translator.core.rates import RateCard
from translator.core.translator import Options, Translator
from translator.encoders import Encoder
from translator.encoders.claude_code import ClaudeCodeEncoder
from translator.encoders.enriched import EnrichedEncoder
from translator.encoders.observed import Observed, StreamId
from translator.table.rows import Recorder

# One headless run (a tool call), some frames stamped as a recorded log stamps them.
STAMPED = b"\n".join([
    b'{"type":"system","subtype":"init","session_id":"s","model":"mock/mock","ts":1700000000}',
    b'{"type":"tool_use","id":"t1","name":"Glob","input":{}}',
    b'{"type":"tool_result","tool_use_id":"t1","is_error":false,"content":"ok","ts":1700000006}',
    b'{"type":"message","role":"assistant","content":[{"type":"tool_use","id":"t1","name":"Glob","input":{}}]}',
    b'{"type":"result","subtype":"success","result":"","session_id":"s","total_cost_usd":0.0,"turns":1,'
    b'"total_input_tokens":1,"total_output_tokens":1,"ts":1700000009}',
]) + b"\n"  # fmt: skip
# A pre-flight failure: the agent prints its result with no init before it.
PREFLIGHT = (b'{"type":"result","subtype":"error","error":"no API key","session_id":"","total_cost_usd":0.0,'
             b'"turns":0,"total_input_tokens":0,"total_output_tokens":0}\n')


def test_a_headless_runs_times_are_the_same_in_both_formats() -> None:
    """The API time runs from the run's start to the stamped tool result (the last model
    frame before the message): 6 s in both formats (claude-code once said 0)."""
    for fmt in ("enriched", "claude-code"):
        (result,) = results(translate_bytes(STAMPED, fmt, clock="recorded").output)
        assert (result["duration_ms"], result["duration_api_ms"]) == (9000, 6000), fmt


@pytest.mark.parametrize("partial", [False, True])
def test_the_default_format_writes_the_frames_not_their_moves(partial: bool) -> None:
    out = translate_bytes(STAMPED, "enriched", partial=partial, clock="recorded").output.splitlines()
    assert out[:-1] == STAMPED.splitlines()[:-1]
    assert frames_of(out[-1])[0]["type"] == "result"


def test_a_result_alone_gets_no_init_in_the_default_format() -> None:
    out = frames_of(translate_bytes(PREFLIGHT, "enriched").output)
    assert [(f["type"], f["subtype"]) for f in out] == [("result", "error")]
    assert out[0]["error"] == "no API key" and out[0]["is_error"] is True


def rows(fmt: str) -> list[dict[str, Any]]:
    rates = RateCard.bundled()
    inner = (ClaudeCodeEncoder([], session_id=SESSION, limits=rates.limits) if fmt == "claude-code"
             else EnrichedEncoder([], session_id=SESSION))
    recorder = Recorder(0.0)
    observed = Observed(inner, recorder, StreamId("log.ndjson", SESSION, ""), 0.0)
    core = Translator(cast(Encoder, observed), rates=rates, options=Options(clock="recorded"), source="log.ndjson")
    core.feed(STAMPED, 0.0)
    core.end(0.0)
    return recorder.rows


def test_the_results_table_is_the_same_in_both_formats() -> None:
    """Its model is the one the run's moves name (the init's, without its provider) and its
    first time the run's start, in both formats (the default format's once named the init's
    `mock/mock` and had no first time)."""
    (row,) = rows("enriched")
    assert rows("claude-code") == [row]
    assert (row["model"], row["models"], row["first_ts_ms"], row["last_ts_ms"]) == (
        "mock", ["mock"], 1_700_000_000_000, 1_700_000_009_000)


def test_a_headless_frame_that_makes_no_moves_leaves_a_raw_runs_frames_alone() -> None:
    """A warning amid raw events passes through, and the raw run's messages and tool frames
    are still written (it once silenced them until the run's result)."""
    raw = events("tool_use_two_turns").splitlines(keepends=True)
    warning = b'{"type":"warning","subtype":"model_mismatch","message":"m"}\n'
    alone = translate_bytes(b"".join(raw), "enriched").output.splitlines(keepends=True)
    mixed = translate_bytes(b"".join([raw[0], warning, *raw[1:]]), "enriched").output.splitlines(keepends=True)
    assert len(alone) > 3
    assert mixed == [alone[0], warning, *alone[1:]]
