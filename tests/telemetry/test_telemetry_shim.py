"""Claude Code's telemetry from `caliban-claude`: an app on the real Python Agent SDK, and print
mode (`-p`), on a fake caliban playing the recorded conversation, exporting to a loopback OTLP
receiver; compared with the CLI 2.1.333's own export of that conversation under the TS SDK
(fixtures/cc-2.1.333/otel/otel_one_shot_bash): the same metrics, events and attribute keys, the
session the app saw, its cost and its tokens."""

from __future__ import annotations

import json
from pathlib import Path

from claude_agent_sdk import ClaudeAgentOptions, ClaudeSDKClient, ResultMessage, query
from support_fixtures import FIXTURES
from support_otlp import (
    HEADLESS,
    NOT_MADE,
    PROMPT,
    SHIM,
    by_name,
    caliban_env,
    print_run,
    receiver,
    recorded,
    same_keys_as_claude_code,
    telemetry_env,
    token_sums,
)


async def test_an_sdk_session_exports_as_claude_code_does(tmp_path: Path) -> None:
    with receiver() as (got, endpoint):
        env = caliban_env(tmp_path) | telemetry_env(endpoint, "http/json")
        (tmp_path / "work").mkdir()
        messages = [m async for m in query(prompt=PROMPT, options=ClaudeAgentOptions(
            cli_path=SHIM, env=env, cwd=str(tmp_path / "work")))]
        result = messages[-1]
        assert isinstance(result, ResultMessage) and result.result == "There are 3 files."
        assert got.wait(lambda r: bool(by_name(r.spans, "name").get("claude_code.interaction")))
        assert got.wait(lambda r: any(p["name"] == "claude_code.active_time.total" for p in r.metrics))
    same_keys_as_claude_code(got.logs, got.metrics)
    assert {r["attributes"]["session.id"] for r in got.logs} == {result.session_id}
    assert token_sums(got.metrics) == HEADLESS
    cost = sum(p["value"] for p in got.metrics if p["name"] == "claude_code.cost.usage")
    assert cost == result.total_cost_usd
    prompt = by_name(got.logs, "body")["claude_code.user_prompt"][0]["attributes"]
    assert (prompt["prompt_length"], prompt["event.sequence"]) == ("24", 0)  # the app's message, first
    assert [r["attributes"]["tool_name"] for r in by_name(got.logs, "body")["claude_code.tool_result"]] == ["Bash"]


def test_print_mode_exports_its_one_run(tmp_path: Path) -> None:
    with receiver() as (got, endpoint):
        print_run(tmp_path, got, telemetry_env(endpoint, "http/protobuf"))
    assert token_sums(got.metrics) == HEADLESS


async def test_a_resumed_session_counts_as_claude_code_s_resume(tmp_path: Path) -> None:
    """The second process of a session (`resume`) counts it again with start_type resume, under
    the same session id, as the CLI does (otel_resume)."""
    cc = [p["attributes"]["start_type"] for p in recorded("otel_resume")["/v1/metrics"]
          if p["name"] == "claude_code.session.count"]
    with receiver() as (got, endpoint):
        env = caliban_env(tmp_path) | telemetry_env(endpoint, "http/protobuf")
        (tmp_path / "work").mkdir()
        sessions = []
        for resume in (None, "first"):
            options = ClaudeAgentOptions(cli_path=SHIM, env=env, cwd=str(tmp_path / "work"),
                                         resume=sessions[0] if resume else None)
            result = [m async for m in query(prompt=PROMPT, options=options)][-1]
            assert isinstance(result, ResultMessage)
            sessions.append(result.session_id)
        assert got.wait(lambda r: len([p for p in r.metrics if p["name"] == "claude_code.session.count"]) == 2)
    counted = [(p["attributes"]["session.id"], p["attributes"]["start_type"]) for p in got.metrics
               if p["name"] == "claude_code.session.count"]
    assert sorted(counted, key=lambda c: c[1]) == [(sessions[0], "fresh"), (sessions[0], "resume")]
    assert sessions[1] == sessions[0] and sorted(cc) == ["fresh", "resume"]


async def test_two_messages_are_two_interactions_of_one_session(tmp_path: Path) -> None:
    """An app's two messages in one session, as the CLI exports them (otel_traces_stream_two_users):
    one session counted, a prompt, request and response per message, an interaction each."""
    cc = recorded("otel_traces_stream_two_users")
    with receiver() as (got, endpoint):
        env = caliban_env(tmp_path) | telemetry_env(endpoint, "http/json") | {
            "FAKE_CALIBAN_SCRIPTS": json.dumps([{"file": str(FIXTURES / "caliban" / "hi.jsonl")}])}
        (tmp_path / "work").mkdir()
        async with ClaudeSDKClient(ClaudeAgentOptions(cli_path=SHIM, env=env, cwd=str(tmp_path / "work"))) as client:
            for prompt in ("hi", "what is 2+2?"):
                await client.query(prompt)
                result = [m async for m in client.receive_response()][-1]
                assert isinstance(result, ResultMessage)
        assert got.wait(lambda r: len(by_name(r.spans, "name").get("claude_code.interaction", [])) == 2)
        assert got.wait(lambda r: any(p["name"] == "claude_code.active_time.total" for p in r.metrics))
    ours, theirs = by_name(got.logs, "body"), by_name(cc["/v1/logs"], "body")
    assert set(theirs) - set(ours) == NOT_MADE and set(ours) <= set(theirs)
    for body, records in ours.items():
        assert [sorted(r["attributes"]) for r in records] == [sorted(r["attributes"]) for r in theirs[body]], body
    order = [r["body"] for r in sorted(got.logs, key=lambda r: r["attributes"]["event.sequence"])]
    assert order == [r["body"] for r in cc["/v1/logs"] if r["body"] not in NOT_MADE]
    prompts = [r["attributes"] for r in ours["claude_code.user_prompt"]]
    assert [p["prompt_length"] for p in prompts] == ["2", "12"] and len({p["prompt.id"] for p in prompts}) == 2
    interactions = sorted(s["attributes"]["interaction.sequence"] for s in by_name(got.spans, "name")["claude_code.interaction"])
    assert interactions == sorted(s["attributes"]["interaction.sequence"]
                                  for s in by_name(cc["/v1/traces"], "name")["claude_code.interaction"]) == [1, 2]
    assert sum(p["value"] for p in got.metrics if p["name"] == "claude_code.session.count") == 1
    assert {r["attributes"]["session.id"] for r in got.logs} == {result.session_id}
