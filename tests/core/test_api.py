"""The library API: `translate()` and `Stream` give what the command gives, from Python."""

from __future__ import annotations

import importlib.metadata
import io
import json
from importlib.resources import files
from typing import Any

import pytest
from support_fixtures import EXPECTED, FIXTURES, SCENARIOS, events, frames_of, lines_of, recoveries, reported

import translator
from translator import Stream, translate, translate_bytes
from translator.core.rates import RateCard


@pytest.mark.parametrize("name", SCENARIOS)
def test_translate_gives_the_golden_output(name: str) -> None:
    expected = (EXPECTED / f"{name}.enriched.jsonl").read_bytes()
    assert b"".join(translate_bytes(events(name), session_id="SESSION")) == expected
    assert list(translate(events(name), session_id="SESSION")) == frames_of(expected)


def test_every_input_shape_gives_the_same_frames() -> None:
    data = events("tool_use_two_turns")
    want = list(translate(data, session_id="S"))
    path = FIXTURES / "tool_use_two_turns.events.jsonl"
    with path.open("rb") as lines:  # a file's lines, with their newlines
        assert list(translate(lines, session_id="S")) == want
    with path.open("rb") as whole:  # a binary file object, read in chunks
        assert list(translate(io.BufferedReader(whole), session_id="S")) == want
    assert list(translate(data.decode(), session_id="S")) == want
    assert list(translate([json.loads(ln) for ln in lines_of("tool_use_two_turns")], session_id="S")) == want
    assert list(translate([data[i : i + 7] for i in range(0, len(data), 7)], session_id="S")) == want
    with path.open() as text:  # a text file object, as `open(path)` gives
        assert list(translate(text, session_id="S")) == want
    with pytest.raises(TypeError, match=r"the input is its content, not a path: pass open\(.*'rb'\)"):
        list(translate(path))
    with pytest.raises(TypeError, match=r"the input is its content, not a path: pass open\('x.jsonl', 'rb'\)"):
        list(translate("x.jsonl"))  # (it was one bad line and no frame)
    with pytest.raises(TypeError, match="not a path"):
        list(translate_bytes(str(path)))
    said: list[str] = []
    assert list(translate("")) == list(translate("{}", on_diagnostic=said.append)) == []  # content still is
    assert len(said) == 1  # (a line that is no event: reported, as ever)


def test_claude_code_format_and_its_options() -> None:
    frames = list(translate(events("max_turns"), "claude-code", session_id="S"))
    assert [f["type"] for f in frames] == ["system", "assistant", "assistant", "user", "result"]
    assert frames[-1]["subtype"] == "error_max_turns" and {f["session_id"] for f in frames} == {"S"}
    (only,) = translate(events("max_turns"), "claude-code", results_only=True)
    assert only["type"] == "result" and "model_usage_since_last_result" not in only


def test_bad_lines_are_reported_and_skipped() -> None:
    seen: list[str] = []
    data = b"oops\n" + events("thinking")
    frames = list(translate(data, on_diagnostic=seen.append, source="mine.jsonl"))
    (message,) = seen
    assert message.startswith("translator: mine.jsonl:1: invalid JSON") and message.endswith(": oops")
    assert frames[-1]["result"] == "17 * 23 = 391."


def test_recoveries_reach_the_caller_and_fail_nothing() -> None:
    data, said = recoveries()
    seen: list[str] = []
    frames = list(translate(data, on_invalid="fail", on_diagnostic=seen.append, source="mine.jsonl"))
    assert reported(seen) == said
    assert seen[0].startswith(f"translator: mine.jsonl:{said[0][0]}: info: ")
    assert [f["subtype"] for f in frames if f["type"] == "result"] == ["success", "error"]
    stream = Stream(source="live")
    stream.feed(data)
    stream.end()
    assert reported(stream.take_diagnostics()) == said
    assert stream.bad_lines == 0 and stream.take_rejects() == b""


def test_bad_lines_go_to_the_translator_logger_by_default(caplog: pytest.LogCaptureFixture) -> None:
    list(translate(b"oops\n" + events("thinking")))
    (record,) = caplog.records
    assert record.name == "translator" and record.getMessage().startswith("translator: <stream>:1: invalid JSON")


def test_on_invalid_fail_stops_with_an_error_result() -> None:
    data = b"\n".join([*lines_of("tool_use_two_turns")[:4], b"oops", *lines_of("tool_use_two_turns")[4:]])
    frames = list(translate(data, on_invalid="fail", on_diagnostic=lambda _: None))
    assert frames[-1]["subtype"] == "error" and frames[-1]["error"].startswith("input rejected at line 5")


def test_a_stream_fed_byte_by_byte_gives_the_same_frames() -> None:
    data = events("multi_input_frames")
    stream = Stream(session_id="S", clock="estimated")
    out: list[bytes] = []
    for i in range(len(data)):
        out += stream.feed(data[i : i + 1], now=float(i))
    out += stream.end()
    assert all(frame.endswith(b"\n") and frame.count(b"\n") == 1 for frame in out)
    assert b"".join(out) == b"".join(translate_bytes(data, session_id="S", clock="estimated"))
    assert stream.stopped and stream.results == 2 and stream.last_subtype == "success"


def test_a_stream_fed_text_says_it_takes_bytes() -> None:
    data = events("multi_input_frames")
    stream = Stream(session_id="S", clock="estimated")
    with pytest.raises(TypeError, match=r"^Stream\.feed\(\) takes bytes, not str \(encode text first\)$"):
        stream.feed(data.decode(), now=0.0)  # type: ignore[arg-type]
    whole = b"".join(translate_bytes(data, session_id="S", clock="estimated"))
    assert b"".join([*stream.feed(data, now=0.0), *stream.end()]) == whole  # the stream goes on


def test_a_live_stream_times_by_arrival_and_closes_open_runs() -> None:
    lines = lines_of("tool_use_two_turns")
    stream = Stream("claude-code", include_partial_messages=True)
    assert stream.feed(b"\n".join(lines[:3]) + b"\n", now=100.0)
    assert stream.run_open and stream.clock == "wall"
    (result,) = [json.loads(f) for f in stream.cancel(now=100.5) if b'"type":"result"' in f]
    assert (result["subtype"], result["terminal_reason"]) == ("error_during_execution", "aborted_streaming")
    assert not stream.run_open and stream.feed(b"\n".join(lines) + b"\n") == []

    cut = Stream()
    cut.feed(b"\n".join(lines[:3]))  # no newline: the last line waits for the end
    *_, last = cut.end()
    assert json.loads(last)["error"] == "the input ended before the run finished (no RunEnd)"


def test_diagnostics_and_rejects_are_taken_from_a_stream() -> None:
    stream = Stream(source="live")
    stream.feed(b"\xff\xfe\n" + events("thinking"))
    assert stream.take_diagnostics() == ["translator: live:1: invalid UTF-8: \\xff\\xfe"]
    assert stream.take_rejects() == b"\xff\xfe\n"
    assert stream.take_diagnostics() == [] and stream.bad_lines == 1


def test_rates_can_be_a_card_or_its_path(tmp_path: Any) -> None:
    card = tmp_path / "rates.json"
    card.write_text('{"rates": [{"model": "*", "input": 1000000, "output": 0}]}')
    by_path = list(translate(events("thinking"), rates=str(card)))[-1]
    by_card = list(translate(events("thinking"), rates=RateCard.load(card)))[-1]
    assert by_path["total_cost_usd"] == by_card["total_cost_usd"] > 1


def test_unknown_format_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="unknown format 'xml'"):
        Stream("xml")  # type: ignore[arg-type]


def test_the_package_is_typed_and_its_version_is_single_sourced() -> None:
    assert files("translator").joinpath("py.typed").is_file()
    dist = importlib.metadata.packages_distributions()["translator"][0]
    assert importlib.metadata.version(dist) == translator.__version__
    assert set(translator.__all__) >= {"translate", "translate_bytes", "Stream", "RateCard", "__version__"}


def test_the_frames_are_typed_per_format(tmp_path: Any) -> None:
    """`translate()`'s frames are the TypedDicts of translator/schema/frames.py for its format,
    narrowed by their "type": mypy --strict finds a key used as what it is not (they were
    `dict[str, Any]`: anything passed)."""
    import subprocess
    import sys

    program = tmp_path / "app.py"
    program.write_text(
        "import translator\n"
        "for frame in translator.translate(b'', 'claude-code'):\n"
        "    if frame['type'] == 'result':\n"
        "        cost: float = frame['total_cost_usd']\n"
        "        turns: str = frame['num_turns']\n"  # an int: the one error
        "for enriched in translator.translate(b''):\n"
        "    if enriched['type'] == 'result':\n"
        "        ms: int = enriched['duration_ms']\n"
    )
    proc = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-incremental", str(program)],
                          capture_output=True, timeout=300)
    said = proc.stdout.decode()
    assert proc.returncode == 1, said
    assert said.count("error:") == 1 and f"{program}:5: error: Incompatible types in assignment" in said, said
