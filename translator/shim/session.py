"""One conversation of `caliban-claude` with its app: the app channel (channel.py), the one
backend that runs caliban (given by choose.py: the session names none, it sees the protocol of
backends/base.py), the app's control requests by a {subtype: handler} table, and the lifetime.

Three threads: the channel's reader answers control requests the moment they arrive (the SDK
waits on them) and queues user messages; a worker runs the queued messages one at a time; the
main thread waits and handles signals. stdout carries protocol frames only.
"""

from __future__ import annotations

import os
import queue
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from translator.core.prompts import prompted
from translator.encoders.observed import Observer, StreamId, observer_of
from translator.exits import EX_IOERR
from translator.shim import configure, sessions, transcript
from translator.shim.backends.base import Chosen, RunContext
from translator.shim.choose import DRIVE_NO_HISTORY
from translator.shim.claiming import NOT_CLAIMED, Spare
from translator.shim.mapping import PERMISSION_MODES, Plan, model_choices, resolve_model
from translator.shim.permissions.policy import Policy
from translator.shim.protocol import frames, initialize
from translator.shim.protocol.channel import Channel, Inbound
from translator.shim.protocol.transport import Transport
from translator.shim.restricting import bypass_refused
from translator.shim.say import PROG, say, warn

if TYPE_CHECKING:
    from translator.telemetry.deferred import Deferred

__all__ = ["DRIVE_NO_HISTORY", "ShimSession", "prompt_text"]  # (the drive's warning, named where it was)
Choose = Callable[[RunContext], Chosen]  # choose.py's `Choice`, its backends' constructors given (main.py)
Handler = Callable[[str, dict[str, Any]], None]


def _unchanged(lines: list[bytes]) -> list[bytes]:
    return lines


def prompt_text(message: dict[str, Any]) -> tuple[str, int]:
    """The text of an SDK user message, and how many non-text blocks were left out."""
    body = message.get("message")
    content = body.get("content", "") if isinstance(body, dict) else ""
    if isinstance(content, str):
        return content, 0
    blocks = content if isinstance(content, list) else []
    texts = [
        b["text"] for b in blocks if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
    ]
    return "\n".join(texts), len(blocks) - len(texts)


class ShimSession:
    def __init__(
        self, binary: str, p: Plan, files: sessions.Session, choose: Choose,
        shape: Callable[[list[bytes]], list[bytes]] = _unchanged, *, rules: tuple[str | None, str | None] = (None, None),
        prompt_tool: bool = False, telemetry: Deferred | None = None, transport: Transport | None = None,
    ) -> None:  # fmt: skip
        """`choose`: the backend, given what a backend needs of the session; `rules`:
        `--allowedTools` and `--disallowedTools`, as the app gave them."""
        self.binary, self.plan, self.files = binary, p, files
        self.model = p.model
        self.mode = p.permission_mode
        # A user message; the error of one that could not be read (str); None: stdin ended.
        self.inbox: queue.Queue[Inbound] = queue.Queue()
        self.channel = Channel(self.control, self.inbound, shape, transport)
        self.transcript = transcript.open_transcript(files)  # the session's file, as Claude Code keeps it
        # Claude Code's telemetry: the session as one of its sessions (its id), told each message's prompt
        self.telemetry = None if telemetry is None else telemetry.observer(resumed=not files.new)
        found: list[Observer] = [o for o in (self.transcript, self.telemetry) if o is not None]
        watched = observer_of(found)  # one for the session, opened here first (its backends' translations too)
        self.observer = None if watched is None else prompted(watched)  # (the app's message its run's prompt)
        if self.observer is not None:
            self.observer.stream_open(StreamId(PROG, files.id, files.place.cwd), time.time())
        self.backend = choose(RunContext(
            binary=binary, plan=p, files=files, channel=self.channel, observer=self.observer, model=lambda: self.model,
            mode=lambda: self.mode, policy=Policy(*rules), can_use_tool=prompt_tool, warn=warn, place=files.place,
        ))  # fmt: skip
        self.initialize = initialize.Initialize()  # what the SDK's initialize asked for (none yet)
        self.prefix = p.prefix if files.new else ""  # goes before the first message's text
        self.spare = Spare(p.await_claim)  # (a TS SDK prewarm: parked until claimed)
        self.stopping = threading.Event()
        self.signal: int | None = None
        self.handlers: dict[str, Handler] = {
            "initialize": self.on_initialize, "interrupt": self.on_interrupt,
            "set_permission_mode": self.on_set_permission_mode, "set_model": self.on_set_model,
            "claim_session": self.on_claim_session,
        }  # fmt: skip

    # ------------------------------------------------------------------ the app's requests

    def inbound(self, message: Inbound) -> None:
        """What the app's input brings, queued for the worker; its end (None) also ends the
        gates' runs at once (the run in progress may have calls still to come)."""
        if message is None:
            self.backend.input_ended()
        self.inbox.put(message)

    def control(self, rid: str, request: dict[str, Any]) -> None:
        """Answer at once: the SDK blocks on every control request."""
        self.handlers.get(str(request.get("subtype")), self.on_other)(rid, request)

    def on_initialize(self, rid: str, request: dict[str, Any]) -> None:
        self.initialize = init = initialize.read(request)
        applied, warnings = configure.apply(self.plan, init)  # (no run has started: the reader runs first)
        warnings, hooks_unapplied = self.backend.initialize(init, warnings)
        self.prefix = self.plan.prefix if self.files.new else ""
        for message in warnings:
            warn(message)
        models = model_choices(self.plan.aliases)
        answer = frames.success(rid, frames.initialize(self.mode, hooks_unapplied, self.files.place.env, applied, models))
        self.backend.ready(lambda: self.channel.send(answer))

    def on_interrupt(self, rid: str, request: dict[str, Any]) -> None:
        self.channel.send(frames.success(rid, {"still_queued": []}))
        if self.observer is not None:
            self.observer.interrupted(time.time())
        self.backend.interrupt()  # (its gate denies every later call of the run)
        self.channel.cancel()  # every request of the run that waits for the app: settled, a late answer ignored

    def mode_refused(self, mode: str) -> str | None:
        """Why the session cannot take `mode` (none it knows; bypassPermissions where the CLI refuses it), or None."""
        if mode not in PERMISSION_MODES:
            return f"caliban shim: unknown permission mode {mode!r}"
        return bypass_refused(mode, "--restrict-paths" in self.plan.static, os.geteuid() == 0,
                              self.files.place.env.get("IS_SANDBOX"))  # fmt: skip

    def on_set_permission_mode(self, rid: str, request: dict[str, Any]) -> None:
        mode, send = request.get("mode"), self.channel.send
        refused = self.mode_refused(mode) if isinstance(mode, str) else f"caliban shim: unknown permission mode {mode!r}"
        if refused is not None:  # as the CLI, later as at the start
            send(frames.error(rid, refused))
            return
        self.mode = str(mode)
        send(frames.success(rid, {"mode": self.mode}), frames.status(self.mode, self.files.id))

    def on_claim_session(self, rid: str, request: dict[str, Any]) -> None:
        """The TS SDK's claim of a prewarmed spare (claiming.py): the session moves to the
        claimed folder before its prompt is read (the reader handles this line first)."""
        claim = self.spare.read(request, self.mode_refused, self.files.place)
        if isinstance(claim, str):
            self.channel.send(frames.error(rid, claim))
            return
        self.files.place.cwd = claim.cwd  # (the session's: its runs and caliban's start there)
        if self.transcript is not None:
            self.transcript.moved()
        self.backend.kill(lambda _: False)  # (a server started in the parking folder starts again in this one)
        self.mode = claim.mode or self.mode
        self.prefix = "\n\n".join(text for text in (self.prefix, claim.prefix) if text)
        for message in claim.warnings:
            warn(message)
        self.channel.send(frames.success(rid, self.spare.answer(claim, self.files.id)))

    def on_set_model(self, rid: str, request: dict[str, Any]) -> None:
        model = request.get("model")
        if model is not None and not isinstance(model, str):
            self.channel.send(frames.error(rid, f"caliban shim: model {model!r} is not a name"))
            return
        self.model = resolve_model(model, self.plan.aliases)
        self.channel.send(frames.success(rid, self.backend.answer(request) or {}))

    def on_other(self, rid: str, request: dict[str, Any]) -> None:
        """What the backend holds (`mcp_status`); else unsupported, said to the app."""
        if (body := self.backend.answer(request)) is not None:
            self.channel.send(frames.success(rid, body))
        else:
            self.channel.send(frames.unsupported(rid, str(request.get("subtype"))))

    # ------------------------------------------------------------------ messages

    def work(self) -> None:
        while not self.stopping.is_set():
            msg = self.inbox.get()
            if msg is None and not self.stopping.is_set():
                self.backend.finish()
            if msg is None or self.stopping.is_set():
                return
            if isinstance(msg, str):
                self.backend.refuse(msg)
                continue
            try:
                self.run_message(msg)
            except Exception as exc:  # a bug here must not leave the app waiting for its result
                warn(f"internal error: {exc!r}")
                self.backend.refuse(f"internal error in {PROG}: {exc}")

    def run_message(self, msg: dict[str, Any]) -> None:
        if self.spare.waiting:  # (fail closed: never in the parking folder)
            self.backend.refuse(NOT_CLAIMED)
            return
        prompt, dropped = prompt_text(msg)
        if dropped:
            warn(f"{dropped} non-text content block(s) (images, documents) dropped: caliban -p takes text only")
        if self.prefix:
            prompt, self.prefix = f"{self.prefix}\n\n{prompt}", ""
        if self.plan.replay_user:
            self.channel.send(frames.user_echo(msg, self.files.id))
        if self.observer is not None:  # the message as the app sent it
            body = msg.get("message")
            self.observer.prompt(body.get("content", "") if isinstance(body, dict) else "", time.time())
        self.backend.run_message(prompt)

    # ------------------------------------------------------------------ lifetime

    def serve(self, read_input: bool = True, end: Callable[[], bytes] = bytes) -> int:
        """Until the input's messages are done (`read_input` False: the inbox holds them all);
        then `end()`, what the output format writes last (print mode's text or json). The status
        counts every write, the last too: output that could not be written is 74."""
        if read_input:
            threading.Thread(target=self.channel.read_stdin, name="stdin", daemon=True).start()
        worker = threading.Thread(target=self.work, name="runs", daemon=True)
        worker.start()
        gone = False  # the app stopped reading: nobody would see what caliban does now
        while worker.is_alive() and self.signal is None and not self.channel.closed and not gone:
            worker.join(0.1)
            gone = self.channel.transport.gone()
        if self.signal is not None or self.channel.closed or gone:
            self.stop(worker)
        self.channel.write_bytes(end())  # (nothing once the channel is closed)
        self.backend.close()
        if self.signal is not None:
            return 128 + self.signal
        if self.channel.write_error is not None:  # (a reader that has gone is no error to say)
            say(f"write error: {self.channel.write_error}")
            return EX_IOERR
        return 1 if self.backend.last_is_error else 0

    def on_signal(self, signum: int, frame: object) -> None:
        """A stop signal (main.py installs it): the session ends as its app leaving ends it."""
        self.signal = signum

    def stop(self, worker: threading.Thread) -> None:
        """End caliban, all of it (the backend's kill): nothing of it outlives the shim."""
        self.stopping.set()

        def waiting(seconds: float) -> bool:
            worker.join(seconds)
            return worker.is_alive()

        self.backend.kill(waiting)
