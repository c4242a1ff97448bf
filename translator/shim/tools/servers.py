"""The shim's side of the app's SDK MCP servers: the socket the relays (relay.py) connect to,
and what is done with each JSON-RPC message caliban sends one.

As Claude Code does: the handshake (`initialize`, `notifications/initialized`, `tools/list`) is
had with the app once per session (the TS SDK sends its answers in `initialize`, the
manifests; for the Python SDK the shim asks, before it answers `initialize`), and caliban's own
handshake on every run is answered from it; every other message is relayed to the app as
`control_request{subtype: "mcp_message", server_name, message}` and its `mcp_response` sent
back. A `tools/call` is first settled by the session's permission policy (PreToolUse hooks, the
mode and rules, `can_use_tool`); a denied call never reaches the app's handler. caliban gives up
on a call after its tool timeout, cancelling nothing: what of the call still waits for the app
then is cancelled (the channel's timeout), the call denied, and a late answer runs nothing.

One thread a relay (a server of a caliban run), none a call: each message is settled by
callbacks (the gate's decision, the channel's reply), and its answer queued on its relay
(`_Relay`), whose thread writes it between reads; so calls side by side cost no thread each,
and the app's reader, which settles them, never waits on a socket.
"""

from __future__ import annotations

import contextlib
import hmac
import os
import re
import secrets
import selectors
import shutil
import socket
import struct
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

import orjson

from translator.shim.permissions.gate import REJECTED, Decision, Then, ToolCall, within
from translator.shim.protocol import stdin
from translator.shim.protocol.channel import Channel, Reply, waited
from translator.shim.protocol.frames import CLI_VERSION
from translator.shim.tools.relay import TOKEN_ENV
from translator.shim.tools.uses import ToolUses

Decide = Callable[[ToolCall, Then], None]  # permissions/gate.py's `settle`, for a relayed call
Answer = Callable[[dict[str, Any] | None], None]  # where the answer to one of caliban's messages goes (None: none)
# caliban's clock for a call starts before its line crosses the relay: the shim's ends this much
# sooner, so that an answer on the edge is refused (fails closed), not run after caliban gave up.
EDGE_S = 0.1
RELAY_LINE = 64 << 20  # bytes of one of caliban's JSON-RPC lines to a relay (the app's stdin takes as many)
_ID = re.compile(rb'"id"\s*:\s*(-?\d{1,18}|"[^"\\]{0,200}")')
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
                 uses: ToolUses, warn: Callable[[str], None], *, tool_timeout: float) -> None:  # fmt: skip
        """`tool_timeout`: caliban's, in seconds (limits.caliban_tool_timeout)."""
        self.names, self.manifests = list(names), dict(manifests)
        self.tool_timeout = tool_timeout
        self.app, self.decide, self.uses, self.warn = app, decide, uses, warn
        self._dir = tempfile.mkdtemp(prefix="caliban-claude-")
        self.path = os.path.join(self._dir, "relay.sock")
        self._token = secrets.token_hex(16)
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(self.path)
        self._listener.listen(16)
        threading.Thread(target=self._accept, name="mcp-relay", daemon=True).start()

    def add(self, names: list[str], manifests: dict[str, dict[str, Any]]) -> None:
        self.names += [n for n in names if n not in self.names]
        self.manifests.update(manifests)

    def settings(self) -> dict[str, Any]:
        """caliban's `mcp_servers` for them: one relay each (a stdio server caliban starts,
        given the token it proves itself with in its environment: the settings are a private
        file, argfiles.py, and a command line is anyone's to read)."""
        command, env = [sys.executable, "-m", "translator.shim.tools.relay", self.path], {TOKEN_ENV: self._token}
        return {name: {"type": "stdio", "command": command[0], "args": [*command[1:], name], "env": env}
                for name in self.names}  # fmt: skip

    def claim(self, servers: dict[str, Any]) -> None:
        """Put the relays in caliban's `mcp_servers` (`servers`, changed): a server's name is its
        own, so an external server named as one of them, or whose tools' names could be theirs
        (`calc__x`'s `y` and `calc`'s `x__y` are both `mcp__calc__x__y`), is refused, said."""
        relays = self.settings()
        for name in [n for n in servers if servers[n] != relays.get(n)]:
            clash = next((s for s in self.names if name == s or name.startswith(f"{s}__") or s.startswith(f"{name}__")), None)
            if clash is not None:
                del servers[name]
                self.warn(f"MCP server {name!r}: refused, the app's SDK server {clash!r} has that name or its tools' "
                          "names (a server's name is its own)")  # fmt: skip
        servers.update(relays)

    def allows(self) -> list[str]:
        """caliban's `--allow` for each of their tools by its exact name (the relay settles each
        call): never a pattern, which another server's tools could match."""
        found: list[str] = []
        for name in self.names:
            listed = (self.manifests.get(name) or {}).get("toolsListResult") or {}
            tools = listed.get("tools") if isinstance(listed, dict) else None
            for tool in tools if isinstance(tools, list) else []:
                if isinstance(tool, dict) and isinstance(tool.get("name"), str):
                    found += ["--allow", tool_name(name, tool["name"])]
        return found

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
            init = self._asked(name, hello)
            self._asked(name, {"jsonrpc": "2.0", "method": "notifications/initialized"})
            listed = self._asked(name, {"method": "tools/list", "jsonrpc": "2.0", "id": 1})
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
        """One relay's connection: its hello (its server, and the token only caliban's relays
        were given), then caliban's JSON-RPC lines, each bounded (stdin.lines: never held past
        RELAY_LINE, read once)."""
        server = None
        with _Relay(conn) as relay:
            if not _same_user(conn):
                return
            for _, line in stdin.lines(relay.read, RELAY_LINE):
                if isinstance(line, stdin.TooLong):
                    if server is not None and (found := _ID.search(line.head)):
                        relay.send(_error(orjson.loads(found.group(1)), f"not relayed: {line.reason}"))
                    continue
                try:
                    msg = orjson.loads(line)
                except orjson.JSONDecodeError:
                    continue
                if not isinstance(msg, dict):
                    continue
                if server is None:
                    server = self._hello(msg)
                    if server is None:
                        return  # (not one of caliban's relays: never reaches the app)
                elif msg.get("method") == "tools/call":  # (settled in its own time: calls may run side by side)
                    self.call(server, msg, relay.send)
                else:
                    self.handle(server, msg, relay.send)

    def _hello(self, msg: dict[str, Any]) -> str | None:
        """The server a relay serves, once it has shown the token; None: a stranger."""
        token, server = msg.get("token"), msg.get("server")
        if not isinstance(token, str) or not hmac.compare_digest(token.encode(), self._token.encode()):
            self.warn("MCP relay socket: a connection without the relay's token refused")
            return None
        if server not in self.names:
            self.warn(f"MCP relay socket: a relay for the unknown server {server!r} refused")
            return None
        return str(server)

    def handle(self, server: str, msg: dict[str, Any], answer: Answer, due: float | None = None) -> None:
        """`answer(...)` one of caliban's messages (None: a notification), now or once the app has
        (by `due`, a call's: past it the app's request is cancelled and its answer dropped)."""
        method, mid, manifest = msg.get("method"), msg.get("id"), self.manifests.get(server)
        if manifest is not None and method == "initialize":
            params = msg.get("params")
            asked = params.get("protocolVersion") if isinstance(params, dict) else None
            answer(_reply(mid, {**manifest["initializeResult"], **({"protocolVersion": asked} if asked else {})}))
        elif manifest is not None and method == "tools/list":
            answer(_reply(mid, manifest["toolsListResult"]))
        elif not (manifest is not None and isinstance(method, str) and method.startswith("notifications/")):
            # (caliban waits for its own id: an answer under another, or none, would never end the call)
            self._relay(server, msg, lambda got: answer(None if mid is None else {**got, "id": mid} if got else
                                                        _error(mid, "the app did not answer")), due)  # fmt: skip

    def call(self, server: str, msg: dict[str, Any], answer: Answer) -> None:
        """A `tools/call`: settled first (a denied call is the tool's error, its reason the text)."""
        params = msg.get("params") if isinstance(msg.get("params"), dict) else {}
        assert isinstance(params, dict)
        name, arguments = tool_name(server, str(params.get("name", ""))), params.get("arguments") or {}
        tid = self.uses.relayed(name, arguments)  # (caliban names its call only once it has returned: uses.py)
        due = time.monotonic() + max(0.0, self.tool_timeout - EDGE_S)

        def settled(message: dict[str, Any] | None) -> None:
            if time.monotonic() < due:
                answer(message)
            else:  # (caliban has given up: it reports its own timeout; nothing of the call runs now)
                self.warn(f"{name}: past caliban's tool timeout ({self.tool_timeout:g} s; CALIBAN_MCP_TOOL_TIMEOUT, else "
                          "MCP_TOOL_TIMEOUT): what it asked of the app cancelled, nothing of it runs now")  # fmt: skip

        def decided(decision: Decision) -> None:  # (a run ended meanwhile: denied, by the gate)
            if decision.runs and time.monotonic() >= due:
                settled(None)
            elif decision.verdict == "interrupt":  # (Claude Code's words for a call the user stopped the run at)
                settled(_reply(msg.get("id"), {"content": [{"type": "text", "text": REJECTED}], "isError": True}))
            elif not decision.runs:
                settled(_reply(msg.get("id"), {"content": [{"type": "text", "text": decision.reason}], "isError": True}))
            else:
                meta = {**(params.get("_meta") or {}), "claudecode/toolUseId": tid, "progressToken": msg.get("id")}
                self.handle(server, {**msg, "params": {**params, "_meta": meta}}, settled, due)

        self.decide(ToolCall(name, arguments, tid, due), decided)

    def _relay(self, server: str, message: dict[str, Any], then: Answer, due: float | None = None) -> None:
        """`message` to the app's server (`mcp_message`): `then(its mcp_response)`. One that
        cannot come (the app closed its input, the run was cancelled) is an error, for a request."""

        def replied(reply: Reply) -> None:
            if reply.body is None:
                then(_error(message.get("id"), reply.error or "cancelled") if "id" in message else None)
            else:
                response = reply.body.get("mcp_response")
                then(response if isinstance(response, dict) else None)

        self.app.request({"subtype": "mcp_message", "server_name": server, "message": message}, replied, within(None, due))

    def _asked(self, server: str, message: dict[str, Any]) -> dict[str, Any] | None:
        """`_relay`'s answer, waited for on this thread (the handshake's)."""

        def start(then: Answer) -> None:
            self._relay(server, message, then)

        return waited(start)


class _Relay:
    """One relay's connection, on its own thread: `read` gives caliban's next bytes and, while
    it waits for them, writes the answers `send` queued (from whichever thread settled them)."""

    def __init__(self, conn: socket.socket) -> None:
        self.conn = conn
        self._wake, self._woken = socket.socketpair()
        for end in (conn, self._wake, self._woken):
            end.setblocking(False)
        self._out = bytearray()
        self._lock = threading.Lock()
        self._closed = False
        self._selector = selectors.DefaultSelector()
        self._selector.register(conn, selectors.EVENT_READ)
        self._selector.register(self._woken, selectors.EVENT_READ)

    def __enter__(self) -> _Relay:
        return self

    def __exit__(self, *exc: object) -> None:
        with self._lock:  # (a late answer finds it closed: dropped)
            self._closed = True
            self._selector.close()
            for end in (self.conn, self._wake, self._woken):
                end.close()

    def send(self, message: dict[str, Any] | None) -> None:
        if message is None:
            return
        try:
            data = orjson.dumps(message)
        except orjson.JSONEncodeError as exc:  # (nested past orjson's 254 levels): the call still ends
            data = orjson.dumps(_error(message.get("id"), f"the app's answer cannot be relayed: {exc}"))
        with self._lock:
            if self._closed:
                return
            self._out += data + b"\n"
            with contextlib.suppress(BlockingIOError):  # (a wake-up already pending)
                self._wake.send(b"!")

    def read(self) -> bytes:
        """caliban's next bytes; b"" once it (or the socket) is done."""
        while True:
            with self._lock:
                writing = bool(self._out)
            self._selector.modify(self.conn, selectors.EVENT_READ | (selectors.EVENT_WRITE if writing else 0))
            ready = {key.fileobj: events for key, events in self._selector.select()}
            if self._woken in ready:
                with contextlib.suppress(BlockingIOError):
                    self._woken.recv(1 << 10)
            events = ready.get(self.conn, 0)
            try:
                if events & selectors.EVENT_WRITE:
                    with self._lock:
                        del self._out[: self.conn.send(self._out)]
                if events & selectors.EVENT_READ:
                    return self.conn.recv(1 << 16)
            except BlockingIOError:
                continue
            except OSError:
                return b""


def _same_user(conn: socket.socket) -> bool:
    """The peer runs as this user (SO_PEERCRED; the socket's folder is 0700 too)."""
    try:
        creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except (OSError, AttributeError):  # (no SO_PEERCRED: not Linux; the token decides)
        return True
    uid: int = struct.unpack("3i", creds)[1]
    return uid == os.getuid()
