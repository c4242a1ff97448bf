"""How closely the input is checked changes which lines are rejected, never what a good line
gives: every fixture, a generated stream and a large TurnEnd translate the same by default and
under --strict (which also rejects fields serde does not write), in both formats, with and
without partial messages."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from support_fixtures import FIXTURES, line, run_end, translate_bytes

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
    assert strict.rejects == default.rejects
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


def delta(text: object = "x", **fields: object) -> bytes:
    return line(**{"type": "AssistantTextDelta", "turn_index": 0, "content_block_index": 0, "text": text, **fields})


# Lines the default used to let through unchecked: each is rejected by default as by --strict.
MALFORMED = {
    "text not a string": delta(5),
    "index out of u32": delta(content_block_index=1 << 32),
    "negative turn": delta(turn_index=-1),
    "no text": line(type="AssistantTextDelta", turn_index=0, content_block_index=0),
    "invalid UTF-8": delta("\u00e9").replace(b"\xc3\xa9", b"\xff"),
    "lone surrogate": delta("SURR").replace(b"SURR", b"\\ud800"),
    "stamp out of range": delta(ts=-5),
    "two deltas on one line": delta("y")[:-1] + delta("z"),
}


@pytest.mark.parametrize(("fmt", "partial"), FORMATS)
@pytest.mark.parametrize("kind", sorted(MALFORMED))
def test_malformed_delta_is_rejected_by_default(kind: str, fmt: str, partial: bool) -> None:
    bad = MALFORMED[kind]
    for where in (1, 3):  # alone, and inside a run of good deltas
        deltas = [delta("a"), delta("b"), delta("c"), delta("d")]
        deltas.insert(where, bad)
        data = line(type="TurnStart", turn_index=0, message_id="m", model="claude-sonnet-4-5") + b"".join(deltas) + run_end()
        same_both_ways(data, fmt, partial)
        run = translate_bytes(data, fmt, partial=partial)
        assert run.rejects == bad
        assert [d.split(":")[2] for d in run.diagnostics if "no rate" not in d] == [str(2 + where)]


@pytest.mark.parametrize(("fmt", "partial"), FORMATS)
def test_corrupt_history_in_a_run_end_is_rejected_by_default(fmt: str, partial: bool) -> None:
    history = [{"role": "user", "content": [{"type": "text", "text": "\u00e9"}]}]
    good = line(type="RunEnd", final_messages=history, total_usage={"input_tokens": 0, "output_tokens": 0},
                turn_count=0, stopped_for="EndOfTurn", turns_without_edit=0, no_edit_nudge_emitted=False)
    lone_surrogate = good.replace(b"\xc3\xa9", b"\\ud800")
    for corrupt in (good.replace(b"\xc3\xa9", b"\xff"), good.replace(b'"role"', b'"role":', 1), lone_surrogate):
        data = line(type="TurnStart", turn_index=0, message_id="m", model="claude-sonnet-4-5") + corrupt
        same_both_ways(data, fmt, partial)
        assert translate_bytes(data, fmt, partial=partial).rejects == corrupt


@pytest.mark.parametrize(("fmt", "partial"), FORMATS)
def test_a_field_serde_does_not_write_is_ignored_by_default_and_rejected_under_strict(fmt: str, partial: bool) -> None:
    stamped = delta("b", timestamp="2026-01-01T00:00:00Z")  # a recorded log's stamp: a known field
    noted = delta("x", note=1)
    for where in (1, 3):
        deltas = [delta("a"), delta("b"), delta("c"), delta("d")]
        deltas.insert(where, stamped)
        data = line(type="TurnStart", turn_index=0, message_id="m", model="claude-sonnet-4-5") + b"".join(deltas) + run_end()
        same_both_ways(data, fmt, partial)
        with_note = data.replace(stamped, stamped + noted)
        default = translate_bytes(with_note, fmt, partial=partial)
        strict = translate_bytes(with_note, fmt, partial=partial, strict=True)
        assert default.rejects == b"" and strict.rejects == noted
        assert [d.split(": ", 3)[1:3] for d in strict.diagnostics if "no rate" not in d] == [
            [f"test:{3 + where}", "AssistantTextDelta has an unknown field 'note'"]]
        without_note = translate_bytes(data, fmt, partial=partial)
        assert strict.output == without_note.output
