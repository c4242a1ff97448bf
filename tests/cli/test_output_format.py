"""`--output-format json`: the frames as one JSON array, as `claude -p --output-format json
--verbose` prints them (and caliban-claude's print mode): the stream-json frames, in order,
without the result's keys only stream-json has; held to the CLI's own pair of captures."""

from __future__ import annotations

from typing import Any

import orjson
from support_fixtures import FIXTURES, frames_of
from support_processes import fixture, run

from translator.encoders.array import STREAM_ONLY

PRINT = FIXTURES / "cc-2.1.333" / "print"
SID = "3f0c1b6e-0000-4000-8000-000000000000"


def masked(frames: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Without what differs from one translation to the next (fresh uuids, the wall clock's times)."""
    return [{k: v for k, v in f.items() if k not in ("uuid", "timestamp", "duration_ms", "duration_api_ms")}
            for f in frames]


def test_the_clis_json_is_its_stream_json_without_the_stream_only_keys() -> None:
    array = orjson.loads((PRINT / "json_verbose.stdout").read_bytes())
    stream = frames_of((PRINT / "stream_json_verbose.stdout").read_bytes())
    assert [f["type"] for f in array] == [f["type"] for f in stream]
    assert set(stream[-1]) - set(array[-1]) == set(STREAM_ONLY)


def test_claude_code_frames_as_one_array() -> None:
    args = ("--format", "claude-code", "--session-id", SID, fixture("tool_use_two_turns"))
    lines = run(*args)
    array = run("--output-format", "json", *args)
    assert array.returncode == lines.returncode == 0 and array.stderr == b""
    assert array.stdout.count(b"\n") == 1 and array.stdout.startswith(b"[{")
    expected = [{k: v for k, v in f.items() if k not in STREAM_ONLY} for f in frames_of(lines.stdout)]
    assert masked(orjson.loads(array.stdout)) == masked(expected)
    assert "model_usage_since_last_result" in frames_of(lines.stdout)[-1]


def test_enriched_frames_and_several_inputs_as_one_array() -> None:
    inputs = (fixture("tool_use_two_turns"), fixture("max_turns"))
    lines = run("--session-id", SID, *inputs)
    array = run("--output-format", "json", "--session-id", SID, *inputs)
    got = orjson.loads(array.stdout)
    assert masked(got) == masked(frames_of(lines.stdout)) and [f["type"] for f in got].count("result") == 2


def test_no_frame_is_an_empty_array() -> None:
    assert run("--output-format", "json", stdin=b"").stdout == b"[]\n"
