"""The fake caliban's MCP client (tests/support/fake_caliban_mcp.py) held to caliban's source
(caliban-ai/caliban f33a2d0), so that what the relay tests see is what caliban would do: tool
names (`crates/caliban-mcp-client/src/tool.rs` `normalize_tool_name`, `full_tool_name` and its
tests), an `isError` result and a JSON-RPC error as the tool's error text (`format_server_error`,
`McpTool::invoke`, `ToolError::Execution`'s Display, `stream/hook_dispatch.rs`), and the deny
of a tool no rule allows (`permissions.rs` `non_interactive_deny_message`)."""

from __future__ import annotations

import sys
from pathlib import Path

import fake_caliban_mcp as mcp
import pytest

SERVER = '''
import json, sys
for line in sys.stdin:
    msg = json.loads(line)
    if "id" not in msg:
        continue
    name = msg.get("params", {}).get("name")
    result = {"initialize": {"protocolVersion": "2025-06-18", "capabilities": {}, "serverInfo": {"name": "s", "version": "1"}},
              "tools/list": {"tools": [{"name": "ok"}, {"name": "bad"}, {"name": "mute"}, {"name": "rpc"}]}}.get(msg["method"])
    if name == "ok":
        result = {"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}
    elif name == "bad":
        result = {"content": [{"type": "text", "text": "x"}, {"type": "text", "text": "y"}], "isError": True}
    elif name == "mute":
        result = {"content": [], "isError": True}
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
        assert mcp.tool_names(servers) == ["mcp__s__ok", "mcp__s__bad", "mcp__s__mute", "mcp__s__rpc"]
        assert mcp.call(servers, "mcp__s__ok", {}) == (False, [{"text": "a", "type": "text"}, {"text": "b", "type": "text"}])
        assert mcp.call(servers, "mcp__s__bad", {}) == (True, [{"text": "Error: execution failed: x\ny", "type": "text"}])
        assert mcp.call(servers, "mcp__s__mute", {}) == (
            True, [{"text": "Error: execution failed: tool reported an error (no text content)", "type": "text"}])
        assert mcp.call(servers, "mcp__s__rpc", {}) == (
            True, [{"text": "Error: execution failed: mcp server 's' rpc error: boom", "type": "text"}])
    finally:
        servers["s"].close()


def test_a_tool_no_rule_allows_is_denied_as_caliban_p_denies_an_ask() -> None:
    assert mcp.permitted("mcp__s__ok", ["mcp__s__*"], []) is None
    assert mcp.permitted("mcp__s__ok", ["mcp__s__*"], ["mcp__s__ok"]) is not None  # deny first
    assert mcp.permitted("mcp__s__ok", [], []) == (
        "permission denied: 'mcp__s__ok' requires interactive approval (no TTY); re-run with `--allow '<Tool>'` "
        "to allow this tool, or `--auto-allow` to allow all Ask-rule tools (dangerous)")
