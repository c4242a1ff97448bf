"""The drive backend's Claude Code frames: each message's run (segments.py) through the
translator's own core, handed what only the shim knows (as conversation.py does for the `-p`
backend): the installation facts, the permission mode, the tools the shim denied, the
interrupt's terminal reason, a deferred call; its init and result frames come out complete.
Every frame stays under the SDK's line limit.
"""

from __future__ import annotations

from typing import Any

from translator.api import Stream
from translator.encoders.observed import Observer
from translator.shim.backends.completion import fitted
from translator.shim.mapping import CALIBAN_TOOLS
from translator.shim.place import Place
from translator.shim.protocol.frames import CLI_VERSION, api_key_source


class DriveFrames:
    def __init__(self, session_id: str, *, partial: bool, place: Place, observer: Observer | None = None) -> None:
        """`place`: the session's (the server's folder, its environment)."""
        self.session_id, self.place = session_id, place
        # One translation for the whole shim session: result_index counts and the cost adds up.
        self.translation = Stream(
            "claude-code", session_id=session_id, include_partial_messages=partial, clock="wall",
            source="caliban mcp serve", observer=observer, completion=self,
        )  # fmt: skip
        self.mode = "default"
        self.last_is_error = False
        self.denials: list[dict[str, Any]] = []  # this message's denied tools, as the result lists them
        self.terminal_reason: str | None = None  # an override (a deny that interrupted: aborted_tools)
        self.before_result: dict[str, Any] | None = None  # the interrupted-by-user frame
        self.deferred: dict[str, Any] | None = None  # the call a PreToolUse hook deferred: {id, name, input}
        self.overrides: dict[str, Any] = {}  # the result's keys as a hook's stop makes them
        self.dropped: tuple[str, ...] = ()  # and the keys it has not

    def begin(self, mode: str) -> None:
        self.mode, self.denials, self.terminal_reason, self.before_result, self.deferred = mode, [], None, None, None
        self.overrides, self.dropped = {}, ()

    def feed(self, line: bytes) -> list[bytes]:
        return self._complete(self.translation.feed(line))

    def diagnostics(self) -> list[str]:
        return self.translation.take_diagnostics()

    def _complete(self, frames: list[bytes]) -> list[bytes]:
        return fitted(frames)

    def complete_init(self, frame: dict[str, Any]) -> None:
        cwd = self.place.cwd  # the server's workspace: the folder it was started in, the session's
        frame.update(cwd=cwd, original_cwd=cwd, tools=list(CALIBAN_TOOLS), permissionMode=self.mode,
                     claude_code_version=CLI_VERSION, apiKeySource=api_key_source(self.place.env))  # fmt: skip

    def complete_result(self, frame: dict[str, Any], written: list[bytes]) -> list[dict[str, Any]]:
        """This message's denials and terminal reason; the interrupted-by-user frame before it."""
        frame["permission_denials"] = self.denials
        if self.terminal_reason is not None:
            frame["terminal_reason"] = self.terminal_reason
        frame.update(self.overrides)
        for key in self.dropped:
            frame.pop(key, None)
        if self.deferred is not None:  # Claude Code's defer: the turn stopped, the call pending
            frame.update(stop_reason="tool_deferred", terminal_reason="tool_deferred", deferred_tool_use=self.deferred)
        self.last_is_error = frame.get("is_error") is True
        return [] if self.before_result is None else [self.before_result]
