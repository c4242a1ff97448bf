"""caliban's runs of one conversation, as the Claude Code frames the SDK reads (spec §5).

Each caliban line goes through the project's translation (the library's `Stream`, in process,
as it arrives), handed what only the shim knows (`complete_init`, `complete_result`: the
installation facts of caliban's own init, the permission mode the app asked for, the
interrupted-by-user frame, a deferred or aborted call), so that its init and result frames come
out complete; a run that ended without a result gets one. Every frame stays under the SDK's
line limit.
"""

from __future__ import annotations

import signal
import uuid
from collections.abc import Callable
from typing import Any

import orjson

from translator.api import Stream
from translator.encoders.claude_code.frames import mcp_servers
from translator.encoders.observed import Observer
from translator.shim.backends.completion import fitted
from translator.shim.entries import entry
from translator.shim.permissions.gate import REJECTED
from translator.shim.place import Place
from translator.shim.protocol.frames import CLI_VERSION, api_key_source, interrupted, now

# Claude Code's result `errors` for a run a deny with interrupt ended (cc-2.1.333/sdk-ts/can_use_tool_deny_interrupt)
ABORTED_ERRORS = ["[ede_diagnostic] result_type=user last_content_type=n/a stop_reason=tool_use"]
MAX_CALIBAN_LINE = 16 << 20  # bytes of one caliban line read: longer is skipped, said (its tools cap theirs at 30 KB to 10 MB)
WATCHED = 48  # bytes at the head of a caliban line that say whether it is an init or a result


class Conversation:
    def __init__(self, session_id: str, *, partial: bool, mode: str, place: Place,
                 observer: Observer | None = None) -> None:  # fmt: skip
        """`place`: the session's (its folder, where caliban runs; its environment, the API key's source)."""
        self.session_id, self.place = session_id, place
        self.mode = mode  # the permission mode as the app named it
        # One translation for the whole conversation, so `result_index` counts and the cost adds
        # up across caliban runs, as in one Claude Code session.
        self.translation = Stream(
            "claude-code", session_id=session_id, include_partial_messages=partial, clock="wall", source="caliban",
            max_line_bytes=MAX_CALIBAN_LINE, observer=observer, completion=self,
        )  # fmt: skip
        self.caliban_init: dict[str, Any] = {}
        self.last_is_error = False
        self.interrupted = False  # the app interrupted the current run
        self.run_result: dict[str, Any] | None = None  # caliban's own result of the current run
        self._line: list[bytes] = []  # the start of a line of caliban's not ended yet
        self._held = 0  # its size; -1: the rest of it is not kept
        self._head = b""  # its first bytes, up to WATCHED
        # Each tool call caliban announces (name, input): the id the frames give it instead of
        # caliban's, when the relay named it first (tools/uses.py); None: caliban's.
        self.on_tool_use: Callable[[str, Any], str | None] | None = None
        self._renamed: dict[bytes, bytes] = {}  # caliban's id → the relay's, both as JSON strings
        self.deferred: dict[str, Any] | None = None  # the call a PreToolUse hook deferred: {id, name, input}
        self.aborted: dict[str, Any] | None = None  # the call a deny with interrupt ended the run at: {id, name, input}
        self._deferred_shown = False
        self._own: list[bytes] = []  # the uuids of the run's frames the shim made (never dropped as caliban's)
        self.sdk_servers: Callable[[], list[dict[str, Any]]] | None = None  # the app's, in the init frame

    def start_run(self) -> None:
        self.interrupted = False
        self.run_result = None
        self.deferred = self.aborted = None
        self._deferred_shown = False  # its call went out in an assistant frame
        self._renamed.clear()
        self._own.clear()

    def caliban_output(self, chunk: bytes) -> list[bytes]:
        """A chunk of caliban's stdout (split anywhere) → the Claude Code frames it completed."""
        self._watch(chunk)
        frames = self.translation.feed(chunk)
        self.translation.take_rejects()  # (kept for a reject file, which the shim has not: not held)
        return self._complete(frames)

    def _watch(self, chunk: bytes) -> None:
        """Keep caliban's own init and result (their facts complete the frames), and tell of its
        tool calls (`tool_use`); caliban writes `type` first, so only those kinds of line are
        decoded here, and only they are held
        between chunks (up to the translation's line limit: past it, it skips the line too)."""
        start = 0
        while (nl := chunk.find(b"\n", start)) >= 0:
            self._hold(chunk[start:nl])
            line = b"".join(self._line) if self._held >= 0 and _watched(self._head) else b""
            self._line, self._held, self._head = [], 0, b""
            start = nl + 1
            if not line:
                continue
            frame = entry(line)
            if frame is None:
                continue
            if frame.get("subtype") == "init":
                self.caliban_init = frame
            elif frame.get("type") == "result":
                self.run_result = frame
            elif frame.get("type") == "tool_use" and self.on_tool_use is not None:
                relayed = self.on_tool_use(str(frame.get("name", "")), frame.get("input"))
                if relayed is not None:
                    self._renamed[orjson.dumps(str(frame.get("id", "")))] = orjson.dumps(relayed)
        if start < len(chunk):
            self._hold(chunk[start:])

    def _hold(self, piece: bytes) -> None:
        """A piece of the current line, kept while the line may be an init or a result;
        `_held` < 0: it is not (or is too long), and the rest of it is dropped."""
        if self._held < 0:
            return
        if len(self._head) < WATCHED:
            self._head += piece[: WATCHED - len(self._head)]
        self._line.append(piece)
        self._held += len(piece)
        if (len(self._head) == WATCHED and not _watched(self._head)) or self._held > MAX_CALIBAN_LINE:
            self._line, self._held = [], -1

    def end_run(self, status: int, why: str) -> list[bytes]:
        """caliban exited. Without a result of its own, the app still gets one (an error)."""
        frames = self.caliban_output(b"\n")  # a last line without its newline counts
        if self.run_result is None:
            subtype = "cancelled" if self.interrupted else "error"
            ended = f"was killed by {signal.Signals(-status).name}" if status < 0 else f"exited with status {status}"
            frames += self._synthetic(subtype, f"caliban {ended} without a result" + (f": {why}" if why else ""))
        return self._complete(frames)

    def refused(self, why: str) -> list[bytes]:
        """A message the shim could not give caliban: its run is this error result alone."""
        self.start_run()
        return self._complete(self._synthetic("error", why))

    def _synthetic(self, subtype: str, message: str) -> list[bytes]:
        synthetic = {"type": "result", "subtype": subtype, "session_id": self.session_id, "total_cost_usd": 0.0,
                     "turns": 0, "total_input_tokens": 0, "total_output_tokens": 0, "num_turns": 0,
                     "is_error": True, "error": message}  # fmt: skip
        return self.translation.feed(orjson.dumps(synthetic) + b"\n")

    def diagnostics(self) -> list[str]:
        return self.translation.take_diagnostics()

    def _complete(self, frames: list[bytes]) -> list[bytes]:
        for caliban_id, relayed in self._renamed.items():  # (ids are the provider's random tokens)
            frames = [f.replace(caliban_id, relayed) if caliban_id in f else f for f in frames]
        stopped_at = self.deferred or self.aborted
        if stopped_at is not None:  # (caliban's result for the call is not shown: pending, or Claude Code's own)
            pending = orjson.dumps(stopped_at["id"])
            frames = [f for f in frames if not (f.startswith(b'{"type":"user"') and pending in f and not self._made(f))]
            self._deferred_shown |= self._shown(frames, pending)
        return fitted(frames)

    def _made(self, frame: bytes) -> bool:
        return any(uid in frame for uid in self._own)

    def _shown(self, frames: list[bytes], pending: bytes) -> bool:
        """Whether an assistant frame among `frames` shows the call (by its id, or by caliban's
        for it, not renamed yet)."""
        ids = [pending, *(caliban for caliban, relayed in self._renamed.items() if relayed == pending)]
        return any(f.startswith(b'{"type":"assistant"') and any(i in f for i in ids) for f in frames)

    def complete_result(self, frame: dict[str, Any], written: list[bytes]) -> list[dict[str, Any]]:
        """The interrupted-by-user frame before an interrupted run's result; a deferred call's
        result is Claude Code's (the run was stopped for it: no error). `written`: the frames
        of this chunk before it (the call may be shown there)."""
        before: list[dict[str, Any]] = []
        stopped_at = self.deferred or self.aborted
        if stopped_at is not None:
            self._deferred_shown |= self._shown(written, orjson.dumps(stopped_at["id"]))
        if self.deferred is not None:
            frame.pop("errors", None)
            frame.update(subtype="success", is_error=False, result=frame.get("result") or "", stop_reason="tool_deferred",
                         terminal_reason="tool_deferred", deferred_tool_use=self.deferred)  # fmt: skip
            if not self._deferred_shown:  # (caliban was stopped before its turn's message: the call, as Claude Code shows it)
                before.append(self._call_frame(self.deferred))
        elif self.aborted is not None:  # Claude Code's: the call rejected, the run ended there (aborted_tools)
            call = self.aborted
            frame.update(subtype="error_during_execution", is_error=True, stop_reason="tool_use",
                         terminal_reason="aborted_tools", errors=ABORTED_ERRORS)  # fmt: skip
            frame["permission_denials"] = [*(frame.get("permission_denials") or []),
                                           {"tool_name": call["name"], "tool_use_id": call["id"], "tool_input": call["input"]}]  # fmt: skip
            frame.pop("result", None)
            if not self._deferred_shown:
                before.append(self._call_frame(call))
            before.append(self._rejected_frame(call["id"]))
            before.append(interrupted(self.session_id, for_tool=True))
        self.last_is_error = frame.get("is_error") is True
        plain = self.interrupted and self.aborted is None
        self._own += [orjson.dumps(f["uuid"]) for f in before if isinstance(f.get("uuid"), str)]
        return before + ([interrupted(self.session_id)] if plain else [])

    def _rejected_frame(self, tool_use_id: str) -> dict[str, Any]:
        block = {"type": "tool_result", "content": REJECTED, "is_error": True, "tool_use_id": tool_use_id}
        return {"type": "user", "message": {"role": "user", "content": [block]}, "parent_tool_use_id": None,
                "session_id": self.session_id, "uuid": str(uuid.uuid4()), "timestamp": now()}  # fmt: skip

    def _call_frame(self, call: dict[str, Any]) -> dict[str, Any]:
        block = {"type": "tool_use", "id": call["id"], "name": call["name"], "input": call["input"]}
        message = {"id": f"msg_{uuid.uuid4().hex[:24]}", "type": "message", "role": "assistant",
                   "model": str(self.caliban_init.get("model", "")).split("/")[-1], "content": [block],
                   "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 0, "output_tokens": 0},
                   "context_management": None}  # fmt: skip
        return {"type": "assistant", "message": message, "parent_tool_use_id": None, "session_id": self.session_id,
                "uuid": str(uuid.uuid4()), "request_id": None}  # fmt: skip

    def complete_init(self, frame: dict[str, Any]) -> None:
        """Claude Code's init, with what caliban's own init says about the installation."""
        got = self.caliban_init
        cwd = got.get("cwd")
        cwd = self.place.path(cwd) if isinstance(cwd, str) and cwd else self.place.cwd
        frame.update(cwd=cwd, original_cwd=cwd, permissionMode=self.mode, claude_code_version=CLI_VERSION,
                     apiKeySource=api_key_source(self.place.env))  # fmt: skip
        if isinstance(got.get("tools"), list):
            frame["tools"] = got["tools"]
        frame["mcp_servers"] = self.mcp_servers() + (self.sdk_servers() if self.sdk_servers is not None else [])

    def mcp_servers(self) -> list[dict[str, Any]]:
        """caliban's MCP servers as Claude Code lists them: name and status."""
        return mcp_servers(self.caliban_init.get("mcp_servers"))


def _watched(head: bytes) -> bool:
    return b'"system"' in head or b'"result"' in head or b'"tool_use"' in head
