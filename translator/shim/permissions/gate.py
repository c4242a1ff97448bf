"""Whether a tool call runs, for both backends: a prompt caliban raises on the drive backend (a
poll's `permission_request`) and a relayed call of the app's own tools on `caliban -p`
(tools/servers.py) are settled here, as Claude Code settles one: PreToolUse hooks first (a deny
or a decision not known denies, a defer stops the turn with the tool pending, an allow skips the
rest, but never a deny rule), then the session's mode and rules (policy.py), then the app's
`can_use_tool`.

The answer is a value, `Decision`, handed to a callback (`settle`): the app is asked without a
thread waiting on it, and the decision is made by the thread that reads its answer, so calls
that wait side by side cost nothing each (`decide` is the blocking form, for the drive's poll,
whose worker has nothing else to do). What the backend does with the call and with its run. Once a
decision has ended the run (a defer, a deny with `interrupt`, a hook's `continue: false`, or
the run's end told by `end`), every later call of that run is denied with its reason: a run
that stops settles every call it still makes, failing closed. The app's input ending ends the
run of a gate that asks the app, and every later one (`input_ended`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from translator.shim.permissions import outputs as outputs_
from translator.shim.permissions.hooks import Hooks, pre_tool_verdict
from translator.shim.permissions.policy import Policy
from translator.shim.place import Place
from translator.shim.protocol import frames
from translator.shim.protocol.channel import INPUT_ENDED, Channel, Reply, waited

DEFERRED = "deferred by a PreToolUse hook: the turn stops here, the call pending"
INTERRUPTED = "the user interrupted this run"
# Claude Code's tool_result for a call the user rejected and stopped the run at (a deny with
# `interrupt: true`; cc-2.1.333/sdk-ts/can_use_tool_deny_interrupt): the model is not shown the app's message.
REJECTED = ("The user doesn't want to proceed with this tool use. The tool use was rejected (eg. if it was a file edit, "
            "the new_string was NOT written to the file). STOP what you are doing and wait for the user to tell you how "
            "to proceed.")  # fmt: skip
PAST_DUE = "caliban's tool timeout passed: caliban reported the call failed"
DENIED_AFTER = {"defer": "the turn stopped at a deferred tool call", "stop": "a hook stopped this run"}
CHANGED_INPUT = "caliban cannot run a tool with an input changed by the app (updatedInput); denied instead"
# Why a tool hook's context (or a PostToolUse block) cannot reach the model, which Claude Code
# shows it after the tool's result (caliban-ai/caliban f33a2d0, read there):
BEYOND_DRIVE = ("caliban's drive surface cannot add to a run between a tool's result and the model's next "
                "request (caliban_permit carries an allow or a deny's reason; caliban_send_input is taken only "
                "once the model's turn has ended)")  # fmt: skip
BEYOND_PRINT = ("caliban -p takes no input once it runs (it reads its prompt to the end first), and the relayed "
                "call's only answer is the tool's result, which Claude Code keeps apart from hook context")  # fmt: skip

# allow: the call runs. deny: it does not, the run goes on. interrupt: it does not and the run
# ends (a deny with `interrupt: true`, the user's interrupt). defer: it does not and the run
# stops with it pending (a PreToolUse hook's defer). stop: it runs, then the run ends (a hook's
# `continue: false`; Claude Code's "the tool still runs").
Verdict = Literal["allow", "deny", "interrupt", "defer", "stop"]


@dataclass(frozen=True, slots=True)
class ToolCall:
    name: str
    input: Any
    id: str  # the model's tool_use_id
    due: float | None = None  # (monotonic) when caliban gives up on the call: the app's answers must come by then


@dataclass(frozen=True, slots=True)
class Decision:
    verdict: Verdict
    reason: str = ""  # what the model is shown for a call that does not run; a stop's stopReason
    input: Any = None  # the input a call that runs runs with

    @property
    def runs(self) -> bool:
        return self.verdict in ("allow", "stop")

    @property
    def ends_run(self) -> bool:
        """The run stops here: every pending and later call of it is to be settled as denied."""
        return self.verdict in ("interrupt", "defer", "stop")


Then = Callable[[Decision], None]
Heard = Callable[[list[dict[str, Any]]], None]  # a hook event's outputs


class Gate:
    def __init__(self, app: Channel, policy: Policy, can_use_tool: bool, hooks: Hooks,
                 warn: Callable[[str], None], session_id: str = "", beyond: str = BEYOND_DRIVE, *,
                 place: Place) -> None:  # fmt: skip
        """`place`: the session's (its folder, the hooks' `cwd`)."""
        self.app, self.policy, self.can_use_tool, self.hooks, self.warn = app, policy, can_use_tool, hooks, warn
        self.place = place
        self.session_id = session_id
        self.beyond = beyond  # why the outputs beyond a decision do not reach the model, on this backend
        self._unreached: set[tuple[str, str]] = set()  # the hook outputs already said to be beyond caliban
        self.mode = "default"
        self.prompt_id = ""
        self.ended: Decision | None = None  # what ended the run: every later call of it is denied
        self._closed: Decision | None = None  # the app's input ended: what ends every run from now on

    def begin(self, mode: str, prompt_id: str) -> None:
        """A new run: nothing has ended it yet."""
        self.mode, self.prompt_id, self.ended = mode, prompt_id, self._closed

    def end(self, decision: Decision) -> None:
        """The run stopped (the first decision that ends it stands): later calls are denied."""
        if self.ended is None:
            self.ended = decision

    def input_ended(self) -> None:
        """The app's input ended. A gate that asks the app (`can_use_tool`, PreToolUse hooks)
        cannot any more: its run is ended, and each later one as it begins, so that no call is
        settled by the rules alone once the app's own say (a hook's deny) cannot come."""
        if self.can_use_tool or self.hooks.callbacks("PreToolUse"):
            self._closed = Decision("interrupt", INPUT_ENDED)
            self.end(self._closed)

    def still(self, decision: Decision) -> Decision:
        """`decision` once more, as its call is about to run: a run ended meanwhile by another
        (an interrupt, a parallel call's defer or deny with interrupt) denies it, so that an
        allow that came late never runs the tool."""
        if not decision.runs or self.ended is None or self.ended is decision:
            return decision
        return _denied_after(self.ended)

    def settle(self, call: ToolCall, then: Then) -> None:
        """What is done with the call, and with its run: `then(decision)`, called once, here or
        from the thread that reads the app's last answer about it."""
        if self.ended is not None:
            then(_denied_after(self.ended))
            return

        def decided(decision: Decision) -> None:
            decision = self.still(decision)  # (ended while it was decided: the app's input, a parallel call)
            if decision.ends_run:
                self.end(decision)
            then(decision)

        self._decide(call, decided)

    def decide(self, call: ToolCall) -> Decision:
        """`settle`'s decision, waited for on this thread."""

        def start(then: Then) -> None:
            self.settle(call, then)

        return waited(start)

    def _decide(self, call: ToolCall, then: Then) -> None:
        """A hook's `continue: false` ends the run after a call that runs; one that does not
        run ends it there, as an interrupt."""

        def heard(outputs: list[dict[str, Any]]) -> None:
            stop = outputs_.stop_reason(outputs)

            def verdict(decision: Decision) -> None:
                if stop is None or decision.ends_run:
                    then(decision)
                else:
                    then(Decision("stop", stop, decision.input) if decision.runs else Decision("interrupt", decision.reason))

            self._verdict(call, outputs, verdict)

        fields = {"tool_name": call.name, "tool_input": call.input, "tool_use_id": call.id}
        self.hooks_then("PreToolUse", fields, heard, call.name, call.id, call.due)

    def _verdict(self, call: ToolCall, outputs: list[dict[str, Any]], then: Then) -> None:
        verdict, why = pre_tool_verdict(outputs)
        if verdict == "deny":
            then(Decision("deny", why or "denied by a PreToolUse hook"))
        elif verdict == "unknown":
            self.warn(f"{call.name}: a PreToolUse hook's permissionDecision {why} is not one caliban-claude knows; denied")
            then(Decision("deny", f"denied: a PreToolUse hook answered the unknown permissionDecision {why}"))
        elif verdict == "defer":  # Claude Code's: the turn stops here, the tool pending (never run)
            then(Decision("defer", DEFERRED, call.input))
        elif self.policy.denies(call.name, call.input):  # (a deny rule wins over a hook's allow or ask, as the SDK's)
            then(Decision("deny", f"Permission to use {call.name} has been denied."))
        elif verdict == "allow":
            then(Decision("allow", input=call.input))
        else:
            self._ask(call, verdict == "ask", then)

    def _ask(self, call: ToolCall, asked: bool, then: Then) -> None:
        """The mode and rules (unless a hook said ask), then the app's `can_use_tool`."""
        name, tool_input = call.name, call.input
        decision = "ask" if asked else self.policy.decide(self.mode, name, tool_input)
        if decision != "ask":
            then(Decision("allow", input=tool_input) if decision == "allow" else
                 Decision("deny", f"Permission to use {name} has been denied."))  # fmt: skip
        elif not self.can_use_tool:
            then(Decision("deny", f"Claude requested permissions to use {name}, but you haven't granted it yet."))
        elif self.ended is not None:  # (ended while its hooks were asked: the app is not asked about a call of a stopped run)
            then(_denied_after(self.ended))
        elif within(None, call.due) == 0:  # (its hooks took caliban's whole tool timeout: not asked about now)
            then(Decision("deny", PAST_DUE))
        else:
            self.app_state("requires_action")

            def answered(reply: Reply) -> None:
                self.app_state("running")
                then(self._answered(name, tool_input, reply))

            self.app.request(frames.can_use_tool(name, tool_input, call.id), answered, within(None, call.due))

    def _answered(self, name: str, tool_input: Any, reply: Reply) -> Decision:
        """The app's `can_use_tool` answer as a decision: its error or none denies; a cancel
        (the run's interrupt) interrupts."""
        answer = reply.body
        if answer is None:
            return Decision("deny", reply.error) if reply.error else Decision("interrupt", INTERRUPTED)
        if answer.get("behavior") == "allow":
            updated = answer.get("updatedInput")
            if updated is not None and updated != tool_input:
                self.warn(f"{name}: {CHANGED_INPUT}")
                return Decision("deny", CHANGED_INPUT)
            return Decision("allow", input=tool_input)
        reason = str(answer.get("message") or "denied by the user")
        return Decision("interrupt" if answer.get("interrupt") is True else "deny", reason)

    def app_state(self, state: str) -> None:
        self.app.notify(frames.session_state(state, self.session_id))

    def post_tool(self, name: str, tool_input: Any, tid: str, end: dict[str, Any]) -> None:
        blocks = end.get("content")
        text = "".join(b.get("text", "") for b in blocks if isinstance(b, dict)) if isinstance(blocks, list) else ""
        fields = {"tool_name": name, "tool_input": tool_input, "tool_response": text, "tool_use_id": tid}
        self.hook("PostToolUse", fields, name, tid)

    def hook(self, event: str, fields: dict[str, Any], tool: str | None = None, tid: str | None = None) -> list[dict[str, Any]]:
        """`hooks_then`'s outputs, waited for on this thread."""

        def start(then: Heard) -> None:
            self.hooks_then(event, fields, then, tool, tid)

        return waited(start)

    def hooks_then(self, event: str, fields: dict[str, Any], then: Heard, tool: str | None = None,
                   tid: str | None = None, due: float | None = None) -> None:  # fmt: skip
        """Call the app's callbacks for `event` in turn, each once the last has answered (by
        `due`, a tool call's): `then(outputs)`."""
        base = {"session_id": self.session_id, "transcript_path": "", "cwd": self.place.cwd, "prompt_id": self.prompt_id,
                "permission_mode": self.mode}  # fmt: skip
        callbacks = self.hooks.callbacks(event, tool)
        outputs: list[dict[str, Any]] = []

        def ask(n: int) -> None:
            if n == len(callbacks):
                self.said(event, tool, outputs)
                then(outputs)
                return
            callback, timeout = callbacks[n]

            def heard(reply: Reply) -> None:
                self._heard(event, callback, reply, outputs)
                ask(n + 1)

            if within(timeout, due) == 0:  # (caliban gave up on the tool call meanwhile: not asked)
                heard(Reply(error=PAST_DUE, unanswered=True))
            else:
                self.app.request(frames.hook_callback(callback, event, base, fields, tid), heard, within(timeout, due))

        ask(0)

    def _heard(self, event: str, callback: str, reply: Reply, outputs: list[dict[str, Any]]) -> None:
        """One callback's reply into `outputs`. Claude Code's hook that fails or times out
        decides nothing, and what follows goes on; one that blocks on failure denies its tool."""
        failed = reply.error if reply.body is None and (reply.unanswered or self.hooks.blocks(callback)) else ""
        if reply.body is not None:
            outputs.append(reply.body)
        elif failed and event == "PreToolUse" and self.hooks.blocks(callback):  # (onFailure "block": fails closed)
            self.warn(f"{event} hook {callback}: {failed}; it blocks on failure: its tool is denied")
            outputs.append({"decision": "block", "reason": f"a PreToolUse hook that blocks on failure failed: {failed}"})
        elif failed:
            self.warn(f"{event} hook {callback}: {failed}; it decides nothing")

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


def within(timeout: float | None, due: float | None) -> float | None:
    """A request's timeout: its own, or less, what is left until `due` (a monotonic time)."""
    if due is None:
        return timeout
    left = max(0.0, due - time.monotonic())
    return left if timeout is None else min(timeout, left)


def _denied_after(ended: Decision) -> Decision:
    """A call of a run that `ended` ended: denied, saying why."""
    return Decision("deny", INPUT_ENDED if ended.reason == INPUT_ENDED else DENIED_AFTER.get(ended.verdict, INTERRUPTED))
