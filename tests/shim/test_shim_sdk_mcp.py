"""The app's own tools under the real Python Agent SDK (`create_sdk_mcp_server` + `@tool`):
caliban (the fake `caliban -p`, whose MCP client is tests/support/fake_caliban_mcp.py, written from
caliban's) starts the shim's relay for each SDK server, and every call reaches the app's
handler as Claude Code relays it (`mcp_message`; shared/reference/cc-2.1.333/sdk-mcp/py_*),
settled first by the session's policy (allowedTools, PreToolUse hooks, can_use_tool)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from claude_agent_sdk import (
    AssistantMessage,
    ClaudeAgentOptions,
    HookMatcher,
    PermissionResultAllow,
    PermissionResultDeny,
    ResultMessage,
    SystemMessage,
    ToolResultBlock,
    ToolUseBlock,
    UserMessage,
    create_sdk_mcp_server,
    tool,
)
from support_inprocess import in_process
from support_processes import fake_caliban

SHIM = str(Path(sys.executable).with_name("caliban-claude"))
ADD = {"tool": "mcp__calc__add", "input": {"a": 2, "b": 3}, "id": "toolu_add"}
# A stdio MCP server of the app's own (not in process): one tool, `echo`.
EXTERNAL = '''
import json, sys
for line in sys.stdin:
    msg = json.loads(line)
    if "id" not in msg:
        continue
    method = msg["method"]
    if method == "initialize":
        result = {"protocolVersion": msg["params"]["protocolVersion"], "capabilities": {"tools": {}},
                  "serverInfo": {"name": "ext", "version": "0.1"}}
    elif method == "tools/list":
        result = {"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]}
    else:
        result = {"content": [{"type": "text", "text": "echo " + json.dumps(msg["params"]["arguments"])}]}
    print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}), flush=True)
'''


class Calc:
    """The app's `add` tool and what its handler saw."""

    def __init__(self, mode: str = "ok") -> None:
        self.mode, self.calls = mode, []

        @tool("add", "Add two numbers", {"a": float, "b": float})
        async def add(args: dict[str, Any]) -> dict[str, Any]:
            self.calls.append(args)
            if self.mode == "throw":
                raise RuntimeError("add exploded")
            if self.mode == "is_error":
                return {"content": [{"type": "text", "text": "add refused: demo error"}], "is_error": True}
            return {"content": [{"type": "text", "text": str(int(args["a"] + args["b"]))}]}

        self.server = create_sdk_mcp_server(name="calc", version="1.0.0", tools=[add])


def options(tmp_path: Path, calls: list[dict[str, Any]], servers: dict[str, Any], **kw: Any) -> ClaudeAgentOptions:
    wrapper = fake_caliban(tmp_path)
    env = {"CALIBAN_BIN": str(wrapper), "CALIBAN_SESSIONS_DIR": str(tmp_path / "sessions"),
           "FAKE_CALIBAN_SCRIPTS": json.dumps([{"mcp_calls": calls, "text": "The sum is 5."}]),
           "FAKE_CALIBAN_LOG": str(tmp_path / "calls.jsonl")}  # fmt: skip
    return ClaudeAgentOptions(cli_path=SHIM, env=env, mcp_servers=servers, **kw)


async def run(opts: ClaudeAgentOptions, prompt: str = "add 2 and 3") -> tuple[list[Any], dict[str, Any], dict[str, Any]]:
    """One message: what the app received, and get_mcp_status() before and after it."""
    async with in_process(opts) as client:
        before = await client.get_mcp_status()
        await client.query(prompt)
        messages = [m async for m in client.receive_response()]
        after = await client.get_mcp_status()
    return messages, dict(before), dict(after)


def uses(messages: list[Any]) -> list[ToolUseBlock]:
    """The calls the app was shown, in order. A relayed call's id is the one its hooks,
    `can_use_tool` and handler were told: the relay's (caliban names a call only once it has
    returned, tools/uses.py), not the fake's script's."""
    return [b for m in messages if isinstance(m, AssistantMessage) for b in m.content if isinstance(b, ToolUseBlock)]


def results(messages: list[Any]) -> dict[str, ToolResultBlock]:
    return {b.tool_use_id: b for m in messages if isinstance(m, UserMessage) and isinstance(m.content, list)
            for b in m.content if isinstance(b, ToolResultBlock)}  # fmt: skip


async def test_an_sdk_tool_is_called_and_its_result_reaches_the_next_turn(tmp_path: Path) -> None:
    calc = Calc()
    opts = options(tmp_path, [ADD], {"calc": calc.server}, allowed_tools=["mcp__calc__add"])
    messages, before, after = await run(opts)
    assert calc.calls == [{"a": 2, "b": 3}]
    (add,) = uses(messages)
    block = results(messages)[add.id]  # Claude Code's shape for an MCP tool: the blocks, no is_error
    assert (block.content, block.is_error) == ([{"type": "text", "text": "5"}], None)
    (user,) = [m for m in messages if isinstance(m, UserMessage)]
    assert user.tool_use_result == [{"type": "text", "text": "5"}]
    init = next(m for m in messages if isinstance(m, SystemMessage) and m.subtype == "init")
    assert init.data["mcp_servers"] == [{"name": "calc", "status": "connected", "source": "sdk"}]
    assert "mcp__calc__add" in init.data["tools"]
    result = messages[-1]
    assert isinstance(result, ResultMessage) and (result.subtype, result.result) == ("success", "The sum is 5.")
    for status in (before, after):  # as the recording's: before the first turn and after the result
        assert status == {"mcpServers": [{"name": "calc", "status": "connected", "serverInfo": {"name": "calc", "version": "1.0.0"},
                                          "transport": "sdk", "scope": "dynamic", "source": "sdk",
                                          "tools": [{"name": "add", "annotations": {}}]}]}  # fmt: skip
    (logged,) = [json.loads(line) for line in (tmp_path / "calls.jsonl").read_text().splitlines()]
    run_argv, settings = logged["argv"], logged["settings"]  # (the settings read from their file: argfiles.py)
    allowed = [run_argv[n + 1] for n, arg in enumerate(run_argv) if arg == "--allow"]
    assert "mcp__calc__add" in allowed  # caliban calls the relay; the relay settles the call (as Claude Code would)
    assert not [rule for rule in allowed if "*" in rule]  # each tool by its name: no pattern another server matches
    assert settings["mcp_servers"]["calc"]["args"][:2] == ["-m", "translator.shim.tools.relay"]


@pytest.mark.parametrize(("mode", "text"), [("is_error", "add refused: demo error"), ("throw", "add exploded")])
async def test_an_is_error_result_and_a_thrown_handler_are_the_tools_error(tmp_path: Path, mode: str, text: str) -> None:
    calc = Calc(mode)
    messages, _, _ = await run(options(tmp_path, [ADD], {"calc": calc.server}, allowed_tools=["mcp__calc__add"]))
    block = results(messages)[uses(messages)[0].id]  # as Claude Code's: the text, is_error; "Error: <text>"
    assert (block.content, block.is_error) == (text, True)
    (user,) = [m for m in messages if isinstance(m, UserMessage)]
    assert user.tool_use_result == f"Error: {text}"
    assert isinstance(messages[-1], ResultMessage) and messages[-1].subtype == "success"  # the run goes on


async def test_two_sdk_servers_and_an_external_one_at_once(tmp_path: Path) -> None:
    calc = Calc()

    @tool("upper", "Upper-case a text", {"text": str})
    async def upper(args: dict[str, Any]) -> dict[str, Any]:
        return {"content": [{"type": "text", "text": args["text"].upper()}]}

    words = create_sdk_mcp_server(name="words", version="2.0.0", tools=[upper])
    script = tmp_path / "ext.py"
    script.write_text(EXTERNAL)
    servers = {"calc": calc.server, "words": words, "ext": {"type": "stdio", "command": sys.executable, "args": [str(script)]}}
    calls = [ADD, {"tool": "mcp__words__upper", "input": {"text": "hi"}, "id": "toolu_up"},
             {"tool": "mcp__ext__echo", "input": {"x": 1}, "id": "toolu_ext"}]  # fmt: skip
    opts = options(tmp_path, calls, servers, allowed_tools=["mcp__calc__add", "mcp__words", "mcp__ext__echo"])
    messages, before, _ = await run(opts)
    got = {use.name: results(messages)[use.id].content for use in uses(messages)}
    assert got == {"mcp__calc__add": [{"type": "text", "text": "5"}], "mcp__words__upper": [{"type": "text", "text": "HI"}],
                   "mcp__ext__echo": [{"type": "text", "text": 'echo {"x": 1}'}]}  # fmt: skip
    assert uses(messages)[2].id == "toolu_ext"  # (an external server's call is caliban's, named by its id)
    assert [s["name"] for s in before["mcpServers"]] == ["calc", "words"]


async def test_without_allowed_tools_or_a_callback_the_call_is_denied_unasked(tmp_path: Path) -> None:
    calc = Calc()
    messages, _, _ = await run(options(tmp_path, [ADD], {"calc": calc.server}))
    assert calc.calls == []  # the handler never ran
    block = results(messages)[uses(messages)[0].id]
    assert (block.content, block.is_error) == (
        "Claude requested permissions to use mcp__calc__add, but you haven't granted it yet.", True)


async def test_can_use_tool_is_asked_first_with_the_calls_id_and_a_deny_never_runs_the_handler(tmp_path: Path) -> None:
    calc, asked = Calc(), []

    async def can_use_tool(name: str, tool_input: dict[str, Any], context: Any) -> Any:
        asked.append((name, tool_input, context.tool_use_id))
        return PermissionResultDeny(message="not today") if len(asked) > 1 else PermissionResultAllow()

    calls = [ADD, {**ADD, "id": "toolu_add2", "input": {"a": 1, "b": 1}}]
    messages, _, _ = await run(options(tmp_path, calls, {"calc": calc.server}, can_use_tool=can_use_tool))
    first, second = uses(messages)  # asked with the ids the app is shown the calls by
    assert asked == [("mcp__calc__add", {"a": 2, "b": 3}, first.id), ("mcp__calc__add", {"a": 1, "b": 1}, second.id)]
    assert calc.calls == [{"a": 2, "b": 3}] and first.id != second.id
    got = results(messages)
    assert got[first.id].content == [{"type": "text", "text": "5"}]
    assert (got[second.id].content, got[second.id].is_error) == ("not today", True)  # the app's message


async def test_a_pretooluse_hook_settles_the_call_before_the_handler(tmp_path: Path) -> None:
    calc, seen = Calc(), []

    async def hook(hook_input: Any, tool_use_id: str | None, context: Any) -> dict[str, Any]:
        seen.append((hook_input["tool_name"], hook_input["tool_use_id"]))
        return {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
                                       "permissionDecisionReason": "hook says no"}}  # fmt: skip

    hooks = {"PreToolUse": [HookMatcher(matcher="mcp__calc__.*", hooks=[hook])]}
    opts = options(tmp_path, [ADD], {"calc": calc.server}, allowed_tools=["mcp__calc__add"], hooks=hooks)
    messages, _, _ = await run(opts)
    (add,) = uses(messages)
    assert seen == [("mcp__calc__add", add.id)] and calc.calls == []
    assert (results(messages)[add.id].content, results(messages)[add.id].is_error) == ("hook says no", True)


async def test_a_deferring_hook_stops_the_run_with_the_call_pending(tmp_path: Path) -> None:
    """On caliban -p too: the handler never runs, caliban's run is stopped (SIGINT: it keeps its
    session for a resume), and the result is Claude Code's `tool_deferred`, after the call."""
    calc = Calc()

    async def hook(hook_input: Any, tool_use_id: str | None, context: Any) -> dict[str, Any]:
        return {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "defer"}}

    hooks = {"PreToolUse": [HookMatcher(matcher="mcp__calc__.*", hooks=[hook])]}
    opts = options(tmp_path, [ADD], {"calc": calc.server}, allowed_tools=["mcp__calc__add"], hooks=hooks)
    messages, _, _ = await run(opts)
    assert calc.calls == [] and results(messages) == {}  # pending: no result
    (call,) = uses(messages)
    assert (call.name, call.input) == ("mcp__calc__add", {"a": 2, "b": 3})
    result = messages[-1]
    assert isinstance(result, ResultMessage) and (result.subtype, result.is_error, result.stop_reason) == (
        "success", False, "tool_deferred")  # fmt: skip
    assert result.deferred_tool_use is not None and result.deferred_tool_use.id == call.id


async def test_a_forced_drive_backend_says_the_sdk_servers_are_not_reached(tmp_path: Path) -> None:
    lines: list[str] = []
    opts = options(tmp_path, [], {"calc": Calc().server}, stderr=lines.append)
    opts.env["CALIBAN_CLAUDE_BACKEND"] = "drive"
    async with in_process(opts) as client:
        await client.get_mcp_status()
    assert any("CALIBAN_CLAUDE_BACKEND=drive: the app's SDK MCP servers (calc) are not reached" in line for line in lines)


async def test_with_sdk_servers_caliban_settles_its_own_tools_and_says_why(tmp_path: Path) -> None:
    """caliban -p (where SDK servers run) has no way to ask the app about its built-in tools: it
    runs no hooks of its settings (f33a2d0: `Settings::hook_config` builds no handlers) and ignores
    --permission-prompt-tool. What it asks about is denied by it, unasked, and that is said once."""
    calc, asked, lines = Calc(), [], []

    async def can_use_tool(name: str, tool_input: dict[str, Any], context: Any) -> Any:
        asked.append(name)
        return PermissionResultAllow()

    bash = {"tool": "Bash", "input": {"command": "ls"}, "id": "toolu_bash"}
    opts = options(tmp_path, [bash, ADD], {"calc": calc.server}, can_use_tool=can_use_tool, stderr=lines.append)
    messages, _, _ = await run(opts)
    assert asked == ["mcp__calc__add"] and calc.calls == [{"a": 2, "b": 3}]  # the app's tool: asked, run
    denied = results(messages)["toolu_bash"]
    assert denied.is_error is True and "'Bash' requires interactive approval (no TTY)" in str(denied.content)
    said = [line for line in lines if "caliban's own tools are settled by its rules" in line]
    assert len(said) == 1 and "runs no hooks of its settings and ignores --permission-prompt-tool" in said[0]


async def test_a_relayed_calls_hook_context_is_said_not_to_reach_the_model_and_why(tmp_path: Path) -> None:
    calc, lines = Calc(), []

    async def hook(hook_input: Any, tool_use_id: str | None, context: Any) -> dict[str, Any]:
        return {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow",
                                       "additionalContext": "CTX"}}  # fmt: skip

    hooks = {"PreToolUse": [HookMatcher(matcher="mcp__calc__.*", hooks=[hook])]}
    calls = [ADD, {**ADD, "id": "toolu_add2"}]
    opts = options(tmp_path, calls, {"calc": calc.server}, hooks=hooks, stderr=lines.append)
    messages, _, _ = await run(opts)
    assert calc.calls == [{"a": 2, "b": 3}] * 2 and "CTX" not in str(results(messages))
    said = [line for line in lines if "PreToolUse hook additionalContext" in line]
    assert len(said) == 1 and "caliban -p takes no input once it runs" in said[0] and "does not reach the model" in said[0]
