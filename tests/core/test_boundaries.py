"""Every field at the edge of its type: real streams of both dialects with boundary values put
into any numeric or string field (and stamps added), through every output format. Whatever
the values, nothing escapes to the last resort (no internal error), every output line is
JSON with numbers a JSON reader takes exactly, and each run that began has one result."""

from __future__ import annotations

import json
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support_fixtures import FIXTURES, events

from translator.core.rates import RateCard
from translator.core.translator import Options, Translator
from translator.encoders.formats import make_encoder

U32, U64 = (1 << 32) - 1, (1 << 64) - 1
NUMBERS = [0, 1, U32, U32 + 1, U64, -1, -U64, 1e308, -1e308, 5e-324, 0.5, 1e20, 1e306, 1.7e308, 253402300800]
STRINGS = ["", "x" * (1 << 20), "\u0000", "NaN", "Infinity", "-0", "9" * 400, "\ud7ff\ue000", "9999-12-31T23:59:59-14:00",
           "0001-01-01T00:00:00+14:00", "2026-01-01T00:00:00Z"]
STREAMS = {
    "raw": [orjson.loads(ln) for name in ("tool_use_two_turns", "thinking", "max_turns", "api_error")
            for ln in events(name).splitlines()],
    "headless": [orjson.loads(ln) for name in ("tool_use_two_turns", "tool_use_two_turns.partial", "api_error")
                 for ln in (FIXTURES / "headless" / f"{name}.jsonl").read_bytes().splitlines()],
}
FORMATS = [("enriched", False, False), ("enriched", True, False), ("enriched", False, True),
           ("claude-code", False, False), ("claude-code", True, False), ("claude-code", False, True)]
RATES = RateCard.bundled()
MAX_EXACT = 1 << 53


def leaves(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Paths to every number and string in a decoded event (its `type` excepted)."""
    if isinstance(value, dict):
        return [p for k, v in value.items() if path or k != "type" for p in leaves(v, (*path, k))]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in leaves(v, (*path, i))]
    if isinstance(value, (int, float, str)) and not isinstance(value, bool):
        return [path]
    return []


def put(value: Any, path: tuple[Any, ...], new: Any) -> None:
    for key in path[:-1]:
        value = value[key]
    value[path[-1]] = new


def exact_numbers(value: Any) -> bool:
    """Every number in an output frame is one a JSON reader takes exactly (or a float)."""
    if isinstance(value, dict):
        return all(map(exact_numbers, value.values()))
    if isinstance(value, list):
        return all(map(exact_numbers, value))
    return not isinstance(value, int) or -MAX_EXACT <= value <= MAX_EXACT or isinstance(value, bool)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.sampled_from(sorted(STREAMS)), st.sampled_from(FORMATS), st.sampled_from(["estimated", "wall", "recorded"]), st.data())
def test_boundary_values_in_any_field_never_fail_a_run(dialect: str, fmt: tuple[str, bool, bool], clock: str, data: st.DataObject) -> None:
    evs = [orjson.loads(orjson.dumps(ev)) for ev in STREAMS[dialect]]
    for ev in data.draw(st.lists(st.sampled_from(evs), min_size=1, max_size=8), label="events"):
        paths = leaves(ev)
        if data.draw(st.booleans(), label="stamp"):
            ev[data.draw(st.sampled_from(["ts", "timestamp"]))] = data.draw(st.sampled_from(NUMBERS + STRINGS))
        for path in data.draw(st.lists(st.sampled_from(paths), max_size=3), label="fields") if paths else []:
            put(ev, path, data.draw(st.sampled_from(NUMBERS + STRINGS), label=str(path)))
    # the stdlib writes any integer (orjson stops at 64 bits), compact as serde does
    source = b"".join(json.dumps(ev, separators=(",", ":"), ensure_ascii=False).encode() + b"\n" for ev in evs)
    name, partial, results_only = fmt
    encoder = make_encoder(name, "S", include_partial_messages=partial, results_only=results_only, rates=RATES)  # type: ignore[arg-type]
    core = Translator(encoder, rates=RATES, options=Options(clock=clock, detect_recorded=clock == "wall"))
    cut = data.draw(st.integers(0, len(source)), label="cut")
    core.feed(source[:cut], 1.0)
    core.feed(source[cut:], 2.0)
    core.end(3.0)
    frames = [orjson.loads(line) for line in core.take_output().splitlines()]
    assert all(isinstance(f, dict) for f in frames)
    results = [f for f in frames if f.get("type") == "result"]
    if dialect == "raw":  # (headless frames pass the agent's own numbers through as they came)
        assert all(exact_numbers(f) for f in results)
    assert len(results) == core.runs_closed >= 1  # each run one result (the input always has a run)
    assert not core.run_open
    assert not [d for d in core.take_diagnostics() if "internal error" in d]


def test_a_headless_turn_after_a_lone_tool_result_does_not_close_the_run_unwritten() -> None:
    """Found by the test above: a stand-in TurnStart numbered 0 after a turn the tool result
    ended used to close the run through the silenced encoder, so its result was never written."""
    source = b"".join(line + b"\n" for line in (
        b'{"type":"system","subtype":"init","session_id":"S","model":"anthropic/claude-sonnet-4-5"}',
        b'{"type":"tool_result","tool_use_id":"t","is_error":false,"content":[{"text":"3","type":"text"}]}',
        b'{"type":"text","delta":"There are "}',
        b'{"type":"result","subtype":"success","result":"There are 3 files.","session_id":"S"}',
    ))
    for name in ("enriched", "claude-code"):
        core = Translator(make_encoder(name, "S", rates=RATES), rates=RATES, options=Options(clock="estimated"))  # type: ignore[arg-type]
        core.feed(source, 1.0)
        core.end(2.0)
        results = [f for f in map(orjson.loads, core.take_output().splitlines()) if f["type"] == "result"]
        assert len(results) == core.runs_closed == 1


def test_a_tool_name_that_is_no_text_in_a_headless_message_is_no_internal_error() -> None:
    """Found by the test above: a `message` frame's tool_use block named 0 failed its run in the
    claude-code encoder (the name was read as text, to tell an MCP tool's result)."""
    evs = [orjson.loads(ln) for ln in (FIXTURES / "headless" / "tool_use_two_turns.jsonl").read_bytes().splitlines()]
    named = [ev for ev in evs if ev.get("type") == "message" and any(b.get("type") == "tool_use" for b in ev["content"])]
    for block in named[0]["content"]:
        if block.get("type") == "tool_use":
            block["name"] = 0
    core = Translator(make_encoder("claude-code", "S", rates=RATES), rates=RATES, options=Options())
    core.feed(b"".join(orjson.dumps(ev) + b"\n" for ev in evs), 1.0)
    core.end(2.0)
    frames = [orjson.loads(line) for line in core.take_output().splitlines()]
    assert [f["subtype"] for f in frames if f["type"] == "result"] == ["success"]
    assert not [d for d in core.take_diagnostics() if "internal error" in d]
