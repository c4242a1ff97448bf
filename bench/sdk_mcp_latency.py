"""The relay of the app's own tools, timed: one `tools/call` from (the fake) caliban's MCP client
to the app's in-process handler and back (the relay process, the shim's socket, the settling
policy, `mcp_message` over the SDK's stdin/stdout), over 100 calls; beside it the same calls to
a stdio MCP server of the app's own, which caliban reaches with no relay. The real
claude-agent-sdk drives `caliban-claude`, which runs tests/support/fake_caliban.py; the fake's
MCP client stamps each round trip (FAKE_CALIBAN_MCP_LOG). Target: a median of at most 20 ms for
the relayed call. Run: .venv/bin/python bench/sdk_mcp_latency.py
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from claude_agent_sdk import ClaudeAgentOptions, ClaudeSDKClient, create_sdk_mcp_server, tool

ROOT = Path(__file__).resolve().parent.parent
FAKE = ROOT / "tests" / "support" / "fake_caliban.py"
SHIM = str(Path(sys.executable).with_name("caliban-claude"))
CALLS = 100
TARGET_MS = 20.0
DIRECT = '''
import json, sys
for line in sys.stdin:
    msg = json.loads(line)
    if "id" not in msg:
        continue
    if msg["method"] == "initialize":
        result = {"protocolVersion": msg["params"]["protocolVersion"], "capabilities": {"tools": {}},
                  "serverInfo": {"name": "direct", "version": "1"}}
    elif msg["method"] == "tools/list":
        result = {"tools": [{"name": "add", "inputSchema": {"type": "object"}}]}
    else:
        args = msg["params"]["arguments"]
        result = {"content": [{"type": "text", "text": str(args["a"] + args["b"])}]}
    print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}), flush=True)
'''


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


@tool("add", "Add two numbers", {"a": float, "b": float})
async def add(args: dict[str, Any]) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": str(args["a"] + args["b"])}]}


async def measure(root: Path) -> dict[str, list[float]]:
    wrapper = root / "caliban"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE}" "$@"\n')
    wrapper.chmod(0o755)
    (root / "direct.py").write_text(DIRECT)
    calls = [{"tool": tool_name, "input": {"a": i, "b": 1}, "id": f"toolu_{tool_name[5:9]}_{i}"}
             for i in range(CALLS) for tool_name in ("mcp__calc__add", "mcp__direct__add")]  # fmt: skip
    log = root / "mcp.jsonl"
    env = {"CALIBAN_BIN": str(wrapper), "CALIBAN_SESSIONS_DIR": str(root / "sessions"), "FAKE_CALIBAN_MCP_LOG": str(log),
           "FAKE_CALIBAN_SCRIPTS": json.dumps([{"mcp_calls": calls, "text": "done"}])}  # fmt: skip
    servers: dict[str, Any] = {"calc": create_sdk_mcp_server(name="calc", version="1.0.0", tools=[add]),
                               "direct": {"type": "stdio", "command": sys.executable, "args": [str(root / "direct.py")]}}  # fmt: skip
    options = ClaudeAgentOptions(cli_path=SHIM, env=env, mcp_servers=servers, allowed_tools=["mcp__calc", "mcp__direct"])
    async with ClaudeSDKClient(options) as client:
        await client.query("add them")
        async for _ in client.receive_response():
            pass
    got: dict[str, list[float]] = {"mcp__calc__add": [], "mcp__direct__add": []}
    for line in log.read_text().splitlines():
        entry = json.loads(line)
        got[entry["tool"]].append(entry["ms"])
    return got


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        got = asyncio.run(measure(Path(tmp)))
    relayed, direct = got["mcp__calc__add"], got["mcp__direct__add"]
    for what, values in (("relayed (SDK server)", relayed), ("direct (stdio server)", direct)):
        print(f"{what}: {len(values)} calls, median {statistics.median(values):.2f} ms, "
              f"p99 {percentile(values, 99):.2f} ms, max {max(values):.2f} ms")  # fmt: skip
    median = statistics.median(relayed)
    print(f"target: relayed median <= {TARGET_MS} ms: {'met' if median <= TARGET_MS else 'NOT met'}")
    return 0 if median <= TARGET_MS else 1


if __name__ == "__main__":
    sys.exit(main())
