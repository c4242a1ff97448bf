"""The permission bridge: a prompt caliban raises (a poll's `permission_request`) settled as
Claude Code settles one: PreToolUse hooks first (a deny or a decision not known denies, a defer
stops the turn with the tool pending, an allow skips the rest), then
the session's mode and rules (policy.py), then the app's `can_use_tool`. Each prompt is asked
once while its call is open (by `tool_use_id`: a poll repeats it until it is answered; the
call's ToolCallEnd closes it, so a later call the provider gives the same id is asked anew).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from translator.shim.permissions import outputs as outputs_
from translator.shim.permissions.hooks import Hooks, pre_tool_verdict
from translator.shim.permissions.policy import Policy
from translator.shim.protocol import frames
from translator.shim.protocol.channel import Channel, Unanswered

DEFERRED = "deferred by a PreToolUse hook: the turn stops here, the call pending"
CHANGED_INPUT = "caliban cannot run a tool with an input changed by the app (updatedInput); denied instead"
# Why a tool hook's context (or a PostToolUse block) cannot reach the model, which Claude Code
# shows it after the tool's result (caliban-ai/caliban f33a2d0, read there):
BEYOND_DRIVE = ("caliban's drive surface cannot add to a run between a tool's result and the model's next "
                "request (caliban_permit carries an allow or a deny's reason; caliban_send_input is taken only "
                "once the model's turn has ended)")  # fmt: skip
BEYOND_PRINT = ("caliban -p takes no input once it runs (it reads its prompt to the end first), and the relayed "
                "call's only answer is the tool's result, which Claude Code keeps apart from hook context")  # fmt: skip


class Gate:
    def __init__(self, app: Channel, policy: Policy, can_use_tool: bool, hooks: Hooks,
                 warn: Callable[[str], None]) -> None:  # fmt: skip
        self.app, self.policy, self.can_use_tool, self.hooks, self.warn = app, policy, can_use_tool, hooks, warn
        self.asked: set[str] = set()
        self.denials: list[dict[str, Any]] = []
        self.interrupt = False  # the last deny asked to end the run
        self.deferred: dict[str, Any] | None = None  # the tool a PreToolUse hook deferred: {id, name, input}
        self.stop: str | None = None  # a PreToolUse hook's continue:false: its stopReason (the run ends after the tool)
        self._unreached: set[tuple[str, str]] = set()  # the hook outputs already said to be beyond caliban
        self.beyond = BEYOND_DRIVE  # why the outputs beyond a decision do not reach the model, on this backend
        self.mode = "default"
        self.prompt_id = ""
        self.session_id = ""

    def reset(self) -> None:
        """A new server and run: its prompts are new (caliban's tool ids are the provider's)."""
        self.asked.clear()

    def begin(self, mode: str, prompt_id: str) -> None:
        self.mode, self.prompt_id, self.denials, self.interrupt, self.deferred = mode, prompt_id, [], False, None
        self.stop = None

    def settled(self, tid: str) -> None:
        """The call's ToolCallEnd: its prompt is over. A provider may give a later call the same
        id (ids are the provider's): that call's prompt is a new one, asked again."""
        self.asked.discard(tid)

    def new(self, ask: dict[str, Any]) -> bool:
        tid = str(ask.get("tool_use_id", ""))
        if tid in self.asked:
            return False
        self.asked.add(tid)
        return True

    def decide(self, ask: dict[str, Any]) -> tuple[bool, str]:
        """Allow, or deny with the reason the model is shown."""
        name, tool_input, tid = str(ask.get("tool_name", "")), ask.get("input"), str(ask.get("tool_use_id", ""))
        allow, reason = self._decide(name, tool_input, tid)
        if not allow and (self.deferred is None or self.deferred["id"] != tid):
            self.denials.append({"tool_name": name, "tool_use_id": tid, "tool_input": tool_input})
        return allow, reason

    def _decide(self, name: str, tool_input: Any, tid: str) -> tuple[bool, str]:
        if self.interrupt:
            return False, "the turn stopped at a deferred tool call" if self.deferred else "the user interrupted this run"
        outputs = self.hook("PreToolUse", {"tool_name": name, "tool_input": tool_input, "tool_use_id": tid}, name, tid)
        verdict, why = pre_tool_verdict(outputs)
        if self.stop is None:
            self.stop = outputs_.stop_reason(outputs)
        if verdict == "deny":
            return False, why or "denied by a PreToolUse hook"
        if verdict == "unknown":
            self.warn(f"{name}: a PreToolUse hook's permissionDecision {why} is not one caliban-claude knows; denied")
            return False, f"denied: a PreToolUse hook answered the unknown permissionDecision {why}"
        if verdict == "defer":  # Claude Code's: the turn stops here, the tool pending (never run)
            self.deferred, self.interrupt = {"id": tid, "name": name, "input": tool_input}, True
            return False, DEFERRED
        if verdict == "allow":
            return True, ""
        decision = "ask" if verdict == "ask" else self.policy.decide(self.mode, name, tool_input)
        if decision != "ask":
            return decision == "allow", f"Permission to use {name} has been denied."
        if not self.can_use_tool:
            return False, f"Claude requested permissions to use {name}, but you haven't granted it yet."
        self.app_state("requires_action")
        try:
            answer = self.app.ask(frames.can_use_tool(name, tool_input, tid))
        except Unanswered as exc:
            return False, str(exc)
        finally:
            self.app_state("running")
        if answer is None:
            errors = self.app.errors
            return False, errors.pop() if errors else "the user interrupted this run"
        if answer.get("behavior") == "allow":
            updated = answer.get("updatedInput")
            if updated is not None and updated != tool_input:
                self.warn(f"{name}: {CHANGED_INPUT}")
                return False, CHANGED_INPUT
            return True, ""
        self.interrupt = answer.get("interrupt") is True
        return False, str(answer.get("message") or "denied by the user")

    def app_state(self, state: str) -> None:
        self.app.notify(frames.session_state(state, self.session_id))

    def post_tool(self, name: str, tool_input: Any, tid: str, end: dict[str, Any]) -> None:
        blocks = end.get("content")
        text = "".join(b.get("text", "") for b in blocks if isinstance(b, dict)) if isinstance(blocks, list) else ""
        fields = {"tool_name": name, "tool_input": tool_input, "tool_response": text, "tool_use_id": tid}
        self.hook("PostToolUse", fields, name, tid)

    def hook(self, event: str, fields: dict[str, Any], tool: str | None = None, tid: str | None = None) -> list[dict[str, Any]]:
        """Call the app's callbacks for `event` in turn: their outputs."""
        base = {"session_id": self.session_id, "transcript_path": "", "cwd": os.getcwd(), "prompt_id": self.prompt_id,
                "permission_mode": self.mode}  # fmt: skip
        outputs = []
        for callback, timeout in self.hooks.callbacks(event, tool):
            try:
                answer = self.app.ask(frames.hook_callback(callback, event, base, fields, tid), timeout)
            except Unanswered as exc:  # (Claude Code's hook that fails or times out: no decision, what follows goes on)
                self.warn(f"{event} hook {callback}: {exc}; it decides nothing")
                continue
            if answer is not None:
                outputs.append(answer)
        self.said(event, tool, outputs)
        return outputs

    def said(self, event: str, tool: str | None, outputs: list[dict[str, Any]]) -> None:
        """What the outputs say beyond a decision: `systemMessage` to the app, as Claude Code
        shows it; the model's context of a tool's hook caliban cannot take, said once."""
        label = f"{event}:{tool}" if tool else event
        for message in outputs_.system_messages(outputs):
            self.app.notify(outputs_.informational(f"{label} says: {message}", "notice", self.session_id))
        for kind in ("additionalContext", "PostToolUse block") if event in ("PreToolUse", "PostToolUse") else ():
            present = outputs_.contexts(outputs) if kind == "additionalContext" else [
                o for o in outputs if event == "PostToolUse" and o.get("decision") == "block"]  # fmt: skip
            if present and (event, kind) not in self._unreached:
                self._unreached.add((event, kind))
                self.warn(f"{event} hook {kind}: {self.beyond}; it does not reach the model")
