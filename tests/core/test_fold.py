"""The core on fixtures: frames, results, subtypes, usage and cost, bad input, cut streams."""

from __future__ import annotations

import pytest
from support_fixtures import (
    EXPECTED,
    SCENARIOS,
    drive,
    events,
    frames_of,
    line,
    lines_of,
    reported,
    run_end,
    turn,
)

from translator.core.rates import RateCard
from translator.core.translator import LOST_RUN_END, THINKING_BUDGET, TRUNCATED


@pytest.mark.parametrize("name", SCENARIOS)
def test_scenarios_match_golden_output(name: str) -> None:
    expected = (EXPECTED / f"{name}.enriched.jsonl").read_bytes()
    run = drive(events(name))
    assert run.output == expected
    assert run.diagnostics == []  # every scenario is whole: no bad line, nothing recovered


@pytest.mark.parametrize("name", SCENARIOS)
def test_strict_decoding_gives_the_same_output(name: str) -> None:
    assert drive(events(name), strict=True).output == drive(events(name)).output


def test_tool_use_two_turns_in_detail() -> None:
    run = drive(events("tool_use_two_turns"))
    kinds = [(f["type"], f.get("subtype")) for f in run.frames]
    assert kinds == [
        ("system", "init"),
        ("tool_use", None),
        ("tool_result", None),
        ("message", None),
        ("message", None),
        ("result", "success"),
    ]
    assert run.frames[0] == {
        "type": "system", "subtype": "init", "session_id": "SESSION", "model": "claude-sonnet-4-5"
    }
    assert run.frames[1] == {
        "type": "tool_use",
        "id": "toolu_01Ab3CdE4fGh5iJk6LmN7oPq",
        "name": "Bash",
        "input": {"command": "ls | wc -l"},
    }
    assert run.frames[2]["content"] == [{"type": "text", "text": "3"}]
    result = run.results[0]
    # ADR 0049: the final assistant message, not the concatenation of every delta.
    assert result["result"] == "There are 3 files."
    assert result["total_cost_usd"] == pytest.approx(0.0069702, abs=1e-12)
    assert result["turns"] == result["num_turns"] == 2
    assert result["usage"] == {
        "input_tokens": 6376,
        "output_tokens": 57,
        "cache_creation_input_tokens": 1168,
        "cache_read_input_tokens": 5144,
    }
    assert (result["total_input_tokens"], result["total_output_tokens"]) == (6376, 57)
    assert result["is_error"] is False
    # estimated: (412 + 15 x 4) for 5 deltas + (300 + 15 x 1) for 2 deltas
    assert result["duration_api_ms"] == result["duration_ms"] == 787
    assert result["duration_source"] == "estimated"
    assert (result["turns_without_edit"], result["no_edit_nudge_emitted"]) == (2, False)
    assert list(result)[:3] == ["type", "subtype", "result"]


def test_multi_run_stream_keeps_each_frame_apart() -> None:
    run = drive(events("multi_input_frames"))
    first, second = run.results
    assert [first["result"], second["result"]] == ["Hello! How can I help?", "2 + 2 = 4."]
    assert first["usage"]["input_tokens"] == 2957 and second["usage"]["input_tokens"] == 2999
    assert first["total_cost_usd"] == pytest.approx(0.0043485)
    assert second["total_cost_usd"] == pytest.approx(0.001182)
    assert (first["duration_ms"], second["duration_ms"]) == (212 + 15, 250 + 15)
    assert [f["type"] for f in run.frames].count("system") == 1
    assert run.core.runs_closed == 2


@pytest.mark.parametrize(
    ("stopped_for", "subtype", "error"),
    [
        ("EndOfTurn", "success", None),
        ({"MaxTurnsReached": 3}, "max_turns", None),
        ("Cancelled", "cancelled", None),
        ("MaxTokensExhausted", "max_tokens", None),
        ({"ProviderError": "server error (HTTP 500): boom"}, "error", "server error (HTTP 500): boom"),
        ({"HookDenied": "policy says no"}, "error", "policy says no"),
        ({"CompactionFailed": "too big"}, "error", "too big"),
        ({"Refusal": "declined"}, "error", "declined"),
        ({"ContentFilter": "filtered"}, "error", "filtered"),
        ({"StreamIdle": {"secs": 90, "nanos": 5}}, "error", "stream idle for 90s"),
        ("ThinkingBudgetExhausted", "error", THINKING_BUDGET),
        ({"SomethingNew": 7}, "error", "stopped for SomethingNew: 7"),
    ],
)
def test_every_subtype(stopped_for: object, subtype: str, error: str | None) -> None:
    run = drive(turn(0, "partial answer") + run_end(stopped_for, turns=1))
    result = run.results[0]
    assert result["subtype"] == subtype
    assert result["is_error"] is (subtype != "success")
    assert result.get("error") == error
    if subtype == "success":
        assert result["result"] == "partial answer"
        assert "last_assistant_text" not in result and "tool_calls_seen" not in result
    else:
        assert "result" not in result
        assert result["last_assistant_text"] == "partial answer"
        assert result["tool_calls_seen"] == 0


def test_non_success_without_any_reply_has_no_last_assistant_text() -> None:
    result = drive(events("api_error")).results[0]
    assert result["subtype"] == "error" and "last_assistant_text" not in result
    assert result["error"].startswith("server error (HTTP 500)")


def test_thinking_only_last_turn_keeps_the_previous_reply() -> None:
    data = turn(0, "The answer is 4.") + turn(1, None, thinking="hmm, done") + run_end(turns=2)
    assert drive(data).results[0]["result"] == "The answer is 4."


def test_reply_is_the_last_turn_not_the_concatenation() -> None:
    data = turn(0, "Let me look.") + turn(1, "Found it: 42.") + run_end(turns=2)
    assert drive(data).results[0]["result"] == "Found it: 42."


def test_fallback_to_all_deltas_when_no_turn_had_text() -> None:
    # The deltas were streamed, but the turns' messages carry no text block.
    data = (
        line(type="TurnStart", turn_index=0, message_id="m", model="claude-sonnet-4-5")
        + line(type="AssistantTextDelta", turn_index=0, content_block_index=0, text="Hel")
        + line(type="AssistantTextDelta", turn_index=0, content_block_index=0, text="lo")
        + line(
            type="TurnEnd",
            turn_index=0,
            assistant_message={"role": "assistant", "content": []},
            tool_results=[],
            stop_reason="end_turn",
            usage={"input_tokens": 1, "output_tokens": 1},
            ttft=None,
            tbt=None,
        )
        + run_end(turns=1)
    )
    assert drive(data).results[0]["result"] == "Hello"
    assert drive(data, strict=True).results[0]["result"] == "Hello"


def test_cache_counters_are_inside_input_tokens_for_cost() -> None:
    usage = {
        "input_tokens": 1_000_000,
        "output_tokens": 0,
        "cache_creation_input_tokens": 250_000,
        "cache_read_input_tokens": 500_000,
    }
    result = drive(turn(0, "x", usage=usage) + run_end(turns=1, total_usage=usage)).results[0]
    # 250k uncached x $3 + 500k read x $0.30 + 250k written x $3.75 per million
    assert result["total_cost_usd"] == pytest.approx(0.75 + 0.15 + 0.9375)
    assert result["usage"] == usage


def test_unknown_model_costs_nothing_and_warns_once() -> None:
    data = (turn(0, "a", model="mystery-1") + turn(1, "b", model="mystery-1") + run_end(turns=2)) * 2
    run = drive(data)
    assert [r["total_cost_usd"] for r in run.results] == [0.0, 0.0]
    assert run.diagnostics == ["translator: warning: no rate for model 'mystery-1'; its cost counts as 0"]


def test_a_turn_of_no_tokens_costs_nothing_at_any_rate_so_its_model_is_not_warned_of() -> None:
    nothing = {"input_tokens": 0, "output_tokens": 0}
    run = drive(turn(0, "a", model="mystery-1", usage=nothing) + run_end(turns=1))
    assert run.results[0]["total_cost_usd"] == 0.0 and run.diagnostics == []
    run = drive(turn(0, "a", model="mystery-1", usage=nothing) + turn(1, "b", model="mystery-1") + run_end(turns=2))
    assert run.diagnostics == ["translator: warning: no rate for model 'mystery-1'; its cost counts as 0"]


def test_rate_card_replaces_bundled_prices(tmp_path) -> None:
    card = tmp_path / "rates.toml"
    card.write_text('[[rates]]\nmodel = "mystery-*"\ninput = 1.0\noutput = 2.0\n')
    usage = {"input_tokens": 1_000_000, "output_tokens": 1_000_000}
    data = turn(0, "a", model="acme/mystery-1", usage=usage) + run_end(turns=1, total_usage=usage)
    result = drive(data, rates=RateCard.load(card)).results[0]
    assert result["total_cost_usd"] == pytest.approx(3.0)


def test_bad_lines_are_reported_and_skipped() -> None:
    clean = lines_of("tool_use_two_turns")
    bad = [b"not json at all", b"[1, 2]", b'{"no_type": 1}', b'{"type":"TurnStart","turn_index":"x"}',
           b"\xff\xfe garbage", b'{"type":"AssistantTextDelta","turn_index":0,"content_blo']
    mixed = []
    for i, good in enumerate(clean):
        mixed.append(good)
        if i < len(bad):
            mixed.append(bad[i])
    run = drive(b"\n".join(mixed) + b"\n")
    assert run.output == drive(events("tool_use_two_turns")).output
    reasons = [d.split(": ", 3)[2] for d in run.diagnostics]
    assert [d.split(":")[2] for d in run.diagnostics] == ["2", "4", "6", "8", "10", "12"]
    assert reasons[1] == "not a JSON object"
    assert reasons[2] == "no 'type' key"
    assert reasons[3] == "TurnStart has a malformed 'turn_index'"
    assert reasons[4] == "invalid UTF-8"
    assert reasons[5] == "invalid JSON (truncated line)"
    assert run.diagnostics[0].startswith("translator: test:2: invalid JSON")
    assert run.diagnostics[0].endswith(": not json at all")
    assert run.rejects == b"".join(b + b"\n" for b in bad)
    assert run.core.bad_lines == len(bad)


def test_excerpt_is_the_first_80_bytes() -> None:
    run = drive(b"x" * 200 + b"\n")
    assert run.diagnostics[0].endswith(": " + "x" * 80)


def test_blank_lines_crlf_and_a_last_line_without_newline() -> None:
    data = events("tool_use_two_turns").replace(b"\n", b"\r\n\r\n \n").rstrip(b"\r\n \n")
    run = drive(data)
    assert run.output == drive(events("tool_use_two_turns")).output
    assert run.diagnostics == []


def test_stream_cut_mid_run_still_gets_a_result() -> None:
    cut = b"\n".join(lines_of("tool_use_two_turns")[:10]) + b"\n"  # up to turn 2's TurnStart
    run = drive(cut, end=5.0)
    result = run.results[-1]
    assert result["subtype"] == "error" and result["is_error"] is True
    assert result["error"] == TRUNCATED
    assert result["turns"] == 1 and result["usage"]["input_tokens"] == 3100
    assert result["last_assistant_text"] == "I'll count the files."
    assert result["tool_calls_seen"] == 1
    assert "turns_without_edit" not in result
    assert [f["type"] for f in run.frames].count("result") == 1


def test_cut_inside_a_line_reports_it_and_closes_the_frame() -> None:
    data = events("tool_use_two_turns")
    cut = data[: data.index(b'"There are ') + 5]  # inside a delta line, no newline at the end
    run = drive(cut)
    assert run.results[-1]["error"] == TRUNCATED
    last = cut.count(b"\n") + 1
    assert reported(run.diagnostics) == [(last, "invalid_json"), (last, "truncated")]
    assert "truncated line" in run.diagnostics[0]
    assert run.diagnostics[1] == (
        f"translator: test:{last}: warning: the input ended inside a run (no RunEnd); that run is closed as an error"
    )
    assert run.core.bad_lines == 1


def test_empty_input_produces_nothing() -> None:
    run = drive(b"")
    assert run.output == b"" and run.core.runs_closed == 0


def test_lost_run_end_splits_the_runs() -> None:
    data = turn(0, "first") + turn(0, "second") + run_end(turns=1)
    run = drive(data)
    first, second = run.results
    assert first["subtype"] == "error" and first["error"] == LOST_RUN_END
    assert reported(run.diagnostics) == [(turn(0, "first").count(b"\n") + 1, "lost_run_end")]
    assert run.core.bad_lines == 0 and run.rejects == b""
    assert first["last_assistant_text"] == "first"
    assert second["subtype"] == "success" and second["result"] == "second"


def test_unknown_events_pass_through_unchanged() -> None:
    future = b'{"type":"CompactionStarted","reason": "context full"}'
    data = turn(0, "a") + future + b"\n" + run_end(turns=1)
    frames = drive(data).output.splitlines()
    assert future in frames
    assert frames.index(future) < len(frames) - 1


def test_partial_messages_emit_deltas_instead_of_messages() -> None:
    run = drive(events("tool_use_two_turns"), partial=True)
    types = [f["type"] for f in run.frames]
    assert "message" not in types
    deltas = [f["delta"] for f in run.frames if f["type"] == "text"]
    assert deltas == ["I'll ", "count the ", "files.", "There are ", "3 files."]
    assert run.results[0]["result"] == "There are 3 files."
    expected = (EXPECTED / "thinking.partial.enriched.jsonl").read_bytes()
    assert drive(events("thinking"), partial=True).output == expected


def test_results_only() -> None:
    run = drive(events("multi_input_frames"), results_only=True)
    assert [f["type"] for f in run.frames] == ["result", "result"]
    assert run.results == drive(events("multi_input_frames")).results


def test_tool_input_that_does_not_parse_is_kept_as_a_string() -> None:
    data = (
        line(type="TurnStart", turn_index=0, message_id="m", model="claude-sonnet-4-5")
        + line(type="ToolCallStart", turn_index=0, tool_use_id="t1", name="Bash")
        + line(type="ToolCallInputDelta", turn_index=0, tool_use_id="t1", partial_json='{"command": "ls')
        + line(type="ToolCallEnd", turn_index=0, tool_use_id="t1", is_error=True,
               content=[{"type": "text", "text": "denied"}], result_text="denied", truncated=False)
        + line(type="ToolCallStart", turn_index=0, tool_use_id="t2", name="Noop")
        + line(type="ToolCallEnd", turn_index=0, tool_use_id="t2", is_error=False,
               content=[], result_text="", truncated=False)
    )
    tools = [f for f in drive(data).frames if f["type"] == "tool_use"]
    assert tools[0]["input"] == '{"command": "ls'
    assert tools[1]["input"] == {}
    results = [f for f in drive(data).frames if f["type"] == "tool_result"]
    assert results[0]["is_error"] is True


def test_over_long_line_is_skipped_and_kept_for_rejects() -> None:
    long = b'{"type":"AssistantTextDelta","text":"' + b"y" * 5000 + b'"}'
    data = turn(0, "ok") + long + b"\n" + run_end(turns=1)
    chunks = [(data[i : i + 700], 0.0) for i in range(0, len(data), 700)]
    run = drive(chunks, max_line_bytes=1000)
    assert run.results[0]["result"] == "ok"
    assert run.rejects == long + b"\n"
    assert len(run.diagnostics) == 1
    assert run.diagnostics[0].startswith(f"translator: test:4: line longer than 1000 bytes ({len(long)} bytes)")


def test_on_invalid_fail_closes_the_open_frame() -> None:
    data = turn(0, "so far") + b"garbage\n" + turn(1, "never") + run_end(turns=2)
    run = drive(data, stop_on_invalid=True)
    assert run.core.stopped
    (result,) = run.results
    assert result["subtype"] == "error"
    assert result["error"].startswith("input rejected at line 4: invalid JSON (")
    assert result["last_assistant_text"] == "so far"


def test_every_emitted_line_is_json() -> None:
    import random

    from bench.gen import run_events  # the benchmark's generator: the full agent shape

    data = b"\n".join(e for r in range(3) for e in run_events(random.Random(r), r)) + b"\n"
    run = drive(data)
    assert len(run.results) == 3
    assert all(isinstance(f, dict) for f in frames_of(run.output))
    assert run.output == drive(data, strict=True).output
    assert run.diagnostics == []
