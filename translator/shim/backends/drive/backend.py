"""The drive backend: the shim session's one `caliban mcp serve`, one interactive run for the
conversation, each message polled to its boundary, each permission prompt bridged.

The first message starts the run (`caliban_run{prompt, interactive:true}`), each further one is
`caliban_send_input{text}`; the end of the app's input is `end:true`. A message ends at the
first `awaiting_input` (or `done`/`failed`) followed by a poll with no new events (the drain
rule). An interrupt ends the server (the surface has no cancel): the next message starts a new
server and run, which know nothing of the conversation before it.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import orjson

from translator.shim import limits
from translator.shim.backends.base import RunContext
from translator.shim.backends.drive.frames import DriveFrames
from translator.shim.backends.drive.mcp import McpServer, ServerGone, ToolError
from translator.shim.backends.drive.segments import Segments
from translator.shim.backends.drive.stops import AT_TURN_END, FOLLOWED, State, step
from translator.shim.permissions import outputs
from translator.shim.permissions.gate import INTERRUPTED, Decision, Gate, ToolCall
from translator.shim.permissions.hooks import Hooks, blocked
from translator.shim.protocol.frames import interrupted, session_state, states_asked
from translator.shim.protocol.initialize import HookMatcher

POLL_MIN_S = 0.002  # while events flow, and right after a status change or an answer
POLL_MAX_S = 0.025  # the backoff's ceiling while a message runs (a prompt waits at most this)
FINISH_S = 5.0  # the end of the app's input: how long the run may take to reach `done`
SETTLING = ("awaiting_input", "done", "failed")
# What the frames cannot carry here, said once a session (docs/shim.md, "Usage per API call").
USAGE_UNSHOWN = ("caliban mcp serve: an API call that runs tools has its frames out before caliban reports its "
                 "usage (once the tools have run), so they carry none: readers of the frames (OpenInference) see a "
                 "run's last call only; the results and the session file have every call's")


class DriveBackend:
    def __init__(self, ctx: RunContext) -> None:
        self.binary, self.session_id = ctx.binary, ctx.files.id
        self._model, self._mode, self.warn = ctx.model, ctx.mode, ctx.warn
        self.place = ctx.place
        self.frames = DriveFrames(self.session_id, partial=ctx.plan.partial, place=ctx.place, observer=ctx.observer)
        self.app = ctx.channel
        self.hooks = Hooks({})
        self.gate = Gate(self.app, ctx.policy, ctx.can_use_tool, self.hooks, ctx.warn, self.session_id, place=ctx.place)
        self.segments = Segments()
        self.server: McpServer | None = None
        self.run_id: str | None = None
        self.cursor = 0
        self.ran = False  # a run was started (a server ended after one loses the conversation)
        self.stop: State = "running"  # how the message's run stops (stops.py)
        self.active = False  # a message is being run
        self._asked: set[str] = set()  # the prompts asked while their call is open (a poll repeats one until answered)
        self.denials: list[dict[str, Any]] = []  # the run's calls denied (the result's permission_denials)
        self.deferred: dict[str, Any] | None = None  # the call a PreToolUse hook deferred: {id, name, input}
        self._tools: dict[str, tuple[str, list[str]]] = {}  # tool_use_id → name, input fragments
        self._usage_said = False  # USAGE_UNSHOWN, once

    @property
    def last_is_error(self) -> bool:
        return self.frames.last_is_error

    def send(self, *frames: dict[str, Any]) -> None:
        self.app.send(*frames)

    def emit(self, line: bytes | None) -> None:
        if line is not None:
            self.app.write(self.frames.feed(line))
            for said in self.frames.diagnostics():
                self.warn(said)

    # ------------------------------------------------------------------ the server

    def probe(self) -> str | None:
        """Start the server and check its five tools (once per session): None, or why not."""
        try:
            self.server = self._start()
        except ServerGone as exc:
            return str(exc)
        return None

    def _start(self) -> McpServer:
        model = self._model()
        argv = [self.binary, *(["--model", model] if model else []), "mcp", "serve"]
        server = McpServer(argv, self.place, limits.mcp_timeout(self.place.env))
        try:
            server.start()
        except ServerGone as exc:
            reason = str(exc) if server.alive else f"{server.why()} ({exc})"
            server.kill()
            raise ServerGone(reason) from None
        return server

    def set_hooks(self, config: Mapping[str, Sequence[HookMatcher]], timeout: float) -> None:
        self.hooks = self.gate.hooks = Hooks(config, timeout)
        for event in self.hooks.unfired():
            self.warn(f"{event} hooks never fire on caliban (the drive surface has no such event)")

    def input_ended(self) -> None:
        self.gate.input_ended()

    def answer(self, request: dict[str, Any]) -> dict[str, Any] | None:
        subtype = request.get("subtype")
        if subtype == "set_model":
            self.warn("set_model: caliban mcp serve fixes its model at its start; it applies after an interrupt")
            return {}
        return {"mcpServers": []} if subtype == "mcp_status" else None

    def refuse(self, why: str) -> None:
        self.frames.begin(self._mode())
        self.segments.begin()
        self.emit(self.segments.close({"Error": why}))

    def interrupt(self) -> None:
        """The app's interrupt: end the server, which ends the run."""
        if not self.active:
            return
        action, self.stop = step(self.stop, "user")
        assert action == "kill"
        self.gate.end(Decision("interrupt", INTERRUPTED))
        self.app.cancel()
        if self.server is not None:
            self.server.kill()

    def kill(self, waiting: Callable[[float], bool] | None = None) -> None:
        self.app.cancel()
        if self.server is not None:
            self.server.kill()

    def finish(self) -> None:
        """The app's input ended: end the run (`end:true`, drained to `done`), then the server."""
        server = self.server
        if server is None:
            return
        try:
            if self.run_id is not None and server.alive:
                server.call("caliban_send_input", {"run_id": self.run_id, "end": True})
                deadline = time.monotonic() + FINISH_S
                while time.monotonic() < deadline:
                    body, events, self.cursor = server.poll(self.run_id, self.cursor)
                    if _state(body) in ("done", "failed") and not events:
                        break
                    time.sleep(POLL_MAX_S)
        except (ServerGone, ToolError):
            pass
        server.close()

    # ------------------------------------------------------------------ one message

    def run_message(self, prompt: str) -> None:
        """One user message to its result (always exactly one)."""
        self.active, self.stop, self.denials, self.deferred = True, "running", [], None
        self.frames.begin(self._mode())
        self.gate.begin(self._mode(), str(uuid.uuid4()))
        states = states_asked(self.place.env)  # (asked by both SDKs; `-p` prints none, as the CLI)
        if states:
            self.send(session_state("running", self.session_id))
        self.segments.begin()
        stopped: Any = "EndOfTurn"
        said = self.gate.hook("UserPromptSubmit", {"prompt": prompt})
        stop, reason = outputs.stop_reason(said), blocked(said)
        if stop is not None:  # (Claude Code's: the prompt kept, the model never asked, a success result)
            text = f"Operation stopped by hook: {stop}"
            outcome = {"kind": "stopped_by_hook", "prompt_kept": True, "reason": stop}
            self.send(outputs.informational(text, "warning", self.session_id, prevent_continuation=True,
                                            prompt_submit_outcome=outcome))  # fmt: skip
            self.frames.overrides, self.frames.dropped = {"result": text, "stop_reason": None}, ("terminal_reason",)
        elif reason is not None:
            stopped = {"HookDenied": reason}
        else:
            prompt = outputs.with_context(prompt, "UserPromptSubmit", outputs.contexts(said))
            try:
                armed = self._send(prompt)
                stopped = self._follow(armed)
            except ServerGone as exc:
                stopped = {"Error": str(exc)}  # (a run stopped meanwhile: Cancelled, below)
                self._drop()
        stopped = self._stopped(stopped)
        self.frames.denials = self.denials
        if self.segments.turns > 1 and not self._usage_said:  # (a call before the last ran tools)
            self._usage_said = True
            self.warn(USAGE_UNSHOWN)
        self.gate.hook("Stop", {"stop_hook_active": False})  # (before the result, as Claude Code calls it)
        self.emit(self.segments.close(stopped))
        self.active = False
        if states:
            self.send(session_state("idle", self.session_id))

    def _stopped(self, stopped: Any) -> Any:
        """The stop the message's RunEnd gets, as its run stopped (stops.py): a run the gate or the
        user stopped ends here, its server with it."""
        match self.stop:
            case "defer":  # (the run cannot wait with a call pending: it ends, as on interrupt)
                self._drop()
                self.frames.deferred = self.deferred
                return "EndOfTurn"
            case "hook":  # a PreToolUse continue:false: the tool ran, the run ends there
                self._drop()
                self.frames.overrides = {"result": "", "stop_reason": "tool_use", "terminal_reason": "hook_stopped"}
                return "EndOfTurn"
            case "user" | "tool":  # (the app's interrupt, or a deny with interrupt)
                self._drop()
                self.frames.before_result = interrupted(self.session_id, self.stop == "tool")
                if self.stop == "tool":
                    self.frames.terminal_reason = "aborted_tools"
                return "Cancelled"
        return stopped

    def _send(self, prompt: str) -> bool:
        """Start the run, or give it the message. True: the status that follows is this message's."""
        if self.server is None or not self.server.alive:
            self._drop()
            self.server = self._start()  # (the probe started the first: this one follows an end)
            self._asked.clear()  # (its prompts are new: caliban's tool ids are the provider's)
            if self.ran:  # (one ended before any run, as for a TS SDK claim, lost nothing)
                self.warn("a new caliban mcp serve and run: it knows nothing of this conversation's earlier messages")
        if self.run_id is not None:
            try:
                self.server.call("caliban_send_input", {"run_id": self.run_id, "text": prompt})
                return False
            except ToolError as exc:  # the run ended (an error, its turn limit): a new one, without the context
                self.warn(f"caliban_send_input: {exc}; starting a new run, which knows nothing of the earlier messages")
        self.run_id = str(self.server.call("caliban_run", {"prompt": prompt, "interactive": True}).get("run_id"))
        self.cursor, self.ran = 0, True
        return True

    def _drop(self) -> None:
        if self.server is not None:
            self.server.kill()
        self.server, self.run_id = None, None

    def _follow(self, armed: bool) -> Any:
        """Poll to the message's boundary: the stop its RunEnd gets."""
        assert self.server is not None and self.run_id is not None
        interval, settling = POLL_MIN_S, None
        while self.stop in FOLLOWED:
            body, events, self.cursor = self.server.poll(self.run_id, self.cursor)
            for envelope in events:
                event = envelope.get("event") if isinstance(envelope, dict) else None
                if isinstance(event, dict) and self._event(event):
                    return "Cancelled"  # the turn of a deny that interrupted has ended
            state = _state(body)
            armed = armed or bool(events) or state == "running"
            if settling is not None and not events:
                if settling != "awaiting_input":
                    self.run_id = None  # the run is over
                status = body.get("status")
                error = status.get("error") if isinstance(status, dict) else None
                return {"Error": str(error)} if settling == "failed" else "EndOfTurn"
            settling = state if armed and state in SETTLING else None
            ask = body.get("permission_request")
            if isinstance(ask, dict) and (tid := str(ask.get("tool_use_id", ""))) not in self._asked:
                self._asked.add(tid)
                call = ToolCall(str(ask.get("tool_name", "")), ask.get("input"), tid)
                decision = self.gate.decide(call)
                self._decided(call, decision)
                self._permit(call, decision)
                interval = POLL_MIN_S
                continue
            interval = POLL_MIN_S if events or settling else min(interval * 2, POLL_MAX_S)
            time.sleep(interval)
        return "Cancelled"

    def _decided(self, call: ToolCall, decision: Decision) -> None:
        """What the decision does to the run: a call denied is one of the result's denials; a
        decision that ends the run ends it at its turn's end (a defer with the call pending)."""
        if decision.verdict == "defer":
            self.deferred = self.deferred or {"id": call.id, "name": call.name, "input": call.input}
        elif not decision.runs:
            self.denials.append({"tool_name": call.name, "tool_use_id": call.id, "tool_input": call.input})
        if decision.verdict in ("interrupt", "defer", "stop"):
            _, self.stop = step(self.stop, decision.verdict)  # (its action: the turn followed to its end)

    def _permit(self, call: ToolCall, decision: Decision) -> None:
        assert self.server is not None
        args: dict[str, Any] = {"run_id": self.run_id, "tool_use_id": call.id, "allow": decision.runs}
        if not decision.runs:
            args["reason"] = decision.reason
        try:
            self.server.call("caliban_permit", args)
        except ToolError as exc:  # (it waited 600 s and denied it: "run is no longer waiting on that prompt")
            self.warn(f"caliban_permit: {exc}")

    def _event(self, event: dict[str, Any]) -> bool:
        """Fold one event in; PostToolUse at a tool's end. True: stop here (an interrupting deny's turn ended)."""
        kind = event.get("type")
        tid = str(event.get("tool_use_id", ""))
        if kind == "ToolCallStart":
            self._tools[tid] = (str(event.get("name", "")), [])
        elif kind == "ToolCallInputDelta" and tid in self._tools:
            self._tools[tid][1].append(str(event.get("partial_json", "")))
        deferred = self.deferred is not None and kind == "ToolCallEnd" and self.deferred["id"] == tid
        if not deferred:  # (a deferred call stays pending: no result, no PostToolUse)
            self.emit(self.segments.event(event))
        if kind == "ToolCallEnd":
            self._asked.discard(tid)  # (a later call the provider gives the same id is asked anew)
            name, parts = self._tools.pop(tid, ("", []))
            if not deferred:
                self.gate.post_tool(name, _input(parts), tid, event)
        return kind == "TurnEnd" and self.stop in AT_TURN_END


def _state(body: dict[str, Any]) -> str:
    status = body.get("status")
    return str(status.get("state")) if isinstance(status, dict) else ""


def _input(parts: list[str]) -> Any:
    try:
        return orjson.loads("".join(parts)) if parts else {}
    except orjson.JSONDecodeError:
        return "".join(parts)
