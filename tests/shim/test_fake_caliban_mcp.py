"""The fake caliban's MCP client (tests/support/fake_caliban_mcp.py) held to caliban's source
(caliban-ai/caliban f33a2d0), so that what the relay tests see is what caliban would do: tool
names (`crates/caliban-mcp-client/src/tool.rs` `normalize_tool_name`, `full_tool_name` and its
tests), an `isError` result and a JSON-RPC error as the tool's error text (`format_server_error`,
`McpTool::invoke`, `ToolError::Execution`'s Display, `stream/hook_dispatch.rs`), the deny
of a tool no rule allows (`permissions.rs` `non_interactive_deny_message`), and a call's
`tool_use` line written only once the call has returned (`caliban/src/headless/encoder.rs`,
`StreamJsonEncoder::tool_call`: the deferred `tool_use` with its `tool_result`, at ToolCallEnd),
and a call given up after the tool timeout (`manager.rs` `duration_from_env`, `tool.rs`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import fake_caliban_mcp as mcp
import pytest
from support_processes import Frames, fake_caliban

SERVER = '''
import json, sys
for line in sys.stdin:
    msg = json.loads(line)
    if "id" not in msg:
        continue
    name = msg.get("params", {}).get("name")
    result = {"initialize": {"protocolVersion": "2025-06-18", "capabilities": {}, "serverInfo": {"name": "s", "version": "1"}},
              "tools/list": {"tools": [{"name": "ok"}, {"name": "bad"}, {"name": "mute"}, {"name": "rpc"}, {"name": "slow"}]}}.get(msg["method"])
    if name == "ok":
        result = {"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}
    elif name == "bad":
        result = {"content": [{"type": "text", "text": "x"}, {"type": "text", "text": "y"}], "isError": True}
    elif name == "mute":
        result = {"content": [], "isError": True}
    elif name == "slow":
        import time
        time.sleep(1.5)
        result = {"content": [{"type": "text", "text": "late"}]}
    reply = {"jsonrpc": "2.0", "id": msg["id"]}
    reply.update({"error": {"code": -32000, "message": "boom"}} if name == "rpc" else {"result": result})
    print(json.dumps(reply), flush=True)
'''


@pytest.mark.parametrize(("raw", "full"), [("read_file", "mcp__fs__read_file"), ("a.b/c d", "mcp__fs__a_b_c_d"),
                                           ("kebab-ok", "mcp__fs__kebab-ok"), ("", "mcp__fs___"), ("é", "mcp__fs___")])  # fmt: skip
def test_tool_names_are_caliban_s(raw: str, full: str) -> None:
    assert mcp.full_tool_name("fs", raw) == full


def test_results_and_errors_read_as_caliban_reads_them(tmp_path: Path) -> None:
    script = tmp_path / "server.py"
    script.write_text(SERVER)
    servers = {"s": mcp.Server("s", {"command": sys.executable, "args": [str(script)]})}
    servers["s"].handshake()
    try:
        assert mcp.tool_names(servers) == ["mcp__s__ok", "mcp__s__bad", "mcp__s__mute", "mcp__s__rpc", "mcp__s__slow"]
        assert mcp.call(servers, "mcp__s__ok", {}) == (False, [{"text": "a", "type": "text"}, {"text": "b", "type": "text"}])
        assert mcp.call(servers, "mcp__s__bad", {}) == (True, [{"text": "Error: execution failed: x\ny", "type": "text"}])
        assert mcp.call(servers, "mcp__s__mute", {}) == (
            True, [{"text": "Error: execution failed: tool reported an error (no text content)", "type": "text"}])
        assert mcp.call(servers, "mcp__s__rpc", {}) == (
            True, [{"text": "Error: execution failed: mcp server 's' rpc error: boom", "type": "text"}])
    finally:
        servers["s"].close()


# manager.rs `duration_from_env`: `s.parse::<u64>()` (ASCII digits, one leading `+`; no space, sign
# `-`, `_` or other digits), the primary name first, an unparsable one falling through.
@pytest.mark.parametrize(("env", "seconds"), [
    ({}, 60), ({"CALIBAN_MCP_TOOL_TIMEOUT": "5"}, 5), ({"MCP_TOOL_TIMEOUT": "7"}, 7),
    ({"CALIBAN_MCP_TOOL_TIMEOUT": "5", "MCP_TOOL_TIMEOUT": "7"}, 5), ({"CALIBAN_MCP_TOOL_TIMEOUT": "x", "MCP_TOOL_TIMEOUT": "7"}, 7),
    ({"CALIBAN_MCP_TOOL_TIMEOUT": "+3"}, 3), ({"CALIBAN_MCP_TOOL_TIMEOUT": "0"}, 0), ({"CALIBAN_MCP_TOOL_TIMEOUT": "-1"}, 60),
    ({"CALIBAN_MCP_TOOL_TIMEOUT": "1.5"}, 60), ({"CALIBAN_MCP_TOOL_TIMEOUT": " 5"}, 60), ({"CALIBAN_MCP_TOOL_TIMEOUT": "1_0"}, 60),
    ({"CALIBAN_MCP_TOOL_TIMEOUT": "\u0665"}, 60), ({"CALIBAN_MCP_TOOL_TIMEOUT": ""}, 60),
    ({"CALIBAN_MCP_TOOL_TIMEOUT": str(2**64 - 1)}, 2**64 - 1), ({"CALIBAN_MCP_TOOL_TIMEOUT": str(2**64)}, 60),
])  # fmt: skip
def test_the_tool_timeout_is_read_as_caliban_reads_it(env: dict[str, str], seconds: int) -> None:
    from translator.shim.limits import caliban_tool_timeout

    assert mcp.tool_timeout(env) == seconds
    assert caliban_tool_timeout(env) == float(seconds)  # (the shim's reading, which its relay keeps to)


def test_a_call_past_the_tool_timeout_fails_as_caliban_reports_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`tool.rs`: `mcp tool '{full_name}' timed out after {timeout:?}`, an execution error; the
    server's late reply does not confuse the next call."""
    script = tmp_path / "server.py"
    script.write_text(SERVER)
    servers = {"s": mcp.Server("s", {"command": sys.executable, "args": [str(script)]})}
    servers["s"].handshake()
    monkeypatch.setenv("CALIBAN_MCP_TOOL_TIMEOUT", "1")
    try:
        started = time.monotonic()
        assert mcp.call(servers, "mcp__s__slow", {}) == (
            True, [{"text": "Error: execution failed: mcp tool 'mcp__s__slow' timed out after 1s", "type": "text"}])
        assert 1 <= time.monotonic() - started < 1.8
        assert mcp.call(servers, "mcp__s__ok", {}) == (False, [{"text": "a", "type": "text"}, {"text": "b", "type": "text"}])
    finally:
        servers["s"].close()


def test_a_tool_no_rule_allows_is_denied_as_caliban_p_denies_an_ask() -> None:
    assert mcp.permitted("mcp__s__ok", ["mcp__s__*"], []) is None
    assert mcp.permitted("mcp__s__ok", ["mcp__s__*"], ["mcp__s__ok"]) is not None  # deny first
    assert mcp.permitted("mcp__s__ok", [], []) == (
        "permission denied: 'mcp__s__ok' requires interactive approval (no TTY); re-run with `--allow '<Tool>'` "
        "to allow this tool, or `--auto-allow` to allow all Ask-rule tools (dangerous)")


# A server whose one tool, `wait`, answers only once the file its argument names exists.
WAITING = """
import json, os, sys, time
for line in sys.stdin:
    msg = json.loads(line)
    if "id" not in msg:
        continue
    result = {"initialize": {"protocolVersion": "2025-06-18", "capabilities": {}, "serverInfo": {"name": "w", "version": "1"}},
              "tools/list": {"tools": [{"name": "wait"}]}}.get(msg["method"])
    if msg["method"] == "tools/call":
        while not os.path.exists(msg["params"]["arguments"]["until"]):
            time.sleep(0.02)
        result = {"content": [{"type": "text", "text": "done"}]}
    print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}), flush=True)
"""


def test_a_calls_tool_use_line_comes_once_the_call_has_returned(tmp_path: Path) -> None:
    (tmp_path / "waiting.py").write_text(WAITING)
    (tmp_path / "settings.json").write_text(json.dumps({"mcp_servers": {"w": {"command": sys.executable,
                                                                            "args": [str(tmp_path / "waiting.py")]}}}))
    go = tmp_path / "go"
    script = {"mcp_calls": [{"tool": "mcp__w__wait", "input": {"until": str(go)}, "id": "toolu_w"}], "text": "ok"}
    env = {**os.environ, "FAKE_CALIBAN_SCRIPTS": json.dumps([script])}
    proc = subprocess.Popen([str(fake_caliban(tmp_path)), "-p", "hi", "--output-format", "stream-json", "--settings",
                             str(tmp_path / "settings.json"), "--allow", "mcp__w__wait"], stdout=subprocess.PIPE,
                            env=env)  # fmt: skip
    try:
        assert proc.stdout is not None
        frames = Frames(proc.stdout.fileno())
        assert frames.until(lambda f: f.get("subtype") == "init", 10)
        time.sleep(0.5)  # the call is under way: nothing of it is written yet
        with pytest.raises(AssertionError, match="not within"):
            frames.until(lambda f: f["type"] == "tool_use", 0.3)
        go.touch()
        after = frames.until(lambda f: f["type"] == "result", 10)
        assert [f["type"] for f in after][:2] == ["tool_use", "tool_result"]
    finally:
        proc.kill()
        proc.wait()
