"""The JSON Schemas of the output frames and of the input: shipped, generated from the typed
models; every fixture's output (both formats, every output mode) and every sample's input line
validates against them."""

from __future__ import annotations

import json
from importlib.resources import files
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from support_fixtures import FIXTURES

import translator
from translator.schema import generate as schema
from translator.schema.frames import MODELS

INPUTS = sorted(
    [*FIXTURES.glob("*.events.jsonl"), *FIXTURES.glob("headless/*.jsonl"), *FIXTURES.glob("caliban/*.jsonl"),
     *FIXTURES.glob("samples/*/*.jsonl"), *FIXTURES.glob("samples/*/*.ndjson")]
)
MODES = [{}, {"include_partial_messages": True}, {"results_only": True}]


def validator(fmt: str) -> jsonschema.protocols.Validator:
    shipped = json.loads(files("translator").joinpath(f"data/schema/{fmt}.schema.json").read_text())
    cls = jsonschema.validators.validator_for(shipped)
    cls.check_schema(shipped)
    return cls(shipped)


VALIDATORS = {fmt: validator(fmt) for fmt in MODELS}


@pytest.mark.parametrize("fmt", MODELS)
def test_the_shipped_schema_is_the_one_the_model_generates(fmt: str) -> None:
    assert schema.path(fmt).read_text() == schema.render(fmt), "run `make schemas` after changing translator/schema/frames.py"


@pytest.mark.parametrize("fmt", MODELS)
@pytest.mark.parametrize("source", INPUTS, ids=[str(p.relative_to(FIXTURES)) for p in INPUTS])
def test_every_fixture_output_validates(fmt: str, source: Path) -> None:
    checked = 0
    for mode in MODES:
        for frame in translator.translate(source.read_bytes(), fmt, on_diagnostic=lambda _: None, **mode):
            errors = [e.message for e in VALIDATORS[fmt].iter_errors(frame)]
            assert not errors, f"{frame}: {errors}"
            checked += 1
    assert checked


def test_claude_codes_own_captures_validate_too() -> None:
    """The claude-code schema describes what the real Claude Code CLI printed."""
    captures = sorted((FIXTURES / "claude-code").glob("*.stream.jsonl"))
    assert captures
    for capture in captures:
        for line in capture.read_bytes().splitlines():
            frame = json.loads(line)
            assert VALIDATORS["claude-code"].is_valid(frame), (capture.name, frame)


def frame_of(fmt: str, kind: str) -> dict[str, Any]:
    data = (FIXTURES / "tool_use_two_turns.events.jsonl").read_bytes()
    return next(f for f in translator.translate(data, fmt) if f["type"] == kind)


@pytest.mark.parametrize("fmt", MODELS)
def test_the_schemas_reject_what_is_wrong_and_accept_unknown_events(fmt: str) -> None:
    check = VALIDATORS[fmt]
    result = frame_of(fmt, "result")
    assert check.is_valid(result)
    assert not check.is_valid(result | {"is_error": "no"})
    assert not check.is_valid({k: v for k, v in result.items() if k != "session_id"})
    assert not check.is_valid(result | {"duration_ms": 1.5})
    assert not check.is_valid({"type": "system", "subtype": "init"})  # a known kind, incomplete
    assert check.is_valid({"type": "hook_event", "anything": [1]})  # passed through unchanged
    assert not check.is_valid({"no": "type"})


def test_the_schemas_are_published_in_the_readme() -> None:
    readme = (Path(schema.__file__).parents[2] / "README.md").read_text()
    for fmt in MODELS:
        assert f"translator/data/schema/{fmt}.schema.json" in readme


INPUT_SAMPLES = {
    "raw": sorted([*FIXTURES.glob("samples/raw-*/*"), *FIXTURES.glob("*.events.jsonl")]),
    "headless": sorted([*FIXTURES.glob("samples/headless-*/*"), *FIXTURES.glob("headless/*.jsonl")]),
}


def input_validator(dialect: str) -> jsonschema.protocols.Validator:
    shipped = json.loads(files("translator").joinpath(f"data/schema/input-{dialect}.schema.json").read_text())
    cls = jsonschema.validators.validator_for(shipped)
    cls.check_schema(shipped)
    return cls(shipped)


@pytest.mark.parametrize("dialect", schema.INPUTS)
def test_the_input_schemas_are_the_decoders_classes_and_every_sample_line_fits(dialect: str) -> None:
    assert schema.path(f"input-{dialect}").read_text() == schema.render(f"input-{dialect}"), (
        "run `make schemas` after changing translator/model.py")
    check = input_validator(dialect)
    lines = [line for source in INPUT_SAMPLES[dialect] for line in source.read_bytes().splitlines()
             if line.strip() and line != b"not json"]  # (the agent's own test of a malformed line)
    assert len(lines) > 100
    assert [line[:80] for line in lines if not check.is_valid(json.loads(line))] == []


def test_the_input_schema_rejects_what_the_reader_rejects() -> None:
    check = input_validator("raw")
    start = {"type": "TurnStart", "turn_index": 0, "message_id": "m", "model": "x"}
    assert check.is_valid(start) and check.is_valid(start | {"note": 1})  # unknown fields: ignored
    assert not check.is_valid(start | {"turn_index": -1})
    assert not check.is_valid(start | {"turn_index": 1 << 32})
    assert not check.is_valid({k: v for k, v in start.items() if k != "model"})
    assert not check.is_valid(start | {"type": "TurnBegin"})
