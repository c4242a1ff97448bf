"""The `caliban -p` backend: each user message is one caliban process (process.py), its output
folded into the conversation's frames (conversation.py) and written as it comes; and the app's
SDK MCP servers relayed to caliban (tools/), each call settled by the backend's gate."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import orjson

from translator.shim.backends.base import RunContext
from translator.shim.backends.oneshot.conversation import Conversation
from translator.shim.backends.oneshot.group import LADDER, TICK
from translator.shim.backends.oneshot.process import CalibanRun
from translator.shim.limits import caliban_tool_timeout
from translator.shim.mapping import run_argv
from translator.shim.permissions.gate import BEYOND_PRINT, INTERRUPTED, Decision, Gate, Then, ToolCall
from translator.shim.permissions.hooks import Hooks
from translator.shim.protocol.frames import session_state, states_asked
from translator.shim.protocol.initialize import HookMatcher
from translator.shim.say import say
from translator.shim.tools.servers import SdkServers
from translator.shim.tools.uses import ToolUses


class OneshotBackend:
    def __init__(self, ctx: RunContext) -> None:
        self.ctx, self.binary, self.plan, self.session = ctx, ctx.binary, ctx.plan, ctx.files
        self._model, self._mode, self._write = ctx.model, ctx.mode, ctx.channel.write
        self.conversation = Conversation(ctx.files.id, partial=ctx.plan.partial, mode=ctx.mode(), place=ctx.place,
                                         observer=ctx.observer)  # fmt: skip
        self.current: CalibanRun | None = None
        self.tools: SdkServers | None = None  # the app's SDK MCP servers, relayed
        self.uses = ToolUses()
        # Settles the app's own tools (relayed): the same hooks, rules and can_use_tool as the drive's gate.
        self.gate = Gate(ctx.channel, ctx.policy, ctx.can_use_tool, Hooks({}), ctx.warn, ctx.files.id, BEYOND_PRINT,
                         place=ctx.place)  # fmt: skip
        self._relayed: set[str] = set()  # the servers whose relay is in the plan

    @property
    def last_is_error(self) -> bool:
        return self.conversation.last_is_error

    # ------------------------------------------------------------------ the relayed servers

    @property
    def relays(self) -> bool:
        return self.tools is not None

    def relay(self, manifests: dict[str, dict[str, Any]]) -> list[str]:
        """The app's SDK MCP servers (the plan's), each given to caliban as a relay of the shim's
        (tools/): in caliban's settings, their names their own, and each of their tools allowed
        by its exact name in caliban's rules (the relay settles each call itself, as Claude Code
        would). Before the first run. The servers relayed now."""
        fresh = [name for name in self.plan.sdk_servers if name not in self._relayed]
        if self.tools is not None:
            self.tools.add(fresh, manifests)
        elif fresh:
            self.tools = SdkServers(fresh, manifests, self.ctx.channel, self.settle, self.uses, self.ctx.warn,
                                    tool_timeout=caliban_tool_timeout(self.ctx.place.env))
            self.conversation.sdk_servers = self.tools.init_entries
            self.conversation.on_tool_use = self.uses.named
        if self.tools is None:
            return []
        self.tools.claim(self.plan.overlay.setdefault("mcp_servers", {}))  # (an external one may have come since)
        self._relayed.update(fresh)
        return fresh

    def settle(self, call: ToolCall, then: Then) -> None:
        """One relayed call of the app's tools, as the drive's gate settles a permission prompt:
        `then(decision)`, from the thread that decided it."""

        def decided(decision: Decision) -> None:
            if decision.verdict in ("defer", "interrupt"):  # the run stops here: what waits for the app is denied too
                self.ctx.channel.cancel()
                stopped = self.defer if decision.verdict == "defer" else self.abort
                stopped({"id": call.id, "name": call.name, "input": call.input})
            then(decision)

        self.gate.settle(call, decided)

    def set_hooks(self, config: Mapping[str, Sequence[HookMatcher]], timeout: float) -> None:
        self.gate.hooks = Hooks(config, timeout)

    def input_ended(self) -> None:
        self.gate.input_ended()

    def ready(self, then: Callable[[], None]) -> None:
        tools = self.tools
        if tools is not None and tools.unshaken():  # (Claude Code's handshake with them comes first)
            threading.Thread(target=tools.handshake, args=(then,), daemon=True).start()
        else:
            then()

    def close(self) -> None:
        if self.tools is not None:
            self.tools.close()

    # ------------------------------------------------------------------ messages

    def run_message(self, prompt: str) -> None:
        self.gate.begin(self._mode(), "")  # (a run of its own: what ended the last one is over)
        conv = self.conversation
        conv.mode = self._mode()
        if self._states():  # (the TS SDK ends a callback's run only at the idle after its result)
            self._write([orjson.dumps(session_state("running", self.session.id)) + b"\n"])
        conv.start_run()
        argv = run_argv(self.binary, self.plan, self._model(), conv.mode, self.session.args())
        if self.tools is not None:  # (their tools by name: known once their manifests are)
            argv[1:1] = self.tools.allows()
            self.tools.uses.clear()
        run = CalibanRun(self.session.argfiles.fit(argv), self.ctx.place)
        self.current = run
        try:
            status = run.run(prompt, lambda chunk: self._write(conv.caliban_output(chunk)))
        finally:
            self.current = None
        self._write(conv.end_run(status, run.stderr_tail))
        self.session.ran(conv.run_result is not None)
        for line in conv.diagnostics():
            say(line)
        if self._states():
            self._write([orjson.dumps(session_state("idle", self.session.id)) + b"\n"])

    def _states(self) -> bool:
        """Whether a run's session states are told: with SDK servers (their callbacks), or where the
        app asks for them as the CLI reads it."""
        return self.tools is not None or states_asked(self.ctx.place.env)

    def refuse(self, why: str) -> None:
        self._write(self.conversation.refused(why))

    def interrupt(self) -> None:
        run = self.current
        if run is not None:
            self.conversation.interrupted = True
            run.interrupt()
        self.gate.end(Decision("interrupt", INTERRUPTED))  # (every later call of the run: denied)

    def defer(self, call: dict[str, Any]) -> None:
        """A PreToolUse hook deferred a relayed call: the run stops there (SIGINT: caliban saves
        its session, which a resume continues), its result Claude Code's `tool_deferred`."""
        self.conversation.deferred = call
        run = self.current
        if run is not None:
            run.interrupt()

    def abort(self, call: dict[str, Any]) -> None:
        """A deny with interrupt refused a relayed call: the run ends there (SIGINT), its result
        Claude Code's (the call rejected, `error_during_execution`, `aborted_tools`)."""
        if self.conversation.deferred is None and not self.conversation.interrupted:
            self.conversation.aborted = call
        self.conversation.interrupted = True
        run = self.current
        if run is not None:
            run.interrupt()

    def answer(self, request: dict[str, Any]) -> dict[str, Any] | None:
        subtype = request.get("subtype")
        if subtype == "mcp_status":
            return {"mcpServers": self.conversation.mcp_servers() + (self.tools.status() if self.tools else [])}
        return {} if subtype == "set_model" else None  # (the next run takes the session's model)

    def finish(self) -> None:
        """Nothing outlives a message here."""

    def kill(self, waiting: Callable[[float], bool]) -> None:
        """The run's group down its ladder (SIGINT, with which caliban saves its session and
        prints its result; SIGTERM; SIGKILL), climbed here too: the worker may be stuck writing
        to an app that does not read."""
        run = self.current
        if run is None:
            return
        run.interrupt()
        deadline = time.monotonic() + sum(grace for _, grace in LADDER)
        while not run.gone() and time.monotonic() < deadline and waiting(0):
            run.step()
            waiting(TICK)
        if not run.gone():
            run.kill()
        waiting(1.0)  # its last frames, unless it is stuck writing them
