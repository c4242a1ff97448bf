"""One conversation of `caliban-claude` with its app: the app channel (channel.py), the
backend that runs caliban (`caliban -p`, or `caliban mcp serve` once the app gates or watches
tools), and the lifetime.

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
from translator.shim.backends.base import Backend
from translator.shim.backends.drive.backend import DriveBackend
from translator.shim.backends.oneshot.backend import OneshotBackend
from translator.shim.mapping import PERMISSION_MODES, Plan, model_choices, resolve_model
from translator.shim.permissions.gate import BEYOND_PRINT, INTERRUPTED, Decision, Gate, ToolCall
from translator.shim.permissions.hooks import Hooks
from translator.shim.permissions.policy import Policy
from translator.shim.protocol import frames, initialize
from translator.shim.protocol.channel import Channel, Inbound
from translator.shim.protocol.transport import Transport
from translator.shim.restricting import bypass_refused
from translator.shim.say import PROG, say, warn
from translator.shim.tools.servers import SdkServers
from translator.shim.tools.uses import ToolUses

# caliban's drive surface takes each prompt as text and keeps its sessions in memory: a
# conversation's history cannot reach it (caliban-drive-surface.md, "What the surface does not carry").
DRIVE_NO_HISTORY = ("resume/continue/fork on caliban mcp serve (for can_use_tool and hooks): the conversation's "
                    "earlier messages do not reach caliban, which starts this one without them (its drive surface "
                    "takes a prompt as text only); caliban -p carries them: CALIBAN_CLAUDE_BACKEND=print, where "
                    "can_use_tool and hooks are not called")  # fmt: skip
RELAYED_HOOKS = "SDK hook callbacks: caliban -p calls PreToolUse for the app's own MCP tools only (relayed); no other"
NO_DRIVE_FOR_TOOLS = ("the app's SDK MCP servers need caliban -p (caliban mcp serve loads no MCP servers): can_use_tool "
                      "and PreToolUse hooks are asked for the app's own tools; caliban's own tools are settled by its "
                      "rules (what they ask about is denied): caliban -p runs no hooks of its settings and ignores "
                      "--permission-prompt-tool, so it has no way to ask the app")

if TYPE_CHECKING:
    from translator.telemetry.deferred import Deferred


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
        self, binary: str, p: Plan, files: sessions.Session, shape: Callable[[list[bytes]], list[bytes]] = _unchanged,
        *, policy: Policy | None = None, backend: str | None = None, prompt_tool: bool = False,
        telemetry: Deferred | None = None, transport: Transport | None = None,
    ) -> None:  # fmt: skip
        self.binary, self.plan, self.files = binary, p, files
        self.policy, self.prompt_tool = policy or Policy(None, None), prompt_tool
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
            self.observer.stream_open(StreamId(PROG, files.id, os.getcwd()), time.time())
        self.oneshot = OneshotBackend(binary=binary, plan=p, session=files, model=lambda: self.model,
                                      mode=lambda: self.mode, write=self.channel.write, observer=self.observer)  # fmt: skip
        self.backend: Backend = self.oneshot
        self.drive: DriveBackend | None = None  # the drive backend, once chosen and probed
        self._no_drive = backend == "print"  # (forced, or probed once and missing)
        self._forced_drive = backend == "drive"
        self.uses = ToolUses()
        # Settles the app's own tools (relayed): the same hooks, rules and can_use_tool as the drive's gate.
        self.relay_gate = Gate(self.channel, self.policy, prompt_tool, Hooks({}), warn, files.id, BEYOND_PRINT)
        self.tools: SdkServers | None = None
        self._relayed: set[str] = set()  # the servers whose relay is in the plan
        self.relay_tools({})  # (those on argv: the Python SDK's --mcp-config {"type": "sdk"})
        self.initialize = initialize.Initialize()  # what the SDK's initialize asked for (none yet)
        self.prefix = p.prefix if files.new else ""  # goes before the first message's text
        self.stopping = threading.Event()
        self.signal: int | None = None

    # ------------------------------------------------------------------ the app's requests

    def inbound(self, message: Inbound) -> None:
        """What the app's input brings, queued for the worker; its end (None) also ends the
        gates' runs at once (the run in progress may have calls still to come)."""
        if message is None:
            self.relay_gate.input_ended()
            if self.drive is not None:
                self.drive.gate.input_ended()
        self.inbox.put(message)

    def control(self, rid: str, request: dict[str, Any]) -> None:
        """Answer at once: the SDK blocks on every control request."""
        subtype = request.get("subtype")
        send = self.channel.send
        if subtype == "initialize":
            self.initialize = init = initialize.read(request)
            self.policy.also_deny(init.disallowed_tools or ())  # (what the drive backend applies itself)
            applied, warnings = configure.apply(self.plan, init)  # (no run has started: the reader runs first)
            self.relay_tools(init.sdk_mcp_manifests)
            if init.hooks_sent:
                self.relay_gate.hooks = Hooks(init.hooks)
                if self.use_drive():
                    assert self.drive is not None
                    self.drive.set_hooks(init.hooks)
            if self.drive is not None:
                warnings = [w for w in warnings if w != configure.HOOKS]  # they are called
            elif self.tools is not None:
                warnings = [RELAYED_HOOKS if w == configure.HOOKS else w for w in warnings]
            self.prefix = self.plan.prefix if self.files.new else ""
            for message in warnings:
                warn(message)
            hooks_unapplied = init.hooks_sent and self.drive is None
            answer = frames.success(rid, frames.initialize(self.mode, hooks_unapplied, applied, model_choices()))
            tools = self.tools
            if tools is not None and tools.unshaken():  # (Claude Code's handshake with them comes first)
                threading.Thread(target=tools.handshake, args=(lambda: send(answer),), daemon=True).start()
            else:
                send(answer)
        elif subtype == "interrupt":
            send(frames.success(rid, {"still_queued": []}))
            if self.observer is not None:
                self.observer.interrupted(time.time())
            self.backend.interrupt()
            self.relay_gate.end(Decision("interrupt", INTERRUPTED))  # (every later call of the run: denied)
            self.channel.cancel()  # every request of the run that waits for the app: settled, a late answer ignored
        elif subtype == "set_permission_mode":
            mode = request.get("mode")
            if not isinstance(mode, str) or mode not in PERMISSION_MODES:
                send(frames.error(rid, f"caliban shim: unknown permission mode {mode!r}"))
                return
            refused = bypass_refused(mode, "--restrict-paths" in self.plan.static, os.geteuid() == 0,
                                     os.environ.get("IS_SANDBOX"))  # fmt: skip
            if refused is not None:  # as the CLI, later as at the start
                send(frames.error(rid, refused))
                return
            self.mode = str(mode)
            send(frames.success(rid, {"mode": self.mode}), frames.status(self.mode, self.files.id))
        elif subtype == "set_model":
            model = request.get("model")
            if model is not None and not isinstance(model, str):
                send(frames.error(rid, f"caliban shim: model {model!r} is not a name"))
                return
            self.model = resolve_model(model)
            send(frames.success(rid, self.backend.answer(request) or {}))
        elif (body := self.backend.answer(request)) is not None:
            send(frames.success(rid, body))
        else:
            send(frames.unsupported(rid, str(subtype)))

    # ------------------------------------------------------------------ the backend

    def relay_tools(self, manifests: dict[str, dict[str, Any]]) -> None:
        """The app's SDK MCP servers (the plan's), each given to caliban as a relay of the shim's
        (tools/): in caliban's settings, their names their own, and each of their tools allowed
        by its exact name in caliban's rules (the relay settles each call itself, as Claude Code
        would). Before the first run."""
        fresh = [name for name in self.plan.sdk_servers if name not in self._relayed]
        if self.tools is not None:
            self.tools.add(fresh, manifests)
        elif fresh:
            self.tools = SdkServers(fresh, manifests, self.channel, self.settle, self.uses, warn)
            self.oneshot.tools = self.tools
            self.oneshot.conversation.sdk_servers = self.tools.init_entries
            self.oneshot.conversation.on_tool_use = self.uses.named
        if self.tools is None:
            return
        self.tools.claim(self.plan.overlay.setdefault("mcp_servers", {}))  # (an external one may have come since)
        if not fresh:
            return
        self._relayed.update(fresh)
        if self._forced_drive:
            warn(f"CALIBAN_CLAUDE_BACKEND=drive: the app's SDK MCP servers ({', '.join(fresh)}) are not reached "
                 "(caliban mcp serve loads no MCP servers)")  # fmt: skip
        if self.drive is not None and not self._forced_drive:
            self.use_drive()  # (back to caliban -p: said there)

    def settle(self, call: ToolCall) -> Decision:
        """One relayed call of the app's tools, as the drive's gate settles a permission prompt."""
        decision = self.relay_gate.decide(call)
        if decision.verdict in ("defer", "interrupt"):  # the run stops here: what waits for the app is denied too
            self.channel.cancel()
            stopped = self.oneshot.defer if decision.verdict == "defer" else self.oneshot.abort
            stopped({"id": call.id, "name": call.name, "input": call.input})
        return decision

    def use_drive(self) -> bool:
        """The drive backend (caliban mcp serve), for permission callbacks and hooks: probed
        once; where caliban has none, said in one line, and the session stays on `-p`. Not for
        an app with SDK MCP servers (unless forced): `caliban mcp serve` loads no MCP servers."""
        if self.plan.sdk_servers and not self._forced_drive:
            if not self._no_drive:
                warn(NO_DRIVE_FOR_TOOLS)
            self._no_drive = True
            if self.drive is not None:
                self.drive.kill(lambda _: False)
                self.drive, self.backend = None, self.oneshot
            return False
        if self.drive is not None:
            return True
        if self._no_drive:
            return False
        drive = DriveBackend(
            binary=self.binary, model=lambda: self.model, session_id=self.files.id, partial=self.plan.partial,
            mode=lambda: self.mode, policy=self.policy, can_use_tool=self.prompt_tool, app=self.channel, warn=warn,
            observer=self.observer,
        )  # fmt: skip
        why = drive.probe()
        if why is not None:
            self._no_drive = True
            warn(f"caliban mcp serve is not available ({why}); permission callbacks and hooks fall back to caliban -p")
            return False
        self.drive = self.backend = drive
        if not self.files.new:
            warn(DRIVE_NO_HISTORY)
        return True

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
        self.relay_gate.begin(self.mode, "")  # (a run of its own: what ended the last one is over)
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
        if self.tools is not None:
            self.tools.close()
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
