"""The shim's side of the app's SDK MCP servers: the socket the relays (relay.py) connect to,
and what is done with each JSON-RPC message caliban sends one.

As Claude Code does: the handshake (`initialize`, `notifications/initialized`, `tools/list`) is
had with the app once per session (the TS SDK sends its answers in `initialize`, the
manifests; for the Python SDK the shim asks, before it answers `initialize`), and caliban's own
handshake on every run is answered from it; every other message is relayed to the app as
`control_request{subtype: "mcp_message", server_name, message}` and its `mcp_response` sent
back. A `tools/call` is first settled by the session's permission policy (PreToolUse hooks, the
mode and rules, `can_use_tool`); a denied call never reaches the app's handler.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import sys
import tempfile
import threading
import uuid
from collections.abc import Callable
from typing import Any

import orjson

from translator.shim.protocol.channel import Channel
from translator.shim.protocol.frames import CLI_VERSION
from translator.shim.tools.uses import ToolUses

Decide = Callable[[str, Any, str], tuple[bool, str]]  # (tool name, input, tool_use_id) → allow, reason
CLAIM_S = 2.0  # how long a call waits for caliban's `tool_use` line, to know its id
ANNOTATIONS = {"readOnlyHint": "readOnly", "destructiveHint": "destructive", "idempotentHint": "idempotent",
               "openWorldHint": "openWorld"}  # fmt: skip


def tool_name(server: str, tool: str) -> str:
    """caliban's name for a server's tool (caliban-mcp-client `full_tool_name`)."""
    return f"mcp__{server}__{''.join(c if c.isascii() and (c.isalnum() or c in '_-') else '_' for c in tool) or '_'}"


def _reply(mid: Any, result: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": mid, "result": result}


def _error(mid: Any, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": mid, "error": {"code": -32603, "message": message}}


class SdkServers:
    def __init__(self, names: list[str], manifests: dict[str, dict[str, Any]], app: Channel, decide: Decide,
                 uses: ToolUses, warn: Callable[[str], None]) -> None:  # fmt: skip
        self.names, self.manifests = list(names), dict(manifests)
        self.app, self.decide, self.uses, self.warn = app, decide, uses, warn
        self._dir = tempfile.mkdtemp(prefix="caliban-claude-")
        self.path = os.path.join(self._dir, "relay.sock")
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(self.path)
        self._listener.listen(16)
        threading.Thread(target=self._accept, name="mcp-relay", daemon=True).start()

    def add(self, names: list[str], manifests: dict[str, dict[str, Any]]) -> None:
        self.names += [n for n in names if n not in self.names]
        self.manifests.update(manifests)

    def settings(self) -> dict[str, Any]:
        """caliban's `mcp_servers` for them: one relay each (a stdio server caliban starts)."""
        command = [sys.executable, "-m", "translator.shim.tools.relay", self.path]
        return {name: {"type": "stdio", "command": command[0], "args": [*command[1:], name]} for name in self.names}

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._listener.close()
        shutil.rmtree(self._dir, ignore_errors=True)

    # ------------------------------------------------------------------ what the app is told

    def init_entries(self) -> list[dict[str, Any]]:
        """Their entries in the init frame's `mcp_servers`."""
        return [{"name": name, "status": "connected", "source": "sdk"} for name in self.names]

    def status(self) -> list[dict[str, Any]]:
        """Their entries in the `mcp_status` answer (`mcpServerStatus()`, `get_mcp_status()`)."""
        out = []
        for name in self.names:
            manifest = self.manifests.get(name) or {}
            init, listed = manifest.get("initializeResult") or {}, manifest.get("toolsListResult") or {}
            tools = [{"name": t.get("name"), "annotations": {ANNOTATIONS.get(k, k): v for k, v in
                                                               (t.get("annotations") or {}).items()}}
                     for t in listed.get("tools", []) if isinstance(t, dict)]  # fmt: skip
            entry = {"name": name, "status": "connected" if manifest else "pending", "serverInfo": init.get("serverInfo"),
                     "transport": "sdk", "scope": "dynamic", "source": "sdk", "tools": tools}  # fmt: skip
            out.append({k: v for k, v in entry.items() if v is not None})
        return out

    def unshaken(self) -> bool:
        return any(n not in self.manifests for n in self.names)

    def handshake(self, then: Callable[[], None]) -> None:
        """Claude Code's handshake with each server the app sent no manifest for (the Python
        SDK): `initialize`, `notifications/initialized`, `tools/list`, relayed; `then` after it.
        Not on the stdin reader's thread: the answers come that way."""
        try:
            self._handshake()
        finally:
            then()  # (the SDK waits for its initialize answer whatever happened)

    def _handshake(self) -> None:
        for name in [n for n in self.names if n not in self.manifests]:
            hello = {"method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                     "clientInfo": {"name": "claude-code", "title": "Claude Code", "version": CLI_VERSION}},
                     "jsonrpc": "2.0", "id": 0}  # fmt: skip
            init = self._relay(name, hello)
            self._relay(name, {"jsonrpc": "2.0", "method": "notifications/initialized"})
            listed = self._relay(name, {"method": "tools/list", "jsonrpc": "2.0", "id": 1})
            if init and "result" in init and listed and "result" in listed:
                self.manifests[name] = {"initializeResult": init["result"], "toolsListResult": listed["result"]}
            else:
                self.warn(f"SDK MCP server {name!r}: its handshake failed; caliban's is relayed as it comes")

    # ------------------------------------------------------------------ the relays

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), name="mcp-relay-conn", daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        lock, buffer, server = threading.Lock(), b"", None

        def send(message: dict[str, Any] | None) -> None:
            if message is not None:
                with lock, contextlib.suppress(OSError):
                    conn.sendall(orjson.dumps(message) + b"\n")

        with conn:
            while chunk := _recv(conn):
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    try:
                        msg = orjson.loads(line)
                    except orjson.JSONDecodeError:
                        continue
                    if not isinstance(msg, dict):
                        continue
                    if server is None:
                        server = str(msg.get("server", ""))
                    elif msg.get("method") == "tools/call":  # (its own thread: calls may run side by side)
                        threading.Thread(target=lambda m=msg, s=server: send(self.call(s, m)), daemon=True).start()
                    else:
                        send(self.handle(server, msg))

    def handle(self, server: str, msg: dict[str, Any]) -> dict[str, Any] | None:
        """The answer to one of caliban's messages (None: a notification)."""
        method, mid, manifest = msg.get("method"), msg.get("id"), self.manifests.get(server)
        if manifest is not None and method == "initialize":
            params = msg.get("params")
            asked = params.get("protocolVersion") if isinstance(params, dict) else None
            return _reply(mid, {**manifest["initializeResult"], **({"protocolVersion": asked} if asked else {})})
        if manifest is not None and method == "tools/list":
            return _reply(mid, manifest["toolsListResult"])
        if manifest is not None and isinstance(method, str) and method.startswith("notifications/"):
            return None
        answer = self._relay(server, msg)
        return None if mid is None else answer or _error(mid, "the app did not answer")

    def call(self, server: str, msg: dict[str, Any]) -> dict[str, Any] | None:
        """A `tools/call`: settled first (a denied call is the tool's error, its reason the text)."""
        params = msg.get("params") if isinstance(msg.get("params"), dict) else {}
        assert isinstance(params, dict)
        name, arguments = tool_name(server, str(params.get("name", ""))), params.get("arguments") or {}
        tid = self.uses.claim(name, arguments, CLAIM_S) or f"toolu_{uuid.uuid4().hex[:24]}"
        allow, reason = self.decide(name, arguments, tid)
        if not allow:
            return _reply(msg.get("id"), {"content": [{"type": "text", "text": reason}], "isError": True})
        meta = {**(params.get("_meta") or {}), "claudecode/toolUseId": tid, "progressToken": msg.get("id")}
        return self.handle(server, {**msg, "params": {**params, "_meta": meta}})

    def _relay(self, server: str, message: dict[str, Any]) -> dict[str, Any] | None:
        answer = self.app.ask({"subtype": "mcp_message", "server_name": server, "message": message})
        if answer is None:
            errors = self.app.errors
            return _error(message.get("id"), errors.pop() if errors else "cancelled") if "id" in message else None
        response = answer.get("mcp_response")
        return response if isinstance(response, dict) else None


def _recv(conn: socket.socket) -> bytes:
    try:
        return conn.recv(1 << 16)
    except OSError:
        return b""
