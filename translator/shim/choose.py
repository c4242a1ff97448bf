"""Which backend runs a session's caliban, decided in one place, and the warnings that follow
from the decision: `caliban mcp serve` (the drive backend) for an app that gates or watches
tools (`can_use_tool`, hook callbacks), `caliban -p` otherwise, or as CALIBAN_CLAUDE_BACKEND
forces it; never the drive for an app with SDK MCP servers (unless forced), which caliban mcp
serve cannot load; and the drive only once its probe found it.

The facts come at two moments: argv (`can_use_tool`, the servers of `--mcp-config`) when the
session starts, `initialize` (hooks, more servers) before the first message; the choice is
settled by then. Over the backends' protocols only (backends/base.py): main.py, which builds
the session, hands in their constructors, so neither the session nor this module names one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from translator.shim import configure, limits
from translator.shim.backends.base import Backend, Probing, Relaying, RunContext

if TYPE_CHECKING:
    from translator.shim.protocol.initialize import HookMatcher, Initialize

BACKENDS = ("drive", "print")  # CALIBAN_CLAUDE_BACKEND: force one (default: chosen per session)
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
# Print mode (`-p PROMPT`) reads no app's answers: an SDK server's handshake and handler would never be answered.
NO_APP = ("SDK MCP server {!r}: print mode has no app to run its tools (an Agent SDK session has: --input-format "
          "stream-json); not given to caliban")


def forced(env: Mapping[str, str], warn: Callable[[str], None]) -> str | None:
    """The backend CALIBAN_CLAUDE_BACKEND forces (None: chosen per session); another value is said."""
    backend = env.get("CALIBAN_CLAUDE_BACKEND") or None
    if backend not in (None, *BACKENDS):
        warn(f"CALIBAN_CLAUDE_BACKEND={backend}: expected drive or print; chosen per session")
        return None
    return backend


class Choice:
    """The session's backend (a `Chosen`): the `-p` one, or the drive once chosen; each
    request goes to the one chosen. `app` False: print mode (`-p PROMPT`), where no app reads
    the shim's requests: its SDK servers are dropped (said), and the drive runs only forced."""

    def __init__(self, ctx: RunContext, oneshot: Callable[[RunContext], Relaying],
                 drive: Callable[[RunContext], Probing] | None = None, force: str | None = None,
                 app: bool = True) -> None:  # fmt: skip
        self.ctx, self.warn = ctx, ctx.warn
        self.oneshot = oneshot(ctx)
        self.current: Backend = self.oneshot
        self._make_drive = drive if app or force == "drive" else None
        self.drive: Probing | None = None  # the drive backend, once chosen and probed
        self._no_drive = force == "print" or self._make_drive is None  # (forced, or probed once and missing)
        self._forced_drive = force == "drive"
        if not app:
            for name in ctx.plan.sdk_servers:
                self.warn(NO_APP.format(name))
            ctx.plan.sdk_servers = []
        self.relay({})  # (those on argv: the Python SDK's --mcp-config {"type": "sdk"})
        if self._make_drive is None:
            return
        on_drive = (self._forced_drive or (force is None and ctx.can_use_tool)) and self.use_drive()
        if on_drive or self.oneshot.relays:  # bridged, or said for the relayed tools
            ctx.plan.warnings = [w for w in ctx.plan.warnings if not w.startswith("can_use_tool")]

    # ------------------------------------------------------------------ the choice

    def relay(self, manifests: dict[str, dict[str, Any]]) -> None:
        """The app's SDK servers, relayed by the `-p` backend: the drive is no longer chosen
        (unless forced, where they are not reached, said)."""
        fresh = self.oneshot.relay(manifests)
        if not fresh:
            return
        if self._forced_drive:
            self.warn(f"CALIBAN_CLAUDE_BACKEND=drive: the app's SDK MCP servers ({', '.join(fresh)}) are not reached "
                      "(caliban mcp serve loads no MCP servers)")  # fmt: skip
        if self.drive is not None and not self._forced_drive:
            self.use_drive()  # (back to caliban -p: said there)

    def use_drive(self) -> bool:
        """The drive backend (caliban mcp serve), for permission callbacks and hooks: probed
        once; where caliban has none, said in one line, and the session stays on `-p`. Not for
        an app with SDK MCP servers (unless forced): `caliban mcp serve` loads no MCP servers."""
        if self.ctx.plan.sdk_servers and not self._forced_drive:
            if not self._no_drive:
                self.warn(NO_DRIVE_FOR_TOOLS)
            self._no_drive = True
            if self.drive is not None:
                self.drive.kill(lambda _: False)
                self.drive, self.current = None, self.oneshot
            return False
        if self.drive is not None:
            return True
        if self._no_drive or self._make_drive is None:
            return False
        drive = self._make_drive(self.ctx)
        why = drive.probe()
        if why is not None:
            self._no_drive = True
            self.warn(f"caliban mcp serve is not available ({why}); permission callbacks and hooks fall back to caliban -p")
            return False
        self.drive = self.current = drive
        if not self.ctx.files.new:
            self.warn(DRIVE_NO_HISTORY)
        return True

    def initialize(self, init: Initialize, warnings: list[str]) -> tuple[list[str], bool]:
        self.ctx.policy.also_deny(init.disallowed_tools or ())  # (what the drive backend applies itself)
        self.relay(init.sdk_mcp_manifests)
        if init.hooks_sent:
            self.set_hooks(init.hooks)
        if self.drive is not None:
            warnings = [w for w in warnings if w != configure.HOOKS]  # they are called
        elif self.oneshot.relays:
            warnings = [RELAYED_HOOKS if w == configure.HOOKS else w for w in warnings]
        return warnings, init.hooks_sent and self.drive is None

    def set_hooks(self, config: Mapping[str, Sequence[HookMatcher]], timeout: float | None = None) -> None:
        """The relay's gate takes them; hooks choose the drive, which calls them. Their
        timeout read once (CALIBAN_CLAUDE_HOOK_TIMEOUT), for both: a bad value said once."""
        timeout = limits.hook_timeout(self.ctx.place.env) if timeout is None else timeout
        self.oneshot.set_hooks(config, timeout)
        if self.use_drive():
            assert self.drive is not None
            self.drive.set_hooks(config, timeout)

    def ready(self, then: Callable[[], None]) -> None:
        self.oneshot.ready(then)  # (the relayed servers' handshake, had whichever runs)

    def close(self) -> None:
        self.oneshot.close()

    # ------------------------------------------------------------------ the one chosen

    @property
    def last_is_error(self) -> bool:
        return self.current.last_is_error

    def run_message(self, prompt: str) -> None:
        self.current.run_message(prompt)

    def refuse(self, why: str) -> None:
        self.current.refuse(why)

    def interrupt(self) -> None:
        self.current.interrupt()

    def input_ended(self) -> None:
        self.oneshot.input_ended()
        if self.drive is not None:
            self.drive.input_ended()

    def answer(self, request: dict[str, Any]) -> dict[str, Any] | None:
        return self.current.answer(request)

    def finish(self) -> None:
        self.current.finish()

    def kill(self, waiting: Callable[[float], bool]) -> None:
        self.current.kill(waiting)
