"""Claude Code's OpenTelemetry export from caliban's runs, against the real CLI 2.1.333's own
(fixtures/cc-2.1.333/otel/, the same conversation as fixtures/tool_use_two_turns.events.jsonl):
the command run as a process, exporting to a loopback OTLP/HTTP receiver that decodes both
protocols with opentelemetry-proto; every metric, event and span compared key by key with the
recording, and the figures (session id, model, tokens by type, cost) with the frames'."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import orjson
import pytest
from support_fixtures import FIXTURES
from support_otlp import Receiver, closed_port, receiver, recorded, telemetry_env, token_sums
from support_otlp_grpc import GrpcReceiver, grpc_receiver
from support_processes import TRANSLATOR, fixture

from translator.encoders.observed import session_id_of

FIXTURE = fixture("tool_use_two_turns")
SCOPES = {"com.anthropic.claude_code", "com.anthropic.claude_code.events", "com.anthropic.claude_code.tracing"}
# What Claude Code sends that caliban's events cannot supply (docs/observability.md says why).
EVENTS_NOT_MADE = {"claude_code.managed_settings_resolved", "claude_code.plugin_loaded"}
SPAN_KEYS_NOT_MADE = {"claude_code.tool": {"bash_command_class"}}
SID = "4f1c2d9e-0000-4000-8000-000000000001"


def translate(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([TRANSLATOR, *args], env=env, capture_output=True, timeout=60, stdin=subprocess.DEVNULL)


def frames(stdout: bytes) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in stdout.splitlines()]


def by_name(items: list[dict[str, Any]], key: str) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for item in items:
        out[item[key]].append(item)
    return out


def metric_shape(points: list[dict[str, Any]]) -> dict[str, Any]:
    """What a dashboard sees of a metric: its kind, unit, temporality, attribute keys, scope."""
    return {name: {(p["scope"], p["unit"], p["description"], p["kind"], p["temporality"], p["monotonic"],
                    tuple(sorted(p["attributes"]))) for p in ps} for name, ps in by_name(points, "name").items()}


@pytest.fixture(scope="module", params=["http/json", "http/protobuf", "grpc"])
def exported(request: pytest.FixtureRequest) -> tuple[Receiver, dict[str, Any], str]:
    """Claude Code's monitoring quick start as it is (grpc: OTLP/gRPC to a grpcio receiver)."""
    with (grpc_receiver() if request.param == "grpc" else receiver()) as (got, endpoint):
        done = translate(telemetry_env(endpoint, request.param), "--format", "claude-code", FIXTURE)
        assert done.returncode == 0, done.stderr
        assert done.stderr == b""
        assert got.wait(lambda r: len(r.spans) >= 6 and len(r.logs) >= 6)  # all was flushed at exit
    result = frames(done.stdout)[-1]
    assert result["type"] == "result"
    return got, result, request.param


def test_both_protocols_are_what_was_asked_for(exported: tuple[Receiver, dict[str, Any], str]) -> None:
    got, _, protocol = exported
    wanted = "application/json" if protocol == "http/json" else "application/x-protobuf"
    assert {path for path, _, _ in got.posts} == {"/v1/metrics", "/v1/logs", "/v1/traces"}
    assert {kind for _, kind, _ in got.posts} == {wanted}
    if isinstance(got, GrpcReceiver):  # the recorded service paths, whatever the endpoint's path
        assert {method for method, _, _ in got.calls} == {
            "/opentelemetry.proto.collector.metrics.v1.MetricsService/Export",
            "/opentelemetry.proto.collector.logs.v1.LogsService/Export",
            "/opentelemetry.proto.collector.trace.v1.TraceService/Export"}


def test_the_metrics_match_the_recording_key_by_key(exported: tuple[Receiver, dict[str, Any], str]) -> None:
    got, result, _ = exported
    cc = recorded("otel_one_shot_bash")["/v1/metrics"]
    assert metric_shape(got.metrics) == metric_shape(cc)  # names, units, DELTA sums, attribute keys
    assert {p["scope"][0] for p in got.metrics} == {"com.anthropic.claude_code"}
    assert {tuple(sorted(p["resource"])) for p in got.metrics} == {tuple(sorted(cc[0]["resource"]))}
    assert {p["resource"]["service.name"] for p in got.metrics} == {"claude-code"}
    # the figures: the frames' session, model and cost; the tokens as Claude Code counts them
    assert {p["attributes"]["session.id"] for p in got.metrics} == {result["session_id"]}
    assert {p["attributes"].get("model") for p in got.metrics} - {None} == {"claude-sonnet-4-5"}
    assert token_sums(got.metrics) == token_sums(cc) == {"input": 64, "output": 57, "cacheRead": 5144,
                                                         "cacheCreation": 1168}
    cost = sum(p["value"] for p in got.metrics if p["name"] == "claude_code.cost.usage")
    assert cost == pytest.approx(result["total_cost_usd"])
    assert sum(p["value"] for p in got.metrics if p["name"] == "claude_code.session.count") == 1
    start_types = {p["attributes"]["start_type"] for p in got.metrics if p["name"] == "claude_code.session.count"}
    assert start_types == {"fresh"}


def test_the_events_match_the_recording_key_by_key(exported: tuple[Receiver, dict[str, Any], str]) -> None:
    got, result, _ = exported
    cc = recorded("otel_one_shot_bash")["/v1/logs"]
    ours, theirs = by_name(got.logs, "body"), by_name(cc, "body")
    assert set(theirs) - set(ours) == EVENTS_NOT_MADE and set(ours) <= set(theirs)
    for body, records in ours.items():
        assert [sorted(r["attributes"]) for r in records] == [sorted(r["attributes"]) for r in theirs[body]], body
        assert {(r["scope"], r["severity"]) for r in records} == {(("com.anthropic.claude_code.events", "2.1.333"),
                                                                    (0, ""))}
    # numbered per session as they are written, in Claude Code's order and times, but for the prompt:
    # a raw log says it only at the run's end (the run's events are exported as they come), so it is
    # numbered last, stamped at the run's start, where Claude Code writes it
    written = sorted(got.logs, key=lambda r: r["attributes"]["event.sequence"])
    assert [r["attributes"]["event.sequence"] for r in written] == list(range(len(got.logs)))
    *answer, prompted = written
    assert prompted["body"] == "claude_code.user_prompt" and prompted["time"] == min(r["time"] for r in got.logs)
    assert [r["time"] for r in answer] == sorted(r["time"] for r in answer)
    cli = [r["body"] for r in cc if r["body"] not in EVENTS_NOT_MADE]
    assert cli[0] == "claude_code.user_prompt" and [r["body"] for r in answer] == cli[1:]
    prompt = ours["claude_code.user_prompt"][0]["attributes"]
    assert (prompt["prompt_length"], prompt["prompt"]) == ("24", "<REDACTED>")
    assert {r["attributes"]["session.id"] for r in got.logs} == {result["session_id"]}
    assert len({r["attributes"]["prompt.id"] for r in got.logs}) == 1
    # one api_request per turn with Claude Code's token counts, and the frames' cost
    tokens = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_creation_tokens")
    requests = [{k: r["attributes"][k] for k in tokens} for r in ours["claude_code.api_request"]]
    assert requests == [{k: r["attributes"][k] for k in tokens} for r in theirs["claude_code.api_request"]]
    costs = [r["attributes"]["cost_usd"] for r in ours["claude_code.api_request"]]
    assert sum(costs) == pytest.approx(result["total_cost_usd"])
    assert {r["attributes"]["model"] for r in ours["claude_code.api_request"]} == {"claude-sonnet-4-5"}
    same = ("tool_name", "tool_use_id", "success", "tool_input_size_bytes", "tool_result_size_bytes")
    assert [{k: r["attributes"][k] for k in same} for r in ours["claude_code.tool_result"]] == [
        {k: r["attributes"][k] for k in same} for r in theirs["claude_code.tool_result"]]
    same = ("decision", "source", "tool_name", "tool_use_id", "tool_source", "permission_mode")
    assert [{k: r["attributes"][k] for k in same} for r in ours["claude_code.tool_decision"]] == [
        {k: r["attributes"][k] for k in same} for r in theirs["claude_code.tool_decision"]]
    responses = [(r["attributes"]["response_length"], r["attributes"]["response"])
                 for r in ours["claude_code.assistant_response"]]
    assert responses == [(21, "<REDACTED>"), (18, "<REDACTED>")]


def test_the_spans_match_the_recording_key_by_key(exported: tuple[Receiver, dict[str, Any], str]) -> None:
    got, result, _ = exported
    cc = recorded("otel_traces_one_shot_bash")["/v1/traces"]

    def shape(spans: list[dict[str, Any]]) -> dict[str, Any]:
        names = {s["span"]: s["name"] for s in spans}
        return {name: sorted((s["scope"], s["kind"], s["status"], names.get(s["parent"], ""),
                              tuple(sorted(set(s["attributes"]) - SPAN_KEYS_NOT_MADE.get(name, set()))),
                              tuple(e[0] for e in s["events"])) for s in ss)
                for name, ss in by_name(spans, "name").items()}

    assert shape(got.spans) == shape(cc)
    assert len({s["trace"] for s in got.spans}) == 1  # one trace per interaction
    assert {s["attributes"]["gen_ai.conversation.id"] for s in got.spans} == {result["session_id"]}
    usage = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_creation_tokens", "gen_ai.usage.input_tokens",
             "gen_ai.usage.output_tokens", "gen_ai.usage.cache_read.input_tokens",
             "gen_ai.usage.cache_write.input_tokens", "stop_reason", "gen_ai.response.finish_reasons")
    llm = sorted((s for s in got.spans if s["name"] == "claude_code.llm_request"), key=lambda s: s["start"])
    cc_llm = sorted((s for s in cc if s["name"] == "claude_code.llm_request"), key=lambda s: s["start"])
    assert [{k: s["attributes"][k] for k in usage} for s in llm] == [{k: s["attributes"][k] for k in usage}
                                                                     for s in cc_llm]
    # the events carry the trace of their interaction, as Claude Code's do with traces on
    assert {r["trace"] for r in got.logs} == {llm[0]["trace"]}


def test_prompts_and_tool_details_only_when_asked() -> None:
    with receiver() as (got, endpoint):
        env = telemetry_env(endpoint, "http/json", OTEL_LOG_USER_PROMPTS="1", OTEL_LOG_TOOL_DETAILS="1")
        done = translate(env, FIXTURE)
        assert done.returncode == 0, done.stderr
    cc = by_name(recorded("otel_log_prompts")["/v1/logs"], "body")
    ours = by_name(got.logs, "body")
    for body in ("claude_code.tool_decision", "claude_code.tool_result", "claude_code.assistant_response",
                 "claude_code.user_prompt"):
        assert [sorted(r["attributes"]) for r in ours[body]] == [sorted(r["attributes"]) for r in cc[body]], body
    for key in ("tool_parameters", "tool_input"):
        assert ours["claude_code.tool_result"][0]["attributes"][key] == cc["claude_code.tool_result"][0]["attributes"][key]
    assert [r["attributes"]["response"] for r in ours["claude_code.assistant_response"]] == [
        r["attributes"]["response"] for r in cc["claude_code.assistant_response"]]
    assert ours["claude_code.user_prompt"][0]["attributes"]["prompt"] == "how many files are here?"


def test_off_by_default_nothing_is_imported_and_no_thread_starts() -> None:
    """Without the switch (and with it but nothing to export) the SDK is never imported and the
    process has one thread: the translation is the same as ever."""
    probe = ("import sys, threading\nfrom translator.cli.command import main\n"
             f"status = main(['--session-id', {SID!r}, {FIXTURE!r}])\n"
             "loaded = sorted(m for m in sys.modules if m.startswith(('opentelemetry', 'google.protobuf')))\n"
             "print(status, threading.active_count(), loaded, file=sys.stderr)\n")
    base = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "CLAUDE_CODE_"))}
    plain = translate(base, "--session-id", SID, FIXTURE).stdout
    for env in (base, base | {"DISABLE_TELEMETRY": "0"}, base | {"CLAUDE_CODE_ENABLE_TELEMETRY": "1"},
                base | {"OTEL_METRICS_EXPORTER": "otlp", "OTEL_LOGS_EXPORTER": "otlp"}):
        done = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, timeout=60)
        assert done.stderr.decode().strip() == "0 1 []"
        assert done.stdout == plain


def test_disable_telemetry_does_not_turn_it_off() -> None:
    with receiver() as (got, endpoint):
        done = translate(telemetry_env(endpoint, "http/json", DISABLE_TELEMETRY="1"), FIXTURE)
        assert done.returncode == 0
    assert got.metrics and got.logs


@pytest.mark.parametrize("protocol", ["http/json", "http/protobuf"])
def test_an_unreachable_collector_changes_nothing_and_costs_little_at_exit(protocol: str) -> None:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "CLAUDE_CODE_"))}
    plain = translate(base, "--format", "claude-code", "--session-id", SID,
                      FIXTURE)
    began = time.monotonic()
    done = translate(telemetry_env(f"http://127.0.0.1:{closed_port()}", protocol), "--format", "claude-code",
                     "--session-id", SID, FIXTURE)
    took = time.monotonic() - began
    assert done.returncode == plain.returncode == 0
    masked = [{k: v for k, v in f.items() if k not in ("uuid", "timestamp")} for f in frames(done.stdout)]
    assert masked == [{k: v for k, v in f.items() if k not in ("uuid", "timestamp")} for f in frames(plain.stdout)]
    assert took < 5 + 1.5  # the translation itself takes well under a second
    said = done.stderr.decode().splitlines()
    assert len(said) == 1 and said[0].startswith("translator: telemetry: not exported: "), said
    assert said[0].endswith(" (Connection refused)"), said  # whole: it was cut at 160 characters, mid-word


@pytest.mark.parametrize(("name", "status"), [("api_error", "500"), ("api_error_400", "400"),
                                              ("api_error_overloaded", "529")])
def test_a_provider_error_is_claude_code_s_api_error_event(name: str, status: str) -> None:
    """Claude Code's `claude_code.api_error` (error, status_code, duration_ms, attempt, model), its
    error the result frame's `API Error: …` text."""
    with receiver() as (got, endpoint):
        done = translate(telemetry_env(endpoint, "http/protobuf"), "--format", "claude-code", fixture(name))
        assert (done.returncode, done.stderr) == (0, b"")
    result = frames(done.stdout)[-1]
    errors = by_name(got.logs, "body")["claude_code.api_error"]
    assert len(errors) == 1
    attributes = errors[0]["attributes"]
    assert {k: attributes[k] for k in ("error", "status_code", "attempt")} == {
        "error": result["result"].removeprefix("API Error: "), "status_code": status, "attempt": 1}
    assert attributes["model"] and isinstance(attributes["duration_ms"], int)
    assert attributes["session.id"] == result["session_id"] and attributes["event.name"] == "api_error"


def test_one_story_per_log_headless_ones_included(tmp_path: Path) -> None:
    """A raw log and a headless one (its init's own id, its echoed prompts) in one command with
    --transcripts: each log's OTel session.id is its frames' and its session file's; event.sequence
    strictly increases per session as exported; each of the raw log's api_requests is timed, the turn
    that calls a tool too (the headless log's frames carry no times); its prompts are user_prompt events."""
    own = "3b8e1c52-8f0a-4d6b-9c1e-2a7f5d4e6b10"
    headless = tmp_path / "replay.jsonl"
    headless.write_bytes((FIXTURES / "headless" / "multi_input_frames.replay.jsonl").read_bytes().replace(
        b'"session_id":"SESSION"', b'"session_id":"%s"' % own.encode()))
    config = tmp_path / "claude"
    with receiver() as (got, endpoint):
        done = translate(telemetry_env(endpoint, "http/json"), "--format", "claude-code", "--transcripts", str(config),
                         FIXTURE, str(headless))
        assert done.returncode == 0, done.stderr
        assert got.wait(lambda r: len([x for x in r.logs if x["body"] == "claude_code.user_prompt"]) == 3)
    ids = {f["session_id"] for f in frames(done.stdout) if "session_id" in f}
    assert ids == {session_id_of(os.path.abspath(FIXTURE)), own}
    assert {p.stem for p in config.rglob("*.jsonl")} == ids
    assert {r["attributes"]["session.id"] for r in got.logs} == {p["attributes"]["session.id"] for p in got.metrics} == ids
    for session in ids:
        numbers = [r["attributes"]["event.sequence"] for r in got.logs if r["attributes"]["session.id"] == session]
        assert numbers == list(range(len(numbers)))  # as exported: never back
    requests = [r["attributes"] for r in got.logs if r["body"] == "claude_code.api_request"]
    assert len(requests) == 4 and all(r["duration_ms"] > 0 for r in requests if r["session.id"] != own)
    prompts = [r["attributes"] for r in got.logs if r["body"] == "claude_code.user_prompt"]
    assert sorted((p["session.id"] == own, p["prompt_length"]) for p in prompts) == [
        (False, "24"), (True, "12"), (True, "2")]
