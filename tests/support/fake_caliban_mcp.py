"""The MCP client of the fake `caliban -p` (tests/support/fake_caliban.py), written from caliban's
source (caliban-ai/caliban f33a2d0):

- the servers come from the settings' `mcp_servers` (`crates/caliban-settings/src/settings.rs`
  `McpServerSetting`: `type`/`transport`, `command`, `args`, `env`, `cwd`); a stdio server is
  spawned with stdin/stdout piped, its stderr drained (`crates/caliban-mcp-client/src/client.rs`
  `start_stdio`), and rmcp's client handshake is had: `initialize` (clientInfo `rmcp` 1.7.0),
  `notifications/initialized`, then `tools/list`;
- a tool is named `mcp__<server>__<tool>`, the tool's name with every character outside
  `[A-Za-z0-9_-]` made `_` (`tool.rs` `full_tool_name`); caliban lists every tool in its init;
- its permission: the rules, deny first, then allow; with none, the default `Ask`, which
  `caliban -p` turns into a deny (`permissions.rs` `NonInteractiveAskHandler`);
- a `tools/call` result: `isError: true` is a tool error whose text is the result's text blocks
  joined by newlines (`format_server_error`), a JSON-RPC error is `mcp server '<s>' rpc error:
  <message>`; an error becomes the tool_result `Error: execution failed: <text>`, is_error
  (`caliban-agent-core/src/stream/hook_dispatch.rs`, `ToolError::Execution`'s Display); a success
  is its content blocks, text as text (`translate_content`);
- a call is given up after the tool timeout (`manager.rs` `duration_from_env`: whole seconds of
  CALIBAN_MCP_TOOL_TIMEOUT, else of MCP_TOOL_TIMEOUT, a value Rust's u64 `parse` refuses
  skipped, else 60 s), no cancel sent: the tool error `mcp tool '<name>' timed out after <d>`,
  `<d>` the Duration's Debug (`1s`; `0ns`) (`tool.rs` `McpTool::invoke`), its late reply dropped.

Each call's round trip (the request written to the reply read) is logged, in ms, to
FAKE_CALIBAN_MCP_LOG when set: the relay's latency is measured there.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import subprocess
import threading
import time
from collections.abc import Mapping
from typing import Any

CLIENT_INFO = {"name": "rmcp", "version": "1.7.0"}
PROTOCOL = "2025-06-18"
DEFAULT_TOOL_TIMEOUT = 60


def tool_timeout(env: Mapping[str, str]) -> int:
    """caliban's per-call timeout in whole seconds, read from `env` as `duration_from_env` reads it."""
    for name in ("CALIBAN_MCP_TOOL_TIMEOUT", "MCP_TOOL_TIMEOUT"):
        given = env.get(name, "")
        if re.fullmatch(r"\+?[0-9]+", given) and int(given) < 1 << 64:
            return int(given)
    return DEFAULT_TOOL_TIMEOUT


def _debug(seconds: int) -> str:
    """A whole-seconds `Duration`'s Debug, as caliban's message writes it."""
    return f"{seconds}s" if seconds else "0ns"


def full_tool_name(server: str, tool: str) -> str:
    return f"mcp__{server}__{''.join(c if c.isascii() and (c.isalnum() or c in '_-') else '_' for c in tool) or '_'}"


class Server:
    def __init__(self, name: str, setting: dict[str, Any]) -> None:
        self.name = name
        env = {**os.environ, **{str(k): str(v) for k, v in (setting.get("env") or {}).items()}}
        self.proc = subprocess.Popen(
            [setting["command"], *setting.get("args", [])], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, env=env, cwd=setting.get("cwd"),
        )  # fmt: skip
        assert self.proc.stderr is not None
        threading.Thread(target=self.proc.stderr.read, daemon=True).start()
        self.next_id = 0
        self.tools: list[dict[str, Any]] = []
        self.replies: dict[Any, dict[str, Any]] = {}  # (calls side by side: one reader routes them by id)
        self._sending, self._arrived = threading.Lock(), threading.Condition()
        self._reader: threading.Thread | None = None
        self._ended = False

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        mid, self.next_id = self.next_id, self.next_id + 1
        self.send({"jsonrpc": "2.0", "id": mid, "method": method, **({"params": params} if params is not None else {})})
        assert self.proc.stdout is not None
        while line := self.proc.stdout.readline():
            reply = json.loads(line)
            if reply.get("id") == mid:
                return reply
        raise ConnectionError(f"mcp server '{self.name}' closed its stdout")

    def shared(self, method: str, params: dict[str, Any], timeout: float | None = None) -> dict[str, Any] | None:
        """A request among others in flight: sent at once, its reply picked by id from what one
        reader thread (started here: the handshake is over) reads; None past `timeout` seconds."""
        with self._sending:
            mid, self.next_id = self.next_id, self.next_id + 1
            self.send({"jsonrpc": "2.0", "id": mid, "method": method, "params": params})
            if self._reader is None:
                self._reader = threading.Thread(target=self._read, daemon=True)
                self._reader.start()
        due = None if timeout is None else time.monotonic() + min(timeout, threading.TIMEOUT_MAX)
        with self._arrived:
            while mid not in self.replies:
                if self._ended:
                    raise ConnectionError(f"mcp server '{self.name}' closed its stdout")
                left = None if due is None else due - time.monotonic()
                if left is not None and left <= 0:
                    return None  # (its reply, if it comes, is never picked)
                self._arrived.wait(left)
            return self.replies.pop(mid)

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            reply = json.loads(line)
            with self._arrived:
                self.replies[reply.get("id")] = reply
                self._arrived.notify_all()
        with self._arrived:
            self._ended = True
            self._arrived.notify_all()

    def handshake(self) -> None:
        self.request("initialize", {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": CLIENT_INFO})
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        self.tools = self.request("tools/list").get("result", {}).get("tools", [])

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def start(settings: dict[str, Any] | None) -> dict[str, Server]:
    """The stdio servers of a `--settings` overlay, started and shaken hands with."""
    configured = (settings or {}).get("mcp_servers") or {}
    servers = {}
    for name, setting in configured.items():
        if (setting.get("type") or setting.get("transport") or "stdio") == "stdio":
            servers[name] = Server(name, setting)
            servers[name].handshake()
    return servers


def tool_names(servers: dict[str, Server]) -> list[str]:
    return [full_tool_name(s.name, t["name"]) for s in servers.values() for t in s.tools]


def permitted(tool: str, allow: list[str], deny: list[str]) -> str | None:
    """None: the tool may run; else why not (caliban -p's deny of an Ask)."""
    if any(fnmatch.fnmatchcase(tool, rule) for rule in deny):
        return f"permission denied: '{tool}' is denied by a rule"
    if any(fnmatch.fnmatchcase(tool, rule) for rule in allow):
        return None
    return (f"permission denied: '{tool}' requires interactive approval (no TTY); re-run with "
            "`--allow '<Tool>'` to allow this tool, or `--auto-allow` to allow all Ask-rule tools (dangerous)")  # fmt: skip


def call(servers: dict[str, Server], tool: str, arguments: dict[str, Any]) -> tuple[bool, list[dict[str, Any]]]:
    """One tool call: (is_error, the tool_result's content), as caliban makes them (among calls
    side by side, or past one given up, each server's replies routed by id)."""
    for server in servers.values():
        for advertised in server.tools:
            if full_tool_name(server.name, advertised["name"]) == tool:
                started = time.perf_counter()
                params = {"name": advertised["name"], "arguments": arguments}
                limit = tool_timeout(os.environ)
                reply = server.shared("tools/call", params, limit)
                _log(tool, (time.perf_counter() - started) * 1000)
                if reply is None:
                    why = f"mcp tool '{tool}' timed out after {_debug(limit)}"
                    return True, [{"text": f"Error: execution failed: {why}", "type": "text"}]
                if "error" in reply:
                    why = f"mcp server '{server.name}' rpc error: {reply['error'].get('message')}"
                    return True, [{"text": f"Error: execution failed: {why}", "type": "text"}]
                result = reply.get("result", {})
                blocks = [b for b in result.get("content", []) if isinstance(b, dict)]
                if result.get("isError"):
                    text = "\n".join(b["text"] for b in blocks if b.get("type") == "text")
                    text = text or "tool reported an error (no text content)"
                    return True, [{"text": f"Error: execution failed: {text}", "type": "text"}]
                return False, [{"text": b["text"], "type": "text"} if b.get("type") == "text" else b for b in blocks]
    return True, [{"text": f"Error: unknown tool {tool}", "type": "text"}]


def call_all(servers: dict[str, Server], calls: list[tuple[str, dict[str, Any]]]) -> list[tuple[bool, list[dict[str, Any]]]]:
    """Several tool calls at once, as caliban runs a turn's calls side by side (its
    `--parallel-tool-limit`): each on a thread of its own; their results in order."""
    out: list[tuple[bool, list[dict[str, Any]]]] = [(True, [])] * len(calls)

    def one(n: int, tool: str, arguments: dict[str, Any]) -> None:
        out[n] = call(servers, tool, arguments)

    threads = [threading.Thread(target=one, args=(n, *c)) for n, c in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return out


def _log(tool: str, ms: float) -> None:
    path = os.environ.get("FAKE_CALIBAN_MCP_LOG")
    if path:
        with open(path, "a") as fh:
            fh.write(json.dumps({"tool": tool, "ms": ms}) + "\n")
