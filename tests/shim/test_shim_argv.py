"""The shim's flag mapping: SDK options → the SDK's own Claude Code argv
(`SubprocessCLITransport._build_command`) → the shim → caliban's argv, which must pass
caliban's strict flag table (the fake's `check`, clap's rules)."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from claude_agent_sdk import ClaudeAgentOptions
from claude_agent_sdk._internal.transport.subprocess_cli import SubprocessCLITransport
from fake_caliban import Usage, check

from translator.shim.flags import BOOL_FLAGS, CANONICAL, VALUE_FLAGS, parse
from translator.shim.mapping import CALIBAN_TOOLS, IGNORED, MAPPED, convert_rule, plan, run_argv, split_rules
from translator.shim.place import Place
from translator.shim.sessions import Session


@pytest.fixture(autouse=True)
def sessions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CALIBAN_SESSIONS_DIR", str(tmp_path))
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude"))  # (continue reads this folder's sessions)
    monkeypatch.delenv("CALIBAN_CLAUDE_MODELS", raising=False)
    monkeypatch.delenv("CALIBAN_CLAUDE_ARGS", raising=False)
    return tmp_path


def here() -> Place:
    """The session's place: this process's environment (as the fixtures set it) and folder."""
    return Place(os.environ, os.getcwd())


def sdk_argv(options: ClaudeAgentOptions) -> list[str]:
    return SubprocessCLITransport(prompt="x", options=replace(options, cli_path="caliban-claude"))._build_command()


def caliban_argv(options: ClaudeAgentOptions) -> tuple[list[str], list[str], Session]:
    """caliban's argv for the first run, the shim's warnings, and the session."""
    args = parse(sdk_argv(options)[1:])
    p = plan(args, here())
    session = Session(args, p.warnings, here())
    argv = run_argv("caliban", p, p.model, p.permission_mode, session.args())
    check(argv[1:])  # caliban would accept it
    return argv, p.warnings, session


def has(argv: list[str], *tokens: str) -> bool:
    """`tokens` appear in argv, consecutively."""
    n = len(tokens)
    return any(argv[i : i + n] == list(tokens) for i in range(len(argv) - n + 1))


OVERLAY_SETTINGS = json.dumps(
    {"permissions": {"allow": ["Glob"], "deny": ["Bash(rm:*)"]}, "hooks": {}, "model": "haiku"}
)
MCP = {
    "ext": {"type": "stdio", "command": "echo", "args": ["x"]},
    "web": {"type": "http", "url": "http://127.0.0.1:1/mcp", "headers": {"a": "b"}},
    "calc": {"type": "sdk", "name": "calc", "instance": object()},
}

CASES: list[tuple[str, dict[str, Any], list[tuple[str, ...]], list[str], list[str]]] = [
    # name, options, token runs expected in caliban's argv, flags that must be absent, warnings
    ("default", {}, [("-p", "-", "--output-format", "stream-json", "--no-system"), ("--permission-mode", "default")],
     ["--model", "--allow", "--settings"], []),
    ("system prompt", {"system_prompt": "Be terse."}, [("--system", "Be terse.")], ["--no-system"], []),
    ("custom prompt", {"system_prompt": {"type": "custom", "prompt": "Hi"}}, [("--system", "Hi")], ["--no-system"], []),
    ("prompt file", {"system_prompt": {"type": "file", "path": "/p.md"}}, [("--system-file", "/p.md")], ["--no-system"], []),
    ("preset + append", {"system_prompt": {"type": "preset", "preset": "claude_code", "append": "More."}}, [],
     ["--system", "--no-system"], ["--append-system-prompt"]),
    ("no tools", {"tools": []}, [("--no-tools",)], [], []),
    ("preset tools", {"tools": {"type": "preset", "preset": "claude_code"}}, [], ["--no-tools", "--deny"], []),
    ("allowed", {"allowed_tools": ["Bash(git status:*)", "Read"]},
     [("--allow", "Bash(git status*)", "--allow", "Read")], [], []),
    ("disallowed", {"disallowed_tools": ["WebFetch", "Task"]}, [("--deny", "WebFetch", "--deny", "AgentTool")], [], []),
    ("dontAsk", {"permission_mode": "dontAsk"}, [("--permission-mode", "default")], [], []),
    ("plan", {"permission_mode": "plan"}, [("--permission-mode", "plan")], [], []),
    ("bypass", {"permission_mode": "bypassPermissions"},
     [("--permission-mode", "bypassPermissions", "--allow-dangerously-skip-permissions")], [], []),
    ("limits", {"max_turns": 3, "max_budget_usd": 0.5}, [("--max-turns", "3"), ("--max-budget-usd", "0.5")], [], []),
    ("aliases", {"model": "opus", "fallback_model": "haiku"},
     [("--model", "claude-opus-4-1"), ("--fallback-model", "claude-haiku-4-5")], [], []),
    ("full name", {"model": "claude-sonnet-4-5"}, [("--model", "claude-sonnet-4-5")], [], []),
    ("default alias", {"model": "default"}, [], ["--model"], []),
    ("resume", {"resume": "a1111111-1111-4111-8111-111111111111"}, [("--resume", "a1111111-1111-4111-8111-111111111111")], ["--session"], []),
    ("session id", {"session_id": "51111111-1111-4111-8111-111111111111"}, [("--session", "51111111-1111-4111-8111-111111111111")], ["--resume"], []),
    ("schema", {"output_format": {"type": "json_schema", "schema": {"type": "object"}}},
     [("--json-schema", '{"type": "object"}')], [], []),
    ("partial + hooks", {"include_partial_messages": True, "include_hook_events": True},
     [("--include-partial-messages",), ("--include-hook-events",)], [], []),
    ("setting sources", {"setting_sources": ["user", "project"]}, [("--setting-sources", "user,project")], [], []),
    ("callbacks", {"permission_prompt_tool_name": "stdio"}, [], ["--permission-prompt-tool"], ["can_use_tool"]),
    ("unbridgeable", {"add_dirs": ["/srv"], "betas": ["b"], "effort": "high", "max_thinking_tokens": 2000,
                      "strict_mcp_config": True, "fork_session": False},
     [], ["--add-dir", "--effort"], ["--add-dir", "--betas", "--effort", "--max-thinking-tokens", "--strict-mcp-config"]),
    ("more unbridgeable", {"thinking": {"type": "adaptive"}, "task_budget": {"total": 5}, "resume_session_at": "m1",
                           "plugins": [{"type": "local", "path": "/plug"}]},
     [], ["--thinking", "--task-budget", "--plugin-dir"],
     ["--thinking", "--task-budget", "--resume-session-at", "--plugin-dir"]),
    ("extra args", {"extra_args": {"no-such-flag": None, "other": "v", "dashed": "-x"}}, [], ["--other", "--dashed"],
     ["'--no-such-flag'", "'--other v'", "'--dashed=-x'"]),
]  # fmt: skip


@pytest.mark.parametrize(("name", "options", "runs", "absent", "warnings"), CASES, ids=[c[0] for c in CASES])
def test_mapping(
    name: str, options: dict[str, Any], runs: list[tuple[str, ...]], absent: list[str], warnings: list[str]
) -> None:
    argv, warned, _ = caliban_argv(ClaudeAgentOptions(**options))
    for run in runs:
        assert has(argv, *run), (run, argv)
    for flag in absent:
        assert flag not in argv, (flag, argv)
    for text in warnings:
        assert any(text in w for w in warned), (text, warned)
    if not warnings:
        assert warned == []


def test_every_flag_the_shim_knows_is_mapped_or_warned() -> None:
    from translator.shim.restricting import REFUSED  # (the run refused: test_shim_flags)

    known = {CANONICAL.get(flag, flag) for flag in VALUE_FLAGS | BOOL_FLAGS}  # (one spelling each)
    assert known == MAPPED | set(IGNORED) | set(REFUSED) | {"--permission-prompt-tool"}
    for flag in [*IGNORED, "--permission-prompt-tool"]:
        given = [flag, "x"] if flag in VALUE_FLAGS else [flag]
        assert any(flag in w or "can_use_tool" in w for w in plan(parse(given), here()).warnings), flag


def test_dangerously_skip_permissions_is_the_bypass_mode() -> None:
    argv, _, _ = caliban_argv(ClaudeAgentOptions(extra_args={"dangerously-skip-permissions": None}))
    assert has(argv, "--permission-mode", "bypassPermissions", "--allow-dangerously-skip-permissions")


def test_tools_list_denies_every_other_caliban_tool() -> None:
    argv, _, _ = caliban_argv(ClaudeAgentOptions(tools=["Bash", "Read", "Task"]))
    denied = {argv[i + 1] for i, a in enumerate(argv) if a == "--deny"}
    assert denied == set(CALIBAN_TOOLS) - {"Bash", "Read", "AgentTool"}


def test_settings_and_mcp_servers_become_one_overlay() -> None:
    argv, warned, _ = caliban_argv(ClaudeAgentOptions(settings=OVERLAY_SETTINGS, mcp_servers=MCP))  # type: ignore[arg-type]
    overlay = json.loads(argv[argv.index("--settings") + 1])
    assert overlay == {
        "permissions": {"allow": ["Glob"], "deny": ["Bash(rm*)"]},
        "model": "claude-haiku-4-5",
        "mcp_servers": {
            "ext": {"type": "stdio", "command": "echo", "args": ["x"]},
            "web": {"type": "http", "url": "http://127.0.0.1:1/mcp", "headers": {"a": "b"}},
        },
    }
    assert any("hooks" in w for w in warned)
    assert parse(sdk_argv(ClaudeAgentOptions(mcp_servers=MCP))[1:]).lists["--mcp-config"]  # (calc: relayed by the session)
    assert plan(parse(sdk_argv(ClaudeAgentOptions(mcp_servers=MCP))[1:]), here()).sdk_servers == ["calc"]


def test_almost_every_option_at_once() -> None:
    options = ClaudeAgentOptions(
        system_prompt={"type": "preset", "preset": "claude_code", "append": "Be terse."}, tools=["Bash", "Read"],
        allowed_tools=["Bash(git status:*)", "Read"], max_turns=3, max_budget_usd=0.5, disallowed_tools=["WebFetch"],
        model="claude-sonnet-4-5", fallback_model="claude-haiku-4-5", permission_mode="acceptEdits",
        continue_conversation=True, resume="a1111111-1111-4111-8111-111111111111", settings='{"permissions":{"allow":["Glob"]}}',
        add_dirs=["/srv/extra"], mcp_servers={"ext": {"type": "stdio", "command": "echo", "args": ["x"]}},
        include_partial_messages=True, include_hook_events=True, strict_mcp_config=True, fork_session=True,
        setting_sources=["user", "project"], extra_args={"replay-user-messages": None, "debug-to-stderr": None},
        max_thinking_tokens=2000, effort="high", output_format={"type": "json_schema", "schema": {"type": "object"}},
    )  # fmt: skip
    argv, warned, session = caliban_argv(options)
    assert has(argv, "--resume", session.id) and session.id != "a1111111-1111-4111-8111-111111111111"  # a fork: a new name
    assert has(argv, "--permission-mode", "acceptEdits") and has(argv, "--max-turns", "3")
    assert any("--fork-session" in w for w in warned)  # abc-123 does not exist: nothing to copy


def test_fork_copies_the_session_under_a_new_name(sessions: Path) -> None:
    old = "01111111-1111-4111-8111-111111111111"
    (sessions / f"{old}.json").write_text(json.dumps({"name": old, "messages": ["a"]}))
    argv, warned, session = caliban_argv(ClaudeAgentOptions(resume=old, fork_session=True))
    assert warned == [] and has(argv, "--resume", session.id) and session.id != old
    assert json.loads((sessions / f"{session.id}.json").read_text()) == {"name": session.id, "messages": ["a"]}


def test_continue_picks_this_folders_newest_session(sessions: Path) -> None:
    import os

    from translator.transcripts.files import slug

    folder = sessions / "claude" / "projects" / slug(os.getcwd())
    folder.mkdir(parents=True)
    older, newest = "01111111-1111-4111-8111-111111111111", "02222222-2222-4222-8222-222222222222"
    for i, name in enumerate((older, newest, "not-an-id")):
        (folder / f"{name}.jsonl").write_text("{}")
        os.utime(folder / f"{name}.jsonl", (1000 + i, 1000 + i))
    (sessions / "03333333-3333-4333-8333-333333333333.json").write_text("{}")  # caliban's newest: no folder's
    argv, _, _ = caliban_argv(ClaudeAgentOptions(continue_conversation=True))
    assert has(argv, "--session", newest)


def test_continue_without_sessions_starts_a_new_one() -> None:
    argv, warned, session = caliban_argv(ClaudeAgentOptions(continue_conversation=True))
    assert has(argv, "--session", session.id) and any("--continue" in w for w in warned)


def test_operator_flags_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CALIBAN_CLAUDE_ARGS", "--provider openai --max-tokens 4096")
    argv, _, _ = caliban_argv(ClaudeAgentOptions())
    assert argv[-4:] == ["--provider", "openai", "--max-tokens", "4096"]


def test_a_command_line_prompt_is_warned_about() -> None:
    p = plan(parse(["-p", "hello", "--output-format", "stream-json", "--input-format", "stream-json"]), here())
    assert p.warnings == ["argument 'hello' ignored: prompts come on stdin, as stream-json"]


def test_model_aliases_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CALIBAN_CLAUDE_MODELS", '{"sonnet": "openai/gpt-5"}')
    argv, _, _ = caliban_argv(ClaudeAgentOptions(model="sonnet"))
    assert has(argv, "--model", "openai/gpt-5")


@pytest.mark.parametrize(
    ("csv", "rules"),
    [
        ("Bash(git status:*),Read", ["Bash(git status*)", "Read"]),
        ("Bash(a,b),Edit(src/**)", ["Bash(a,b)", "Edit(src/**)"]),
        ("Task, Agent", ["AgentTool", "AgentTool"]),
        ("mcp__calc,mcp__calc__add,mcp__calc__*", ["mcp__calc__*", "mcp__calc__add", "mcp__calc__*"]),  # a server: all its tools
    ],
)
def test_rules(csv: str, rules: list[str]) -> None:
    assert [convert_rule(r) for r in split_rules(csv)] == rules


@pytest.mark.parametrize(
    "argv",
    [
        ["-p", "-", "--no-such-flag"],
        ["-p", "-", "--model", "a", "--model", "b"],
        ["-p", "-", "--system", "x", "--no-system"],
        ["-p", "-", "--permission-mode", "dontask"],
        ["-p", "-", "--max-turns", "many"],
        ["-p", "-", "--include-partial-messages=yes"],
        ["-p", "-", "--model"],
    ],
)
def test_the_fake_rejects_what_clap_rejects(argv: list[str]) -> None:
    with pytest.raises(Usage):
        check(argv)
