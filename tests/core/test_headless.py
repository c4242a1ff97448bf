"""The agent's headless stream-json as input: repaired and enriched, or translated."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from support_fixtures import (
    EXPECTED,
    FIXTURES,
    cc_frames,
    drive,
    drive_cc,
    kind,
    reported,
    results,
    run_end,
    translate_bytes,
    translate_cc,
)

HEADLESS = FIXTURES / "headless"
SAMPLES = FIXTURES / "samples"
NEW = ["tool_use_two_turns", "max_turns", "api_error", "thinking", "multi_input_frames",
       "tool_use_two_turns.partial", "thinking.partial"]
OLD = ["tool_use_two_turns", "max_turns", "thinking", "multi_input_frames", "tool_use_two_turns.partial"]
# One agent run each (multi_input_frames is one headless session over two raw runs).
ONE_RUN = [name for name in OLD if not name.startswith("multi_input_frames")]
# What a headless stream cannot carry: per-turn timing and the cache counters.
# The agent's cost counts cache tokens twice (see docs/output.md): its figure passes as it is.
UNKNOWABLE = {"duration_ms", "duration_api_ms", "duration_source", "usage", "total_cost_usd"}


def headless(name: str) -> bytes:
    return (HEADLESS / f"{name}.jsonl").read_bytes()


@pytest.mark.parametrize("name", NEW)
def test_a_new_build_passes_unchanged(name: str) -> None:
    run = drive(headless(name))
    assert run.output.splitlines()[:-1] == headless(name).splitlines()[:-1]  # byte for byte
    (ours,), (theirs,) = results(run.output), results(headless(name))
    assert {k: v for k, v in ours.items() if k not in ("duration_api_ms", "duration_source")} == theirs
    assert run.diagnostics == []


@pytest.mark.parametrize("name", ONE_RUN)
def test_an_old_build_is_repaired_like_the_raw_events(name: str) -> None:
    repaired = results(drive(headless(f"{name}.pre0049")).output)
    expected = results((EXPECTED / f"{name.split('.')[0]}.enriched.jsonl").read_bytes())
    assert len(repaired) == len(expected)
    for ours, theirs in zip(repaired, expected, strict=False):
        assert {k: v for k, v in ours.items() if k not in UNKNOWABLE} == {
            k: v for k, v in theirs.items() if k not in UNKNOWABLE
        }
        assert ours["usage"] == {"input_tokens": theirs["usage"]["input_tokens"],
                                 "output_tokens": theirs["usage"]["output_tokens"]}
        assert set(ours) == set(theirs)


def test_the_repair_fixes_the_adr_0049_bug() -> None:
    (before,) = results(headless("tool_use_two_turns.pre0049"))
    (after,) = results(drive(headless("tool_use_two_turns.pre0049")).output)
    assert before["result"] == "I'll count the files.There are 3 files."
    assert after["result"] == "There are 3 files."
    assert (after["num_turns"], after["is_error"]) == (2, False)
    # every frame but the result passes as it came
    assert drive(headless("tool_use_two_turns.pre0049")).output.splitlines()[:-1] == \
        headless("tool_use_two_turns.pre0049").splitlines()[:-1]


def test_partial_messages_reply_is_the_text_since_the_last_tool() -> None:
    (after,) = results(drive(headless("tool_use_two_turns.partial.pre0049")).output)
    assert after["result"] == "There are 3 files."


@pytest.mark.parametrize("name", [f"{n}.pre0049" for n in OLD] + NEW + ["multi_input_frames.replay"])
def test_the_repair_is_idempotent(name: str) -> None:
    once = drive(headless(name)).output
    assert drive(once).output == once


def test_non_success_gets_what_it_lacks() -> None:
    (result,) = results(drive(headless("max_turns.pre0049")).output)
    assert (result["last_assistant_text"], result["tool_calls_seen"]) == ("Let me check.", 1)
    assert result["is_error"] is True


def test_durations_follow_the_clock_of_the_headless_stream() -> None:
    lines = headless("tool_use_two_turns.pre0049").splitlines(keepends=True)
    chunks = [(ln, 10.0 + i) for i, ln in enumerate(lines)]
    (result,) = results(drive(chunks, clock="wall", started_at=10.0).output)
    assert result["duration_source"] == "wall"
    assert result["duration_ms"] == (len(lines) - 1) * 1000


# What the headless dialect does not carry, and so the Claude Code translation of it cannot.
HEADLESS_GAPS = {"total_cost_usd", "costUSD", "usage", "model_usage_since_last_result", "modelUsage", "id", "stop_reason",
                 "duration_ms", "duration_api_ms", "ttft_ms", "ttft_stream_ms", "first_content_frame_ms",
                 "uuid", "timestamp", "session_id", "thinking_duration_ms",
                 "signature",  # the agent's headless frames drop thinking signatures
                 # and what the raw events do not carry: the headless init's installation
                 "cwd", "original_cwd", "tools", "mcp_servers", "permissionMode"}


def strip(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: strip(v) for k, v in value.items() if k not in HEADLESS_GAPS}
    if isinstance(value, list):
        return [strip(v) for v in value]
    return value


@pytest.mark.parametrize("name", ["tool_use_two_turns", "max_turns", "api_error", "thinking"])
def test_claude_code_from_either_dialect_is_the_same(name: str) -> None:
    from_headless = cc_frames(headless(f"{name}.pre0049" if name != "api_error" else name))
    # Without partial messages the headless stream has no thinking deltas to estimate from.
    from_raw = [f for f in translate_cc(name) if kind(f) != "system/thinking_tokens"]
    assert [kind(f) for f in from_headless] == [kind(f) for f in from_raw]
    for ours, theirs in zip(from_headless, from_raw, strict=False):
        # the headless result's cost is the agent's own figure (cache counted twice): not compared
        assert strip(ours) == strip(theirs)


def test_claude_code_from_a_partial_headless_stream() -> None:
    frames = cc_frames(headless("tool_use_two_turns.partial"), partial=True)
    blocks = [f["message"]["content"][0] for f in frames if f["type"] == "assistant"]
    assert blocks == [
        {"type": "text", "text": "I'll count the files."},
        {"type": "tool_use", "id": "toolu_01Ab3CdE4fGh5iJk6LmN7oPq", "name": "Bash", "input": {"command": "ls | wc -l"}},
        {"type": "text", "text": "There are 3 files."},
    ]
    assert [f["event"]["type"] for f in frames if f["type"] == "stream_event"].count("message_start") == 2
    assert frames[-1]["result"] == "There are 3 files."


def test_echoed_prompts_delimit_input_frames() -> None:
    frames = cc_frames(headless("multi_input_frames.replay"))
    assert [kind(f) for f in frames] == [
        "system/init", "assistant", "result", "system/init", "warning", "assistant", "result"]
    first, second = [f for f in frames if f["type"] == "result"]
    assert (first["result"], first["num_turns"], first["result_index"]) == ("Hello! How can I help?", 1, 0)
    assert first["usage"]["input_tokens"] == 0 and first["total_cost_usd"] == 0  # not reported per frame
    assert (second["result"], second["num_turns"], second["result_index"]) == ("2 + 2 = 4.", 2, 1)
    assert second["total_cost_usd"] == 0.0233505  # the agent's figure for the session, reported once at the end
    assert second["usage"]["output_tokens"] == 19
    assert frames[0]["model"] == "claude-sonnet-4-5"


def test_retries_become_claude_code_api_retry_frames() -> None:
    # No current build prints system/api_retry (its builder is called only from a test since
    # 2026-05-24); older builds did, in the shape of that builder's output.
    data = (SAMPLES / "headless-serde-from-tests" / "events_rs_all_builders.ndjson").read_bytes()
    frames, diagnostics = drive_cc(data)
    assert diagnostics == []
    (retry,) = [f for f in frames if kind(f) == "system/api_retry"]
    assert {k: retry[k] for k in ("attempt", "max_retries", "retry_delay_ms", "error_status", "error")} == {
        "attempt": 2, "max_retries": 5, "retry_delay_ms": 1500, "error_status": 529, "error": "server_error"}


def test_bad_headless_frames_are_reported() -> None:
    data = b'{"type":"text","delta":5}\n{"type":"tool_use","id":"x"}\n' + headless("thinking")
    run = drive(data)
    assert [d.split(": ")[2] for d in run.diagnostics] == [
        "text has a malformed 'delta'", "tool_use without 'name'"]
    assert run.output == drive(headless("thinking")).output


def test_a_partial_stream_ending_on_a_tool_result_has_no_reply_and_no_false_errors() -> None:
    data = (b'{"type":"system","subtype":"init","session_id":"S","model":"anthropic/claude-sonnet-4-5"}\n'
            b'{"type":"text","delta":"Checking."}\n'
            b'{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"ls"}}\n'
            b'{"type":"tool_result","tool_use_id":"t1","is_error":false,"content":[{"type":"text","text":"a"}]}\n'
            b'{"type":"result","subtype":"success","result":"Checking.","session_id":"S","total_cost_usd":0.0,'
            b'"turns":1,"total_input_tokens":0,"total_output_tokens":0}\n')
    run = drive(data)
    assert run.diagnostics == []
    (result,) = results(run.output)
    assert result["result"] == "Checking."  # nothing since the tool: the upstream value stays


def test_the_agents_structured_output_reaches_the_claude_code_result() -> None:
    """`caliban --json-schema` puts its answer in the result's `structured_output`; Claude Code's
    result carries the same key, so the translation keeps it (and adds none where there is none)."""
    data = headless("tool_use_two_turns")
    plain = drive_cc(data)[0][-1]
    lines = data.splitlines()
    result = orjson.loads(lines[-1])
    result["structured_output"] = {"files": 3}
    frames, diagnostics = drive_cc(b"\n".join([*lines[:-1], orjson.dumps(result)]) + b"\n")
    assert diagnostics == []
    assert "structured_output" not in plain
    assert frames[-1]["type"] == "result" and frames[-1]["structured_output"] == {"files": 3}


# Every headless frame the agent prints, in the samples made with its own serde types, its
# docs' examples and the fixtures: the typed frames must read them all, also under --strict
# (no field of the agent's missing from the classes), with the default's output.
AGENT_FRAMES = sorted(p for d in ("samples/headless-serde-from-tests", "samples/headless-derived-from-code",
                                  "samples/headless-upstream-encoding-of-translator-fixtures",
                                  "samples/headless-verbatim-docs", "headless")
                      for p in (FIXTURES / d).glob("*.*json*"))


@pytest.mark.parametrize("path", AGENT_FRAMES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_frame_the_agent_prints_is_read_strictly(path: Any) -> None:
    data = path.read_bytes()
    default, strict = drive(data), drive(data, strict=True)
    assert default.rejects == strict.rejects == b"" and default.core.bad_lines == 0
    assert (strict.output, strict.diagnostics) == (default.output, default.diagnostics)
    frames = [ln for ln in data.splitlines() if not ln.startswith(b'{"type":"result"')]
    assert [ln for ln in default.output.splitlines() if not ln.startswith(b'{"type":"result"')] == frames


@pytest.mark.parametrize("fmt", ["enriched", "claude-code"])
@pytest.mark.parametrize("path", AGENT_FRAMES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_headless_input_never_warns_of_a_missing_rate(path: Any, fmt: str) -> None:
    """The dialect reports tokens and cost once, in the agent's result: no rate card prices a
    headless turn, so a model the card lacks (the samples' `mock`) costs nothing that counts."""
    run = translate_bytes(path.read_bytes(), fmt)
    assert [d for d in run.diagnostics if "no rate for model" in d] == []


@pytest.mark.parametrize("path", [p for p in AGENT_FRAMES if b'"type":"result"' in p.read_bytes()],
                         ids=lambda p: f"{p.parent.name}/{p.name}")
def test_claude_code_counts_the_agents_cost_of_a_headless_run_once(path: Any) -> None:
    """Claude Code's `total_cost_usd` is the session's so far: for headless input, the sum of the
    agent's own figures, nothing added for its turns (the card prices none of them)."""
    data = path.read_bytes()
    upstream = [r["total_cost_usd"] for r in results(data)]
    theirs = results(translate_bytes(data, "claude-code").output)
    closed = [r for r in theirs if r.get("model_usage_since_last_result") is not None]
    assert closed[-1]["total_cost_usd"] == pytest.approx(sum(upstream), abs=0)
    assert sum(u["costUSD"] for u in closed[-1]["modelUsage"].values()) == pytest.approx(sum(upstream))


def test_a_field_the_agent_does_not_write_is_ignored_by_default_and_rejected_under_strict() -> None:
    data = headless("tool_use_two_turns").replace(b'{"type":"tool_use",', b'{"type":"tool_use","extra":[1],', 1)
    default = drive(data)
    assert default.diagnostics == []
    assert b'"extra":[1]' in default.output  # passed through as it came
    strict = drive(data, strict=True)
    assert [d.split(": ")[2] for d in strict.diagnostics] == ["tool_use has an unknown field 'extra'"]


def test_a_frame_type_this_build_does_not_know_passes_through() -> None:
    data = headless("thinking").replace(b"\n", b'\n{"type":"novel_frame","x":1}\n', 1)
    for strict in (False, True):
        run = drive(data, strict=strict)
        assert run.diagnostics == []
        assert b'{"type":"novel_frame","x":1}\n' in run.output


@pytest.mark.parametrize(("change", "why"), [
    (b'"total_cost_usd":-1.0', "result has a malformed 'total_cost_usd' (a number, not negative), not -1.0"),
    (b'"turns":"2"', "result has a malformed 'turns' (a whole number 0 to 4294967295), not \"2\""),
    (b'"duration_ms":18446744073709551616', "result has a malformed 'duration_ms' (a whole number 0 to "
                                            "18446744073709551615)"),
    (b'"usage":{"input_tokens":-1,"output_tokens":0}',
     "result has a malformed 'usage' (input_tokens and output_tokens, whole numbers 0 to 4294967295)"),
    (b'"ts":1e20', "'ts' is out of range (Unix seconds, 1970 to 9999), not 1e+20"),
])
def test_a_result_out_of_the_agents_ranges_is_a_bad_line(change: bytes, why: str) -> None:
    bad = b'{"type":"result","subtype":"success",' + change + b"}\n"
    run = drive(bad + headless("thinking"))
    assert [d.split(": ")[2] for d in run.diagnostics] == [why]
    assert run.rejects == bad
    assert run.output == drive(headless("thinking")).output


def test_a_tool_result_as_plain_text_is_one_text_block() -> None:
    data = headless("tool_use_two_turns")
    blocks = b'"content":[{"text":"3","type":"text"}]'
    assert blocks in data
    plain = data.replace(blocks, b'"content":"3"')
    for partial in (False, True):
        ours, theirs = (translate_bytes(d, "claude-code", partial=partial) for d in (plain, data))
        assert (ours.output, ours.diagnostics) == (theirs.output, theirs.diagnostics)


@pytest.mark.parametrize("fmt", ["enriched", "claude-code"])
def test_an_init_inside_a_run_that_had_a_turn_closes_it_as_a_lost_result(fmt: str) -> None:
    """The headless dialect's lost RunEnd: a new init before the open run's result. The table's
    recovery closes that run as an error and says so at the init's line; the new run is whole."""
    first = headless("tool_use_two_turns").splitlines()
    cut = b"\n".join(line for line in first if b'"type":"result"' not in line) + b"\n"
    data = cut + headless("thinking")
    run = translate_bytes(data, fmt)
    assert [(line, what) for line, what in reported(run.diagnostics) if line] == [
        (cut.count(b"\n") + 1, "lost_run_end")]
    lost, whole = results(run.output)
    assert lost["subtype"] in ("error", "error_during_execution") and lost["is_error"] is True
    alone = results(translate_bytes(headless("thinking"), fmt).output)[0]
    assert (whole["subtype"], whole.get("result"), whole["num_turns"]) == (alone["subtype"], alone.get("result"), alone["num_turns"])


def test_an_integer_beyond_64_bits_in_a_message_frame_is_a_malformed_frame() -> None:
    data = headless("thinking").replace(b'{"text":"17 * 23 = 391.","type":"text"}',
                                        b'{"text":"17 * 23 = 391.","type":-18446744073709551615}', 1)
    assert data != headless("thinking")
    run = drive(data)
    assert [d.split(": ")[2] for d in run.diagnostics if "message" in d] == ["message has a malformed 'content'"]
    assert not [d for d in run.diagnostics if "internal error" in d]


@pytest.mark.parametrize("fmt", ["enriched", "claude-code"])
@pytest.mark.parametrize("extra", [b'"note":1e400', b'"structured_output":{"n":-1e400}'])
def test_a_result_the_repair_cannot_read_whole_is_a_bad_line(fmt: str, extra: bytes) -> None:
    """The typed decode keeps an unknown field and `structured_output` as bytes, where a number
    no double holds (JSON allows one) passes; the repair reads the whole frame, so the result is
    a bad line, as before typed frames, not an internal error."""
    start = b'{"type":"result","subtype":"success",'
    data = headless("thinking").replace(start, start + extra + b",", 1)
    assert data != headless("thinking")
    run = translate_bytes(data, fmt)
    said = [d.split(": ")[2] for d in run.diagnostics if d.startswith("translator: test:3:")]
    assert said == ["invalid JSON (number is infinity when parsed as double"]  # (cut off at the colon)
    assert not [d for d in run.diagnostics if "internal error" in d]
    assert run.rejects == data.splitlines(keepends=True)[2]
    assert len(run.results) == 1  # its run's, which it still closes
    error = run.results[0]["error"] if fmt == "enriched" else run.results[0]["errors"][0]
    assert error.startswith("its result was rejected at line 3: invalid JSON (number is infinity")


# A headless `error` result says its cause only in its message: the stops whose message the agent
# writes as a fixed text read back into that stop, the rest have no cause the dialect states.
SAMPLE_ERRORS = ["before_run_hook_denied", "refusal", "thinking_budget_exhausted"]


@pytest.mark.parametrize("name", SAMPLE_ERRORS)
def test_an_error_whose_message_names_its_stop_ends_as_the_raw_events_end(name: str) -> None:
    fields = ("subtype", "is_error", "terminal_reason", "errors", "num_turns")
    from_headless = cc_frames((SAMPLES / "headless-derived-from-code" / f"{name}.ndjson").read_bytes())[-1]
    from_raw = cc_frames((SAMPLES / "raw-derived-from-code" / f"{name}.ndjson").read_bytes())[-1]
    assert [from_headless.get(k) for k in fields] == [from_raw.get(k) for k in fields]
    assert from_headless["terminal_reason"] in ("hook_stopped", "model_error")


def agent_error(message: str | None) -> bytes:
    frame = orjson.loads((SAMPLES / "headless-serde-from-tests" / "preflight_error.ndjson").read_bytes())
    if message is None:
        del frame["error"]
    else:
        frame["error"] = message
    return orjson.dumps(frame) + b"\n"


@pytest.mark.parametrize(("message", "stopped_for"), [
    ("Model declined to respond.", {"Refusal": "Model declined to respond."}),
    ("Response blocked by content filter.", {"ContentFilter": "Response blocked by content filter."}),
    ("before_turn: hook failed: x", {"HookDenied": "before_turn: hook failed: x"}),
    ("after_turn: Stop", {"HookDenied": "after_turn: Stop"}),
    ("before_tool hook failed: x", {"HookDenied": "before_tool hook failed: x"}),
    ("thinking budget exhausted — the model kept reasoning without answering", "ThinkingBudgetExhausted"),
    ("stream idle for 90s", {"StreamIdle": {"secs": 90, "nanos": 0}}),  # not the provider's error
])
def test_each_stop_the_agent_names_in_its_message_is_the_raw_stop(message: str, stopped_for: Any) -> None:
    from_headless = cc_frames(agent_error(message))[-1]
    from_raw = cc_frames(run_end(stopped_for))[-1]
    fields = ("subtype", "terminal_reason", "errors")
    assert [from_headless.get(k) for k in fields] == [from_raw.get(k) for k in fields]
    assert from_headless["errors"] == [message]


@pytest.mark.parametrize(("path", "errors"), [
    (SAMPLES / "headless-serde-from-tests" / "result_non_success_error.ndjson",
     ["the agent's result states no cause for the error"]),
    (SAMPLES / "headless-serde-from-tests" / "preflight_error.ndjson", ["ANTHROPIC_API_KEY is not set"]),
], ids=["no-message", "preflight"])
def test_an_error_of_unstated_cause_claims_no_terminal_reason(path: Any, errors: list[str]) -> None:
    """Claude Code leaves `terminal_reason` out when its loop gave none; a cause the agent's
    result does not state is not called a model error (nor anything else)."""
    data = path.read_bytes()
    result = cc_frames(data)[-1]
    assert (result["subtype"], result["is_error"], result["errors"]) == ("error_during_execution", True, errors)
    assert "terminal_reason" not in result
    # the default format passes the agent's frame as it is, adding only the translator's timing
    (enriched,) = results(drive(data).output)
    assert {k: v for k, v in enriched.items() if k not in ("duration_api_ms", "duration_source")} == results(data)[0]


def test_a_stop_this_build_does_not_know_claims_no_terminal_reason_either() -> None:
    result = cc_frames(run_end({"SomethingNew": {"why": 1}}))[-1]
    assert (result["subtype"], result["errors"]) == ("error_during_execution", ['stopped for SomethingNew: {"why":1}'])
    assert "terminal_reason" not in result


def test_a_headless_run_no_call_answered_has_claude_codes_empty_model_usage() -> None:
    # An API error: the agent's result reports no tokens and no cost, and Claude Code's capture
    # has `modelUsage: {}`; a zero entry under the model "" is what no Claude Code prints.
    captured = orjson.loads((FIXTURES / "claude-code" / "api_error.stream.jsonl").read_bytes().splitlines()[-1])
    (result,) = [f for f in cc_frames(headless("api_error")) if f["type"] == "result"]
    assert result["modelUsage"] == result["model_usage_since_last_result"] == captured["modelUsage"] == {}
    # A run that used tokens keeps its entry.
    (used,) = [f for f in cc_frames(headless("tool_use_two_turns")) if f["type"] == "result"]
    assert list(used["modelUsage"]) == ["claude-sonnet-4-5"]


def test_the_claude_code_init_of_headless_input_says_what_the_agents_init_says() -> None:
    # What the agent's driver printed for the reference conversation: cwd, tools, MCP servers
    # and permission mode; Claude Code's init has them under its own keys (raw events: neutral).
    data = (SAMPLES / "headless-upstream-encoding-of-translator-fixtures" / "tool_use_two_turns.jsonl").read_bytes()
    agents = orjson.loads(data.splitlines()[0])
    init = cc_frames(data)[0]
    facts = ("cwd", "original_cwd", "tools", "mcp_servers", "permissionMode", "model")
    assert [init[k] for k in facts] == [agents["cwd"], agents["cwd"], agents["tools"], [], agents["permission_mode"],
                                        "claude-sonnet-4-5"] == ["/home/dev/project", "/home/dev/project", ["Bash"], [],
                                                                 "default", "claude-sonnet-4-5"]
    assert list(init) == list(translate_cc("tool_use_two_turns")[0])  # Claude Code's keys, in its order
    servers = agents | {"mcp_servers": ["github", {"name": "db", "status": "failed"}], "permission_mode": "plan"}
    again = cc_frames(orjson.dumps(servers) + b"\n" + b"\n".join(data.splitlines()[1:]) + b"\n")[0]
    assert (again["mcp_servers"], again["permissionMode"]) == (
        [{"name": "github", "status": "connected"}, {"name": "db", "status": "failed"}], "plan")
