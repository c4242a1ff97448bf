"""The TS Agent SDK's `initialize` requests, as recorded (fixtures/cc-2.1.333/sdk-ts), read into
the shim's typed value and mapped onto caliban's command line; the answer's `*_applied` keys."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fake_caliban import check
from support_fixtures import FIXTURES

from translator.shim import configure
from translator.shim.flags import parse
from translator.shim.mapping import plan, run_argv
from translator.shim.place import Place
from translator.shim.protocol import frames
from translator.shim.protocol.initialize import HookMatcher, Initialize, read

WIRES = FIXTURES / "cc-2.1.333" / "sdk-ts"
HERE = Place({}, "/")  # a session with nothing set in its environment


def recorded(name: str) -> tuple[list[str], dict[str, Any]]:
    """The first CLI process of a scenario: its argv and its initialize request body."""
    events = [json.loads(line) for line in (WIRES / f"{name}.wire.jsonl").read_text().splitlines()]
    argv = next(e["data"] for e in events if e["dir"] == "argv")
    first = next(e["data"] for e in events if e["dir"] == "stdin")
    assert first["request"]["subtype"] == "initialize"
    return argv, first["request"]


def caliban_for(name: str) -> tuple[list[str], dict[str, bool], list[str]]:
    argv, request = recorded(name)
    p = plan(parse(argv), HERE)
    applied, warnings = configure.apply(p, read(request))
    caliban = run_argv("caliban", p, p.model, p.permission_mode, ["--session", "s"])
    check(caliban[1:])  # caliban would accept it
    return caliban, applied, p.warnings + warnings


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("CALIBAN_SESSIONS_DIR", str(tmp_path))
    monkeypatch.delenv("CALIBAN_CLAUDE_ARGS", raising=False)


def test_every_recorded_request_reads_without_problems() -> None:
    names = sorted(p.name.removesuffix(".wire.jsonl") for p in WIRES.glob("*.wire.jsonl"))
    assert len(names) == 19
    for name in names:
        init = read(recorded(name)[1])
        assert init.problems == () and init.other == (), name


def test_the_default_empty_system_prompt_is_no_system_prompt() -> None:
    argv, applied, warnings = caliban_for("one_shot_bash")
    assert read(recorded("one_shot_bash")[1]).system_prompt == ("",)
    assert "--no-system" in argv and applied == {} and warnings == []


def test_a_string_system_prompt_reaches_caliban() -> None:
    argv, _, warnings = caliban_for("system_prompt_string")
    assert argv[argv.index("--system") + 1] == "You are a pirate." and warnings == []


def test_preset_and_append_keep_calibans_prompt_and_say_where_the_append_goes() -> None:
    argv, request = recorded("system_prompt_preset_append")
    p = plan(parse(argv), HERE)
    _, warnings = configure.apply(p, read(request))
    assert read(request).system_prompt is None and p.system == [] and p.prefix == "Be terse."
    assert warnings == ["appendSystemPrompt: caliban has no appended system prompt; it goes before the first message"]


def test_mcp_servers_in_initialize_reach_the_overlay() -> None:
    argv, applied, warnings = caliban_for("mcp_stdio")
    overlay = json.loads(argv[argv.index("--settings") + 1])
    assert overlay == {
        "mcp_servers": {
            "ext": {"type": "stdio", "command": "/usr/bin/python3",
                    "args": ["tools/mcp_echo_server.py", "sdk-ts/mcp_stdio.mcp.jsonl"]},
        }
    }  # fmt: skip
    assert applied == {"mcp_servers_applied": True} and warnings == []
    assert argv[argv.index("--allow") + 1] == "mcp__ext__echo"


def test_settings_and_disallowed_tools_in_initialize_are_applied() -> None:
    argv, applied, warnings = caliban_for("settings_initialize")
    assert applied == {"settings_applied": True, "disallowed_tools_applied": True} and warnings == []
    assert json.loads(argv[argv.index("--settings") + 1]) == {"permissions": {"allow": ["Bash(touch d.txt)"]}}
    assert [argv[i + 1] for i, a in enumerate(argv) if a == "--deny"] == ["WebFetch", "WebSearch"]


def test_the_argv_delivery_gives_the_same_caliban_command_line() -> None:
    by_argv, _, _ = caliban_for("settings_argv")
    by_initialize, _, _ = caliban_for("settings_initialize")
    assert sorted(by_argv) == sorted(by_initialize)


def test_hooks_are_read_and_said_to_be_unbridged() -> None:
    init = read(recorded("hooks_pretooluse")[1])
    assert init.hooks == {"PreToolUse": (HookMatcher("Bash", ("hook_0",)),)}
    assert init.hooks_sent and not init.blocking_hooks
    _, applied, warnings = caliban_for("hooks_pretooluse")
    assert applied == {} and warnings == [configure.HOOKS]
    answer = frames.initialize("default", init.hooks_sent, {}, applied)
    assert answer["hooks_applied"] is False and answer["hook_on_failure_supported"] is False


def test_settings_caliban_cannot_take_are_not_confirmed() -> None:
    p = plan(parse([]), HERE)
    init = read({"subtype": "initialize", "settings": {"permissions": {"deny": ["Bash(rm:*)"], "defaultMode": "plan"},
                                                       "env": {"A": "1"}},
                 "managedSettings": {"permissions": {"deny": ["WebFetch"]}}})  # fmt: skip
    applied, warnings = configure.apply(p, init)
    assert applied == {"settings_applied": False, "managed_settings_applied": True}
    assert warnings == ["settings: env, permissions.defaultMode not supported by caliban; ignored"]
    assert p.overlay == {"permissions": {"deny": ["Bash(rm*)", "WebFetch"]}}


def test_what_cannot_reach_caliban_is_said_and_sdk_servers_are_kept_for_the_relay() -> None:
    p = plan(parse([]), HERE)
    manifest = {"initializeResult": {"serverInfo": {"name": "calc", "version": "1"}}, "toolsListResult": {"tools": []}}
    init = read({"subtype": "initialize", "agents": {"a": {"description": "d", "prompt": "p"}},
                 "sdkMcpServers": ["calc"], "mcpServers": {"in": {"type": "sdk", "name": "in"}},
                 "sdkMcpServerManifests": {"calc": manifest, "bad": 1},
                 "jsonSchema": {"type": "object"}, "title": "t"})  # fmt: skip
    assert init.sdk_mcp_manifests == {"calc": manifest}
    applied, warnings = configure.apply(p, init)
    assert applied == {"mcp_servers_applied": True} and p.json_schema == '{"type":"object"}'
    assert p.sdk_servers == ["in", "calc"] and "mcp_servers" not in p.overlay  # (the session adds their relays)
    assert warnings == [
        "SDK agents cannot be passed to caliban: its AgentTool has no named sub-agent types (the model writes each "
        "sub-agent's prompt and tools itself), and a sub-agent's turns are not reported; a ignored",
        "initialize: title not supported by caliban; ignored",
    ]


def test_malformed_fields_are_left_out_and_named() -> None:
    init = read({"subtype": "initialize", "systemPrompt": 3, "disallowedTools": "Bash", "settings": 1,
                 "hooks": {"Stop": [{"matcher": None}], "PreToolUse": [{"hookCallbackIds": ["h"], "onFailure": "block",
                                                                        "timeout": 5}]}})  # fmt: skip
    assert init == Initialize(
        hooks={"Stop": (), "PreToolUse": (HookMatcher(None, ("h",), 5.0, "block"),)},
        problems=(
            "systemPrompt: expected a string or a list of strings, ignored",
            "disallowedTools: expected a list of strings, ignored",
            "settings: expected an object or a string, ignored",
            "hooks.Stop: a matcher without hookCallbackIds",
        ),
    )
    assert init.blocking_hooks
