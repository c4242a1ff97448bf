"""How closely the input is checked changes which lines are rejected, never what a good line
gives: every fixture, a generated stream and a large TurnEnd translate the same by default and
under --strict, in both formats, with and without partial messages."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from conftest import FIXTURES, line, run_end, translate_bytes

from bench.gen import run_events

FORMATS = [(fmt, partial) for fmt in ("enriched", "claude-code") for partial in (False, True)]
INPUTS = sorted(
    str(p.relative_to(FIXTURES))
    for p in FIXTURES.rglob("*.jsonl")
    if p.relative_to(FIXTURES).parts[0] in ("caliban", "headless", "samples") or p.name.endswith(".events.jsonl")
)


def same_both_ways(data: bytes, fmt: str, partial: bool) -> bytes:
    default = translate_bytes(data, fmt, partial=partial)
    strict = translate_bytes(data, fmt, partial=partial, strict=True)
    assert strict.output == default.output
    assert strict.diagnostics == default.diagnostics
    return default.output


@pytest.mark.parametrize(("fmt", "partial"), FORMATS)
@pytest.mark.parametrize("name", INPUTS)
def test_fixtures(name: str, fmt: str, partial: bool) -> None:
    assert same_both_ways((FIXTURES / name).read_bytes(), fmt, partial)


@pytest.mark.parametrize(("fmt", "partial"), FORMATS)
def test_generated_stream(fmt: str, partial: bool) -> None:
    import random

    rng = random.Random(8)
    data = b"".join(ln + b"\n" for run in range(6) for ln in run_events(rng, run))
    assert len(same_both_ways(data, fmt, partial).splitlines()) > 6


def large_turn_end_with_unmatched_tool_use() -> bytes:
    """A TurnEnd over 16 KB whose message holds a tool_use no ToolCall event announced; its
    result is only in the TurnEnd's own tool_results."""
    result = [{"type": "text", "text": "x" * 20_000}]
    message = {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "Bash",
                                                 "input": {"command": "ls"}}]}
    return (
        line(type="TurnStart", turn_index=0, message_id="msg_0", model="claude-sonnet-4-5")
        + line(type="TurnEnd", turn_index=0, assistant_message=message,
               tool_results=[{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                                           "content": result, "is_error": False}]}],
               stop_reason="tool_use", usage={"input_tokens": 10, "output_tokens": 5},
               ttft={"secs": 0, "nanos": 1}, tbt=None)
        + run_end(turns=1)
    )


@pytest.mark.parametrize(("fmt", "partial"), FORMATS)
def test_large_turn_end_with_an_unmatched_tool_use(fmt: str, partial: bool) -> None:
    data = large_turn_end_with_unmatched_tool_use()
    assert len(data.splitlines()[1]) >= 16384
    out = same_both_ways(data, fmt, partial)
    if fmt == "claude-code":
        kinds = [f["type"] for f in map(orjson.loads, out.splitlines()) if f["type"] not in ("stream_event", "system")]
        assert kinds == ["assistant", "user", "result"]
        user = next(f for f in map(orjson.loads, out.splitlines()) if f["type"] == "user")
        assert user["message"]["content"][0]["tool_use_id"] == "toolu_1"


def test_inputs_found() -> None:
    assert len(INPUTS) > 40 and all(Path(FIXTURES / n).is_file() for n in INPUTS)
