"""The `caliban -p` backend: each user message is one caliban process (process.py), its output
folded into the conversation's frames (conversation.py) and written as it comes."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import orjson

from translator.encoders.observed import Observer
from translator.shim.backends.oneshot.conversation import Conversation
from translator.shim.backends.oneshot.group import LADDER, TICK
from translator.shim.backends.oneshot.process import CalibanRun
from translator.shim.mapping import Plan, run_argv
from translator.shim.protocol.frames import session_state
from translator.shim.say import say
from translator.shim.sessions import Session
from translator.shim.tools.servers import SdkServers


class OneshotBackend:
    def __init__(self, *, binary: str, plan: Plan, session: Session, model: Callable[[], str | None],
                 mode: Callable[[], str], write: Callable[[list[bytes]], None],
                 observer: Observer | None = None) -> None:  # fmt: skip
        self.binary, self.plan, self.session = binary, plan, session
        self._model, self._mode, self._write = model, mode, write
        self.conversation = Conversation(session.id, partial=plan.partial, mode=mode(), observer=observer)
        self.current: CalibanRun | None = None
        self.tools: SdkServers | None = None  # the app's SDK MCP servers, relayed

    @property
    def last_is_error(self) -> bool:
        return self.conversation.last_is_error

    def run_message(self, prompt: str) -> None:
        conv = self.conversation
        conv.mode = self._mode()
        if self.tools is not None:  # (the TS SDK ends a callback's run only at the idle after its result)
            self._write([orjson.dumps(session_state("running", self.session.id)) + b"\n"])
        conv.start_run()
        argv = run_argv(self.binary, self.plan, self._model(), conv.mode, self.session.args())
        if self.tools is not None:  # (their tools by name: known once their manifests are)
            argv[1:1] = self.tools.allows()
            self.tools.uses.clear()
        run = CalibanRun(self.session.argfiles.fit(argv))
        self.current = run
        try:
            status = run.run(prompt, lambda chunk: self._write(conv.caliban_output(chunk)))
        finally:
            self.current = None
        self._write(conv.end_run(status, run.stderr_tail))
        self.session.ran(conv.run_result is not None)
        for line in conv.diagnostics():
            say(line)
        if self.tools is not None:
            self._write([orjson.dumps(session_state("idle", self.session.id)) + b"\n"])

    def refuse(self, why: str) -> None:
        self._write(self.conversation.refused(why))

    def interrupt(self) -> None:
        run = self.current
        if run is not None:
            self.conversation.interrupted = True
            run.interrupt()

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
