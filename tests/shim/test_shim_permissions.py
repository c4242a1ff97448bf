"""permissions/gate.py over the real channel, its app in this process (protocol/transport.py's
`Memory`): the control requests the app is sent, its answers, and the `Decision` each call gets.
A decision that ends the run settles every later call of it as denied, without asking the app."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import orjson
import pytest

from translator.shim.permissions.gate import DEFERRED, Decision, Gate, ToolCall
from translator.shim.permissions.hooks import Hooks
from translator.shim.permissions.policy import Policy
from translator.shim.place import Place
from translator.shim.protocol.channel import INPUT_ENDED, Channel, Inbound
from translator.shim.protocol.initialize import HookMatcher
from translator.shim.protocol.transport import Memory

LS = ToolCall("Bash", {"command": "ls"}, "toolu_1")
RM = ToolCall("Bash", {"command": "rm -rf build"}, "toolu_2")


class App:
    """The app's end: each frame the shim writes, and an answer to a request."""

    def __init__(self, memory: Memory) -> None:
        self.memory = memory

    def frame(self) -> dict[str, Any]:
        frame: dict[str, Any] = orjson.loads(self.memory.line())
        return frame

    def request(self) -> dict[str, Any]:
        """The next control request (the session's state frames around it skipped)."""
        while (frame := self.frame())["type"] != "control_request":
            assert frame["subtype"] == "session_state_changed"
        return frame

    def answer(self, request: dict[str, Any], body: dict[str, Any]) -> None:
        response = {"subtype": "success", "request_id": request["request_id"], "response": body}
        self.memory.send(orjson.dumps({"type": "control_response", "response": response}) + b"\n")


@pytest.fixture
def memory() -> Iterator[Memory]:
    memory = Memory()
    yield memory
    memory.end()


@pytest.fixture
def app(memory: Memory) -> App:
    return App(memory)


@pytest.fixture
def pool() -> Iterator[ThreadPoolExecutor]:
    with ThreadPoolExecutor(2) as pool:
        yield pool


def gate_on(
    memory: Memory,
    hooks: Hooks | None = None,
    allowed: str | None = None,
    can_use_tool: bool = True,
    disallowed: str | None = None,
) -> Gate:
    """The gate over a channel whose input's end is told to it, as the session tells its gates."""
    gates: list[Gate] = []

    def inbound(message: Inbound) -> None:
        if message is None:
            gates[0].input_ended()

    channel = Channel(lambda rid, request: None, inbound, transport=memory)
    gate = Gate(channel, Policy(allowed, disallowed), can_use_tool, hooks or Hooks({}), lambda said: None, "S",
                place=Place({}, "/"))  # fmt: skip
    gates.append(gate)
    threading.Thread(target=channel.read_stdin, daemon=True).start()
    gate.begin("default", "P")
    return gate


def decided(future: Future[Decision]) -> Decision:
    return future.result(timeout=10)


def test_can_use_tool_is_asked_and_its_allow_runs_the_call(memory: Memory, app: App, pool: ThreadPoolExecutor) -> None:
    gate = gate_on(memory)
    pending = pool.submit(gate.decide, LS)
    request = app.request()
    assert request["request"]["subtype"] == "can_use_tool"
    assert (request["request"]["tool_name"], request["request"]["input"], request["request"]["tool_use_id"]) == (
        "Bash", {"command": "ls"}, "toolu_1")  # fmt: skip
    app.answer(request, {"behavior": "allow", "updatedInput": {"command": "ls"}})
    assert decided(pending) == Decision("allow", input={"command": "ls"})
    assert decided(pending).runs and not decided(pending).ends_run


def test_a_deny_with_interrupt_ends_the_run_and_every_later_call_is_denied_unasked(
    memory: Memory, app: App, pool: ThreadPoolExecutor
) -> None:
    gate = gate_on(memory)
    pending = pool.submit(gate.decide, LS)
    app.answer(app.request(), {"behavior": "deny", "message": "no", "interrupt": True})
    first = decided(pending)
    assert first == Decision("interrupt", "no") and first.ends_run and not first.runs
    later = gate.decide(RM)  # (not asked: the app would block this thread otherwise)
    assert later == Decision("deny", "the user interrupted this run") and not later.runs
    gate.begin("default", "P2")  # the next run asks again
    pending = pool.submit(gate.decide, RM)
    app.answer(app.request(), {"behavior": "allow"})
    assert decided(pending).runs


def test_a_plain_deny_leaves_the_run_going(memory: Memory, app: App, pool: ThreadPoolExecutor) -> None:
    gate = gate_on(memory, allowed="Bash(rm:*)")
    pending = pool.submit(gate.decide, LS)
    app.answer(app.request(), {"behavior": "deny", "message": "not that one"})
    assert decided(pending) == Decision("deny", "not that one")
    assert gate.decide(RM) == Decision("allow", input={"command": "rm -rf build"})  # (an allow rule: not asked)


def test_a_deferring_hook_stops_the_run_with_the_call_pending(memory: Memory, app: App, pool: ThreadPoolExecutor) -> None:
    hooks = Hooks({"PreToolUse": [HookMatcher("Bash", ("hook_0",))]})
    gate = gate_on(memory, hooks, allowed="Bash")
    pending = pool.submit(gate.decide, LS)
    request = app.request()
    assert (request["request"]["subtype"], request["request"]["callback_id"]) == ("hook_callback", "hook_0")
    assert request["request"]["input"]["tool_input"] == {"command": "ls"}
    app.answer(request, {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "defer"}})
    assert decided(pending) == Decision("defer", DEFERRED, {"command": "ls"})
    assert gate.decide(RM) == Decision("deny", "the turn stopped at a deferred tool call")  # no hook asked


def test_a_hook_s_continue_false_runs_the_call_then_ends_the_run(memory: Memory, app: App, pool: ThreadPoolExecutor) -> None:
    gate = gate_on(memory, Hooks({"PreToolUse": [HookMatcher(None, ("hook_0",))]}), allowed="Bash")
    pending = pool.submit(gate.decide, LS)
    app.answer(app.request(), {"continue": False, "stopReason": "enough"})
    assert decided(pending) == Decision("stop", "enough", {"command": "ls"}) and decided(pending).runs
    assert gate.decide(RM) == Decision("deny", "a hook stopped this run")


def test_the_run_ended_by_the_backend_denies_what_follows(memory: Memory) -> None:
    gate = gate_on(memory, allowed="Bash")
    assert gate.decide(LS).runs
    gate.end(Decision("interrupt", "the user interrupted this run"))
    assert gate.decide(RM) == Decision("deny", "the user interrupted this run")


def test_the_app_s_input_ending_denies_a_pending_call(memory: Memory, app: App, pool: ThreadPoolExecutor) -> None:
    gate = gate_on(memory)
    pending = pool.submit(gate.decide, LS)
    app.request()
    memory.end()
    decision = decided(pending)
    assert not decision.runs and decision.reason == "the app closed its input: no answer can come"


def input_closed(gate: Gate) -> None:
    deadline = time.monotonic() + 10
    while not gate.app.input_ended and time.monotonic() < deadline:
        time.sleep(0.01)
    assert gate.app.input_ended


def test_the_app_s_input_ending_ends_the_run_and_a_call_the_rules_allow_is_denied(memory: Memory) -> None:
    """The rules allow Bash, but the app that gates its calls is gone: no call runs behind its
    back, in this run or a later one."""
    gate = gate_on(memory, allowed="Bash")
    assert gate.decide(LS).runs
    memory.end()
    input_closed(gate)
    assert gate.decide(RM) == Decision("deny", INPUT_ENDED)
    gate.begin("default", "P2")
    assert gate.decide(LS) == Decision("deny", INPUT_ENDED)


def test_a_hook_pending_as_the_input_ends_lets_nothing_through(memory: Memory, app: App, pool: ThreadPoolExecutor) -> None:
    """The hook that could deny the call cannot answer: the call is denied, not left to the rules."""
    gate = gate_on(memory, Hooks({"PreToolUse": [HookMatcher("Bash", ("hook_0",))]}), allowed="Bash")
    pending = pool.submit(gate.decide, RM)
    assert app.request()["request"]["subtype"] == "hook_callback"
    memory.end()
    assert decided(pending) == Decision("deny", INPUT_ENDED)
    assert gate.decide(LS) == Decision("deny", INPUT_ENDED)


def test_a_gate_that_asks_the_app_nothing_keeps_to_its_rules_after_the_input_ends(memory: Memory) -> None:
    gate = gate_on(memory, allowed="Bash", can_use_tool=False)
    memory.end()
    input_closed(gate)
    assert gate.decide(RM) == Decision("allow", input={"command": "rm -rf build"})


ALLOW = {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow"}}


@pytest.mark.parametrize("mode", ["default", "bypassPermissions"])
def test_a_hook_s_allow_does_not_skip_a_deny_rule(memory: Memory, app: App, pool: ThreadPoolExecutor, mode: str) -> None:
    """The Agent SDK's order: a hook's allow skips the ask, never the deny rules (disallowedTools)."""
    gate = gate_on(memory, Hooks({"PreToolUse": [HookMatcher(None, ("hook_0",))]}), disallowed="Bash(rm:*)")
    gate.begin(mode, "P")
    pending = pool.submit(gate.decide, RM)
    app.answer(app.request(), ALLOW)
    assert decided(pending) == Decision("deny", "Permission to use Bash has been denied.")
    pending = pool.submit(gate.decide, LS)  # (not a denied one: the hook's allow runs it, the app not asked)
    app.answer(app.request(), ALLOW)
    assert decided(pending) == Decision("allow", input={"command": "ls"})


@pytest.mark.parametrize("answer", [{}, ALLOW])
def test_a_run_ended_while_its_hook_is_asked_denies_the_call(
    memory: Memory, app: App, pool: ThreadPoolExecutor, answer: dict[str, Any]
) -> None:
    """An interrupt while a PreToolUse hook is asked: neither the allow rule nor the hook's late
    allow runs the call (the gate checks the run's end itself, for the drive backend too)."""
    gate = gate_on(memory, Hooks({"PreToolUse": [HookMatcher(None, ("hook_0",))]}), allowed="Bash")
    pending = pool.submit(gate.decide, LS)
    request = app.request()
    gate.end(Decision("interrupt", "the user interrupted this run"))
    app.answer(request, answer)
    assert decided(pending) == Decision("deny", "the user interrupted this run")


def test_a_hook_that_blocks_on_failure_and_times_out_denies_its_call(memory: Memory, app: App) -> None:
    """onFailure "block": the hook's silence fails closed; the allow rule does not run the call."""
    gate = gate_on(memory, Hooks({"PreToolUse": [HookMatcher(None, ("hook_0",), 0.2, "block")]}), allowed="Bash")
    decision = gate.decide(LS)
    assert decision == Decision("deny", "a PreToolUse hook that blocks on failure failed: no answer within 0.2 s")
    gate = gate_on(memory, Hooks({"PreToolUse": [HookMatcher(None, ("hook_1",), 0.2)]}), allowed="Bash")
    assert gate.decide(LS).runs  # (not marked: it decides nothing, as Claude Code's)


def test_calls_side_by_side_wait_for_the_app_on_no_thread_of_their_own(memory: Memory, app: App) -> None:
    """`settle` asks and returns: fifty calls wait for `can_use_tool` with no thread more than
    one, each decided as its answer is read (the relay's calls are settled so)."""
    gate = gate_on(memory)
    threads = threading.active_count()
    decided: list[Decision] = []
    for n in range(50):
        gate.settle(ToolCall("Bash", {"command": f"ls {n}"}, f"toolu_{n}"), decided.append)
    requests = [app.request() for _ in range(50)]
    assert threading.active_count() == threads and decided == []
    for request in reversed(requests):
        app.answer(request, {"behavior": "allow"} if request["request"]["input"]["command"] != "ls 7" else
                   {"behavior": "deny", "message": "not 7"})  # fmt: skip
    deadline = time.monotonic() + 10
    while len(decided) < 50 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert decided[0] == Decision("allow", input={"command": "ls 49"}) and len(decided) == 50
    assert [d for d in decided if not d.runs] == [Decision("deny", "not 7")]


def test_calls_whose_hooks_time_out_side_by_side_are_denied_by_one_timer_thread(memory: Memory, app: App) -> None:
    """Twenty calls' hooks that block on failure, none answered: each is cancelled at its
    timeout and its call denied, all by the channel's one timer thread (none a call)."""
    gate = gate_on(memory, Hooks({"PreToolUse": [HookMatcher(None, ("hook_0",), 0.3, "block")]}), allowed="Bash")
    threads = threading.active_count()
    decided: list[Decision] = []
    for n in range(20):
        gate.settle(ToolCall("Bash", {"command": f"ls {n}"}, f"toolu_{n}"), decided.append)
    asked = [app.request()["request_id"] for _ in range(20)]
    cancelled = [app.frame() for _ in range(20)]
    assert [f["type"] for f in cancelled] == ["control_cancel_request"] * 20
    assert sorted(f["request_id"] for f in cancelled) == sorted(asked)
    deadline = time.monotonic() + 10
    while len(decided) < 20 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert decided == [Decision("deny", "a PreToolUse hook that blocks on failure failed: no answer within 0.3 s")] * 20
    assert threading.active_count() <= threads + 1
