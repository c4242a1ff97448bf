"""A fake `caliban mcp serve` for the drive backend's tests, written from
shared/spec/caliban-drive-surface.md and caliban-ai/caliban f33a2d0 (`caliban/src/serve/mcp.rs`,
`serve/registry.rs`, `serve/permissions.rs`, `crates/caliban-drive/src/{session,status,error}.rs`):
rmcp 1.7's newline-delimited JSON-RPC 2.0 on stdio, the five tools with their argument rules
and error texts, one JSON text block per success body with its keys sorted (serde_json without
`preserve_order`), the `{v:1,event}` envelope, interactive runs (`awaiting_input` between
messages, one `RunEnd` after `end`), default permission rules (Read, Grep, Glob, TodoWrite and the
plan tools allowed; everything else asked), the prompt seen only in polls while the status stays
`running`, `Tool call denied: <reason>`, the 600 s deny, and a status that runs ahead of the
last events of a message (the drain rule).

tests/support/fake_caliban.py hands `caliban [GLOBAL FLAGS] mcp serve` here. Environment:
- FAKE_SERVE_SCRIPT: JSON (inline or a path): `{"messages": [{"turns": [TURN...]}...],
  "delay": s, "quiet_before_ask": s, "permit_timeout": s, "die_after_events": n}`; a TURN is
  `{"text": str?, "tools": [{"name", "input", "result"?, "is_error"?}]?, "usage": {...}?}`.
  Message i answers the i-th user message (the last one repeats). `{"servers": [SCRIPT...]}`:
  the n-th server started (counted in FAKE_SERVE_LOG) plays the n-th. A TOOL's `id` is the
  provider's tool_use_id: the same one in two turns is a provider reusing it.
- Hostile servers (issue 32), in the same script: `"deaf_after": n` — after its n-th JSON-RPC
  line it reads its stdin no more and answers nothing (alive, its pipe filling); `"flood_answers":
  n` — at `caliban_run`, n answers to ids never sent, first; `"next_cursor": value` — every poll
  answers that `next_cursor` instead of the buffer's length (registry.rs `poll`).
- FAKE_SERVE_LOG: a file; the server's start is appended (`{"pid", "argv", "cwd"}`), then each
  JSON-RPC line received (`{"in": msg, "t": time}`),
  and each permission prompt raised (`{"pending": id, "t"}`), first shown in a poll
  (`{"prompted": id, "t"}`) and answered (`{"permit": id, "allow", "t"}`).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any

PROTOCOL_LATEST = "2025-06-18"  # rmcp 1.7's newest; an older client version is echoed back
SERVER_INFO = {"name": "rmcp", "version": "1.7.0"}
INSTRUCTIONS = (
    "Drive a caliban agent over MCP. Start a run with caliban_run, then loop caliban_poll with an "
    "advancing cursor to read TurnEvent batches (each wrapped as {v, event}) until status is "
    "done/failed. Use caliban_send_input to feed an interactive run and caliban_permit to answer "
    "permission prompts surfaced by poll."
)
ALLOWED = {"Read", "Grep", "Glob", "TodoWrite", "EnterPlanMode", "ExitPlanMode"}  # default_rules(): the rest ask
DEFAULT_MODEL = "claude-sonnet-4-6"
ENDED = "drive session has ended; it accepts no further input"
NOT_INTERACTIVE = "drive session is not interactive; it accepts no input"


# (required, optional) fields with their JSON types, as the serde structs of mcp.rs declare them.
ARGS: dict[str, dict[str, tuple[str, bool]]] = {
    "caliban_run": {"prompt": ("string", True), "interactive": ("boolean", False)},
    "caliban_poll": {"run_id": ("string", True), "cursor": ("integer", False)},
    "caliban_status": {"run_id": ("string", True)},
    "caliban_send_input": {"run_id": ("string", True), "text": ("string", False), "end": ("boolean", False)},
    "caliban_permit": {"run_id": ("string", True), "tool_use_id": ("string", True), "allow": ("boolean", True),
                       "reason": ("string", False)},
}  # fmt: skip
DOCS = {
    "prompt": "The initial user prompt.",
    "interactive": "Pause awaiting further input at each turn boundary (default false).",
    "run_id": "The run to poll.",
    "cursor": "Number of events already consumed; events from here on are returned.",
    "text": "A follow-up user message to inject.",
    "end": "End the conversation instead of sending a message.",
    "tool_use_id": "The `tool_use_id` from the poll response's `permission_request`.",
    "allow": "Allow (true) or deny (false) the tool call.",
    "reason": "Optional denial reason.",
}
DESCRIPTIONS = {
    "caliban_run": "Start an agent run from a prompt; returns a run_id to poll.",
    "caliban_poll": "Fetch new events for a run from `cursor` onward, plus status and any pending permission prompt.",
    "caliban_status": "Read a run's current lifecycle status.",
    "caliban_send_input": "Send a follow-up message to an interactive run, or end its input.",
    "caliban_permit": "Answer a run's pending permission prompt (from caliban_poll).",
}
JSON_TYPES = {"string": str, "boolean": bool, "integer": int}


def _schema(key: str, kind: str, required: bool) -> dict[str, Any]:
    """One field as schemars 1.x writes it: an optional string may be null, defaults shown."""
    schema: dict[str, Any] = {"description": DOCS[key], "type": kind}
    if not required and kind == "string":
        schema["type"] = ["string", "null"]
    elif not required:
        schema["default"] = {"boolean": False, "integer": 0}[kind]
    if kind == "integer":
        schema.update(format="uint", minimum=0)
    return schema


def tools() -> list[dict[str, Any]]:
    """tools/list, sorted by name (rmcp's router), each with its argument struct's schema."""
    out = []
    for name in sorted(ARGS):
        fields = ARGS[name]
        schema = {"$schema": "https://json-schema.org/draft/2020-12/schema",
                  "properties": {k: _schema(k, kind, req) for k, (kind, req) in fields.items()},
                  "required": [k for k, (_, req) in fields.items() if req], "title": _title(name), "type": "object"}  # fmt: skip
        out.append({"description": DESCRIPTIONS[name], "inputSchema": schema, "name": name})
    return out


def _title(tool: str) -> str:
    return {"caliban_run": "RunArgs", "caliban_poll": "PollArgs", "caliban_status": "StatusArgs",
            "caliban_send_input": "SendInputArgs", "caliban_permit": "PermitArgs"}[tool]  # fmt: skip


def deserialize(tool: str, args: Any) -> str | None:
    """serde's complaint about `args`, or None when they fit the tool's struct."""
    if not isinstance(args, dict):
        return "invalid type: expected struct"
    for key, (kind, required) in ARGS[tool].items():
        if key not in args or (args[key] is None and not required):
            if required:
                return f"missing field `{key}`"
            continue
        value = args[key]
        if not isinstance(value, JSON_TYPES[kind]) or (kind == "integer" and (isinstance(value, bool) or value < 0)):
            return f"invalid type: {json.dumps(value)}, expected {'usize' if kind == 'integer' else 'a ' + kind}"
    return None


def dumps(value: Any) -> str:
    """serde_json::Value without preserve_order: keys sorted, compact."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


@dataclass
class Prompt:
    tool_use_id: str
    tool_name: str
    input: Any
    answered: threading.Event = field(default_factory=threading.Event)
    allow: bool = False
    reason: str = ""
    stale: bool = False  # timed out: denied, but still shown (the known bug)


class Run:
    """One drive session: its event buffer, status and pending prompt, and the thread playing it."""

    def __init__(self, server: Server, run_id: str, prompt: str, interactive: bool) -> None:
        self.server, self.id, self.interactive = server, run_id, interactive
        self.lock = threading.Lock()
        self.events: list[dict[str, Any]] = []
        self.status: dict[str, Any] = {"state": "starting"}
        self.pending: Prompt | None = None
        self.inbox: list[str | None] = [prompt]  # None: end of input
        self.wake = threading.Condition(self.lock)
        self.ended = False
        self.held: list[dict[str, Any]] = []  # emitted, not yet in the buffer
        threading.Thread(target=self.play, daemon=True).start()

    # --- the agent's side
    def push(self, event: dict[str, Any]) -> None:
        script = self.server.script
        time.sleep(script.get("delay", 0.002))
        with self.lock:
            self.events.append(event)
            self.server.sent += 1
            if self.server.sent == script.get("die_after_events"):
                os._exit(1)

    def set_status(self, state: str) -> None:
        with self.lock:
            self.status = {"state": state}

    def play(self) -> None:
        script = self.server.script
        messages = script.get("messages") or [{"turns": [{"text": "ok"}]}]
        self.set_status("running")
        n = turn_index = 0
        total = {"input_tokens": 0, "output_tokens": 0}
        history: list[dict[str, Any]] = []
        while True:
            with self.lock:
                while not self.inbox:
                    self.wake.wait()
                text = self.inbox.pop(0)
            if text is None:
                break
            self.set_status("running")
            history.append({"content": [{"text": text, "type": "text"}], "role": "user"})
            turns = messages[min(n, len(messages) - 1)]["turns"]
            n += 1
            for i, turn in enumerate(turns):
                last = i == len(turns) - 1
                end = self.turn(turn_index, turn, n, history)
                for k, v in end["usage"].items():
                    total[k] = total.get(k, 0) + v
                turn_index += 1
                if last and self.interactive:
                    self.settle("awaiting_input", end)
                else:
                    self.push(end)
            if not self.interactive:
                break
        self.settle("done", {"final_messages": history, "no_edit_nudge_emitted": False, "stopped_for": "EndOfTurn",
                             "total_usage": total, "turn_count": turn_index, "turns_without_edit": turn_index,
                             "type": "RunEnd"})  # fmt: skip

    def settle(self, state: str, last: dict[str, Any]) -> None:
        """The status changes ahead of the last event (caliban's drainer task lags the agent
        loop): the first poll to see the new status lacks it, the next one has it."""
        time.sleep(self.server.script.get("delay", 0.002))
        with self.lock:
            self.status = {"state": state}
            self.held.append(last)
            self.ended = state == "done"

    def turn(self, index: int, turn: dict[str, Any], n: int, history: list[dict[str, Any]]) -> dict[str, Any]:
        """A turn's events up to its ToolCallEnds; its TurnEnd is returned, not pushed."""
        model = self.server.model
        self.push({"message_id": f"msg_{n}_{index}", "model": model, "turn_index": index, "type": "TurnStart"})
        content: list[dict[str, Any]] = []
        if turn.get("text"):
            words = turn["text"].split(" ")
            for j, word in enumerate(words):
                chunk = word + (" " if j < len(words) - 1 else "")
                self.push({"content_block_index": 0, "text": chunk, "turn_index": index, "type": "AssistantTextDelta"})
            content.append({"text": turn["text"], "type": "text"})
        calls = []
        for k, tool in enumerate(turn.get("tools", [])):
            tid = tool.get("id") or f"toolu_{n}_{index}_{k}"
            calls.append((tid, tool))
            self.push({"name": tool["name"], "tool_use_id": tid, "turn_index": index, "type": "ToolCallStart"})
            self.push({"partial_json": dumps(tool.get("input", {})), "tool_use_id": tid, "turn_index": index,
                       "type": "ToolCallInputDelta"})  # fmt: skip
            content.append({"id": tid, "input": tool.get("input", {}), "name": tool["name"], "type": "tool_use"})
        results = []
        for tid, tool in calls:  # after the turn has streamed: prompts one at a time, then the tool runs
            allowed, reason = True, ""
            if tool["name"] not in ALLOWED:
                allowed, reason = self.ask(tid, tool["name"], tool.get("input", {}))
            text = tool.get("result", "done") if allowed else f"Tool call denied: {reason}"
            is_error = bool(tool.get("is_error")) if allowed else True
            block = [{"text": text, "type": "text"}]
            self.push({"content": block, "is_error": is_error, "result_text": text, "tool_use_id": tid,
                       "truncated": False, "turn_index": index, "type": "ToolCallEnd"})  # fmt: skip
            results.append({"content": block, "is_error": is_error, "tool_use_id": tid, "type": "tool_result"})
        message = {"content": content, "role": "assistant"}
        history.append(message)
        tool_results = [{"content": results, "role": "user"}] if results else []
        history += tool_results
        usage = turn.get("usage") or {"input_tokens": 100, "output_tokens": 10}
        return {"assistant_message": message, "stop_reason": "tool_use" if calls else "end_turn",
                "tbt": {"nanos": 15000000, "secs": 0}, "tool_results": tool_results,
                "ttft": {"nanos": 300000000, "secs": 0}, "turn_index": index, "type": "TurnEnd", "usage": usage}  # fmt: skip

    def ask(self, tid: str, name: str, tool_input: Any) -> tuple[bool, str]:
        prompt = Prompt(tid, name, tool_input)
        time.sleep(self.server.script.get("quiet_before_ask", 0))  # (the model still streaming other blocks)
        with self.lock:
            while self.pending is not None:  # a stale prompt hides this one until it is permitted
                self.wake.wait(0.05)
            self.pending = prompt
        self.server.log({"pending": tid, "t": time.time()})
        timeout = self.server.script.get("permit_timeout", 600)
        if not prompt.answered.wait(timeout):
            with self.lock:
                prompt.stale = True
            return False, f"permission denied for tool '{name}': drive client did not respond within {int(timeout)}s"
        return prompt.allow, prompt.reason

    # --- the client's side (under the server's dispatch)
    def poll(self, cursor: int) -> dict[str, Any]:
        with self.lock:
            events = [{"event": e, "v": 1} for e in self.events[cursor:]]
            pending = self.pending
            if pending is not None and not self.server.prompted.get(pending.tool_use_id):
                self.server.prompted[pending.tool_use_id] = True
                self.server.log({"prompted": pending.tool_use_id, "t": time.time()})
            self.events += self.held  # (after this answer: the drainer catches up)
            self.held.clear()
            return {
                "events": events,
                "next_cursor": cursor + len(events),
                "permission_request": None if pending is None else
                {"input": pending.input, "tool_name": pending.tool_name, "tool_use_id": pending.tool_use_id},
                "status": dict(self.status),
            }  # fmt: skip

    def permit(self, tid: str, allow: bool, reason: str | None) -> str | None:
        with self.lock:
            pending = self.pending
            if pending is None:
                return "no pending permission request for this run"
            if pending.tool_use_id != tid:
                return f"no pending permission with tool_use_id {tid}; current prompt is {pending.tool_use_id}"
            self.pending = None
            self.wake.notify_all()
            if pending.stale:
                return "run is no longer waiting on that prompt"
            pending.allow, pending.reason = allow, reason if reason is not None else "denied by client"
            pending.answered.set()
        self.server.log({"permit": tid, "allow": allow, "t": time.time()})
        return None

    def send(self, text: str | None, end: bool) -> str | None:
        with self.lock:
            if not self.interactive:
                return f"cannot send input: {NOT_INTERACTIVE}"
            if self.ended or None in self.inbox:
                return f"cannot send input: {ENDED}"
            self.inbox.append(None if end else text)
            self.wake.notify_all()
        return None


class Server:
    def __init__(self, model: str | None, script: dict[str, Any]) -> None:
        self.model = model or DEFAULT_MODEL
        self.script = script
        self.runs: dict[str, Run] = {}
        self.sent = 0
        self.prompted: dict[str, bool] = {}
        self.initialized = False
        self._out = threading.Lock()
        self._log = os.environ.get("FAKE_SERVE_LOG")

    def log(self, entry: dict[str, Any]) -> None:
        if self._log:
            with self._out, open(self._log, "a") as fh:
                fh.write(json.dumps(entry) + "\n")

    def write(self, message: dict[str, Any]) -> None:
        with self._out:
            os.write(1, (json.dumps(message, separators=(",", ":")) + "\n").encode())

    def serve(self) -> int:
        read = 0
        while True:
            if read == self.script.get("deaf_after"):  # (hostile: alive, reading nothing more)
                self.log({"deaf": read, "t": time.time()})
                time.sleep(3600)
            raw = sys.stdin.buffer.readline()
            if not raw:
                break  # the client closed our stdin: exit 0
            read += 1
            if not raw.strip():
                continue
            try:
                msg = json.loads(raw)
            except ValueError as exc:
                self.write({"error": {"code": -32700, "message": f"Parse error: {exc}"}, "jsonrpc": "2.0", "id": None})
                continue
            self.log({"in": msg, "t": time.time()})
            status = self.handle(msg)
            if status is not None:
                return status
        return 0

    def handle(self, msg: dict[str, Any]) -> int | None:
        method, rid = msg.get("method"), msg.get("id")
        if not self.initialized and method not in ("initialize", "ping"):
            sys.stderr.write("Error: expect initialize request\n")
            return 1  # rmcp: the service ends before it was initialized
        if method == "initialize":
            asked = str((msg.get("params") or {}).get("protocolVersion", PROTOCOL_LATEST))
            self.initialized = True
            self.reply(rid, {"capabilities": {"tools": {}}, "instructions": INSTRUCTIONS,
                             "protocolVersion": min(asked, PROTOCOL_LATEST), "serverInfo": SERVER_INFO})  # fmt: skip
        elif method == "ping":
            self.reply(rid, {})
        elif method is not None and method.startswith("notifications/"):
            pass
        elif method == "tools/list":
            self.reply(rid, {"tools": tools()})
        elif method == "tools/call" and isinstance((msg.get("params") or {}).get("name"), str):
            params = msg["params"]
            name, args = params["name"], params.get("arguments") or {}
            if name not in ARGS:
                self.error(rid, -32602, "tool not found")
            elif (why := deserialize(name, args)) is not None:
                self.error(rid, -32602, f"failed to deserialize parameters: {why}")
            else:
                self.reply(rid, self.call(name, args))
        else:
            self.error(rid, -32601, "Method not found")
        return None

    def call(self, name: str, args: dict[str, Any]) -> dict[str, Any]:
        if name == "caliban_run":
            for k in range(self.script.get("flood_answers", 0)):  # (hostile: answers to ids never sent)
                self.write({"id": 1_000_000 + k, "jsonrpc": "2.0", "result": ok({"ok": True})})
            run_id = f"run-{len(self.runs) + 1}"
            self.runs[run_id] = Run(self, run_id, args["prompt"], bool(args.get("interactive")))
            return ok({"run_id": run_id})
        if name == "caliban_send_input" and not args.get("end") and args.get("text") is None:
            return failed("send_input requires `text` or `end: true`")  # (checked before the run)
        run = self.runs.get(args["run_id"])
        if run is None:
            return failed(f"unknown run_id: {args['run_id']}")
        if name == "caliban_poll":
            body = run.poll(int(args.get("cursor") or 0))
            if "next_cursor" in self.script:  # (hostile)
                body["next_cursor"] = self.script["next_cursor"]
            return ok(body)
        if name == "caliban_status":
            with run.lock:
                return ok({"status": dict(run.status)})
        if name == "caliban_send_input":
            why = run.send(args.get("text"), bool(args.get("end")))
            return failed(why) if why else ok({"ok": True})
        why = run.permit(args["tool_use_id"], bool(args["allow"]), args.get("reason"))
        return failed(why) if why else ok({"ok": True})

    def reply(self, rid: Any, result: dict[str, Any]) -> None:
        if rid is not None:
            self.write({"id": rid, "jsonrpc": "2.0", "result": result})

    def error(self, rid: Any, code: int, message: str) -> None:
        self.write({"error": {"code": code, "message": message}, "id": rid, "jsonrpc": "2.0"})


def ok(body: dict[str, Any]) -> dict[str, Any]:
    """`CallToolResult::success(vec![Content::json(value)])`: one text block, the JSON as a string."""
    return {"content": [{"text": dumps(body), "type": "text"}], "isError": False}


def failed(text: str) -> dict[str, Any]:
    return {"content": [{"text": text, "type": "text"}], "isError": True}


def load_script() -> dict[str, Any]:
    raw = os.environ.get("FAKE_SERVE_SCRIPT", "")
    if not raw:
        return {}
    if raw.lstrip().startswith("{"):
        loaded: dict[str, Any] = json.loads(raw)
        return loaded
    with open(raw) as fh:
        from_file: dict[str, Any] = json.load(fh)
        return from_file


def main(global_args: dict[str, Any]) -> int:
    script = load_script()
    log = os.environ.get("FAKE_SERVE_LOG")
    if "servers" in script:  # one script per server started, in turn (counted in the log)
        started = 0
        if log and os.path.exists(log):
            with open(log) as fh:
                started = sum('"pid"' in line for line in fh)
        script = script["servers"][started % len(script["servers"])]
    server = Server(global_args.get("--model"), script)
    server.log({"pid": os.getpid(), "argv": sys.argv[1:], "cwd": os.getcwd()})
    return server.serve()
