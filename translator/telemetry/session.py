"""One input stream as one Claude Code session: its runs' moves (the observer hook's) turned
into Claude Code's metrics, log events and spans, each timed by the run's clock.

caliban's turn ends after its tools have run (the tool results are part of the turn), where
Claude Code's request ends before them: the model's part of a turn ends at its first tool call
(or at the turn's end without one), and that is when `api_request`, `assistant_response` and
the `llm_request` span are timed; the turn's tool events are written after them, in Claude
Code's order.
"""

from __future__ import annotations

import hashlib
import itertools
import threading
import time
import uuid
from collections.abc import Iterable, Iterator
from typing import Any

import msgspec
from opentelemetry import trace
from opentelemetry._logs import Logger
from opentelemetry.context import Context
from opentelemetry.metrics import CallbackOptions, Meter, Observation
from opentelemetry.trace import Span, Tracer

from translator.encoders import RunSummary
from translator.encoders.provider_errors import api_error
from translator.model import ToolCallEnd, ToolCallStart, TurnEnd, TurnStart
from translator.telemetry import names as N
from translator.telemetry.settings import Settings
from translator.transcripts.lines import prompt_text


def _ns(t: float) -> int:
    return int(t * 1e9)


def _ms(seconds: float) -> int:
    return max(0, round(seconds * 1000))


def _iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t * 1000) % 1000:03d}Z"


def user_id() -> str:
    """A stable, anonymous id of who runs the translator (Claude Code's is 64 hex too)."""
    import getpass
    import socket

    try:
        who = getpass.getuser()
    except (KeyError, OSError):
        who = "?"
    return hashlib.sha256(f"caliban:{who}@{socket.gethostname()}".encode()).hexdigest()


Attributes = tuple[tuple[str, Any], ...]
Key = tuple[str, Attributes]  # a counter's name and one of its attribute sets
HAND_OFF = "translator.telemetry.hand_off"  # the collection's hook (Instruments), never exported


class Instruments:
    """What every session of the process shares: the counters, the event logger, the tracer,
    and the interactions' numbers.

    The counters are fed plain numbers (`add`): the sums owed to each attribute set, handed to
    the SDK only when its reader collects (`hand_off`), one `Counter.add` each; a `Counter.add`
    costs ~70 us (its attributes hashed and looked up each call), a hot path's sum a dict's.
    The hand-off is the callback of an observable counter that observes nothing (so no data
    point of its own): the SDK calls it at every collection (each interval, a flush, the exit's
    last export, a scrape), before it reads the counters (a reader's `collect` is final)."""

    def __init__(self, meter: Meter | None, logger: Logger | None, tracer: Tracer | None, settings: Settings) -> None:
        self.settings = settings
        self.logger, self.tracer = logger, tracer
        self.counters = {} if meter is None else {
            name: meter.create_counter(name, unit=unit, description=description)
            for name, (unit, description) in N.METRICS.items()}
        if meter is not None:
            meter.create_observable_counter(HAND_OFF, callbacks=[self._collecting])
        self.owed: dict[Key, float] = {}  # counted since the last collection, in the order first counted
        self.owing = threading.Lock()  # (the reader collects on a thread of its own)
        self.interactions: Iterator[int] = itertools.count(1)
        self.user = user_id()
        self.detailed = logger is not None or tracer is not None  # else only the counters are fed
        self.made = {"logs": 0, "traces": 0}  # records handed to the SDK, to tell what was lost

    def add(self, counted: Iterable[tuple[Key, float]]) -> None:
        """Values counted, each to its counter's attribute set (summed here: the SDK gets them at `hand_off`)."""
        if self.counters:
            with self.owing:
                owed = self.owed
                for key, value in counted:
                    owed[key] = owed.get(key, 0.0) + value

    def _collecting(self, options: CallbackOptions) -> Iterable[Observation]:
        self.hand_off()
        return ()

    def hand_off(self) -> None:
        """What was counted since the last collection, to the SDK: called by the reader as it
        collects, so the data points are those the counters would hold had each value been added
        to them at once (the same sums, in the same order; the last collection, at exit, has all)."""
        with self.owing:
            owed, self.owed = self.owed, {}
        for (name, attributes), value in owed.items():
            self.counters[name].add(value, dict(attributes))


class Turn:
    """The open turn: when it began, when the model's part ended, its span and its tool events."""

    def __init__(self, ev: TurnStart, t: float, span: Span | None) -> None:
        self.start = t
        self.model_end: float | None = None  # the first tool call's start
        self.request_id = ev.message_id
        self.span = span
        self.tools: list[tuple[str, float, dict[str, Any], Span | None]] = []  # events after api_request


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")
    return ""


def _result_text(end: ToolCallEnd) -> str:
    try:
        return _text(msgspec.json.decode(end.content)) if end.content else ""
    except msgspec.DecodeError:
        return ""


def _compact(value: Any) -> str:
    return msgspec.json.encode(value).decode()


def tool_parameters(name: str | None, input: Any) -> dict[str, str]:
    """`tool_parameters` as Claude Code writes it for a Bash call (the command and its first word)."""
    if name == "Bash" and isinstance(input, dict) and isinstance(input.get("command"), str):
        command = input["command"]
        return {"bash_command": command.split(maxsplit=1)[0] if command.split() else "", "full_command": command}
    return {}


class Session:
    """An `Observer` for one stream: Claude Code's session of the same session id."""

    def __init__(self, tools: Instruments, session_id: str, t: float, resumed: bool = False) -> None:
        self.i = tools
        self.settings = tools.settings
        self.session_id = session_id
        self.common: dict[str, Any] = {
            "user.id": tools.user, "session.id": session_id, "anthropic.provider": N.FIRST_PARTY,
            "anthropic.custom_base_url": False, "terminal.type": self.settings.terminal}
        self.prompt_id: str | None = None
        self.namespace = uuid.uuid5(uuid.NAMESPACE_URL, f"caliban-telemetry/{session_id}")
        self.runs = 0
        self.counted = [0.0, 0, 0, 0, 0]  # the open run's cost and tokens told by its turns
        self.model = "unknown"  # its last turn's
        self.events: Iterator[int] = itertools.count()  # event.sequence: per session, in the order written
        self.open = False  # a run is open
        self.told = False  # the open run's user_prompt has been written
        self.next_prompt: str | None = None
        self.interaction: Span | None = None
        self.run_t = t
        self.turn: Turn | None = None
        self.started: dict[str, tuple[float, str | None]] = {}  # tool_use_id -> (start, name)
        self.ended: set[str] = set()  # the run's tool calls told by their own moves
        common = tuple(self.common.items())
        self.active: Key = (N.ACTIVE, (*common, ("type", "cli")))
        self.keys: dict[str, tuple[Key, ...]] = {}  # model -> its cost's and tokens' keys (made once)
        tools.add([((N.SESSIONS, (*common, ("start_type", "resume" if resumed else "fresh"))), 1.0)])

    # ------------------------------------------------------------------ the pieces

    def _event(self, name: str, t: float, attributes: dict[str, Any], span: Span | None = None) -> None:
        if self.i.logger is None:
            return
        head = {**self.common, "event.name": name, "event.timestamp": _iso(t), "event.sequence": next(self.events)}
        if self.prompt_id is not None:
            head["prompt.id"] = self.prompt_id
        span = span or self.interaction
        self.i.made["logs"] += 1
        self.i.logger.emit(timestamp=_ns(t), observed_timestamp=time.time_ns(), body=f"claude_code.{name}",
                           attributes={**head, **attributes},
                           context=None if span is None else trace.set_span_in_context(span))

    def _span(self, name: str, kind: str, t: float, parent: Span | None, attributes: dict[str, Any]) -> Span | None:
        if self.i.tracer is None:
            return None
        context = Context() if parent is None else trace.set_span_in_context(parent)
        head = {**self.common, "gen_ai.provider.name": N.PROVIDER, "span.type": kind}
        self.i.made["traces"] += 1  # every span begun is ended
        return self.i.tracer.start_span(name, context=context, start_time=_ns(t),
                                        attributes={**head, **attributes, "gen_ai.conversation.id": self.session_id})

    def _text_or_redacted(self, text: str) -> str:
        return text if self.settings.log_prompts else N.REDACTED

    # ------------------------------------------------------------------ the observer's moves

    def run_start(self, model: str | None, t: float) -> None:
        self.runs += 1  # derived, not random: os.urandom cost ~2 ms a call on a busy VM
        self.run_t = t
        if self.i.detailed:  # (only the events and spans have it)
            self.prompt_id = str(uuid.uuid5(self.namespace, str(self.runs)))
        self.open, self.told = True, False
        self.model = model or self.model
        self.interaction = self._span("claude_code.interaction", "interaction", t, None, {
            "gen_ai.operation.name": "invoke_agent", "user_prompt": N.REDACTED,
            "interaction.sequence": next(self.i.interactions), "parent.source": "none", "queued_sends": 0})
        if self.next_prompt is not None:  # known before the run (the shim has the app's message)
            self.tell_prompt(self.next_prompt)
            self.next_prompt = None

    def prompt(self, content: Any, t: float) -> None:
        """A run's prompt (core/prompts.py): the open run's when it has none yet (an echo, a raw
        log's history at its end), else the next run's (the app's message), told when it starts."""
        if self.open and not self.told:
            self.tell_prompt(prompt_text(content))
        else:
            self.next_prompt = prompt_text(content)

    def turn_start(self, ev: TurnStart, t: float) -> None:
        span = None if self.i.tracer is None else self._span("claude_code.llm_request", "llm_request", t, self.interaction, {
            "model": ev.model, "gen_ai.system": N.PROVIDER, "gen_ai.request.model": ev.model,
            "gen_ai.operation.name": "chat", "llm_request.context": "interaction", "speed": N.SPEED,
            "query_source_safe": N.EVENT_QUERY_SOURCE})
        if span is not None:
            span.add_event("gen_ai.request.attempt", {"attempt": 1}, timestamp=_ns(t))
        self.turn = Turn(ev, t, span)

    def tool_start(self, ev: ToolCallStart, t: float) -> None:
        if self.turn is not None and self.turn.model_end is None:
            self.turn.model_end = t
        self.started[ev.tool_use_id] = (t, ev.name)

    def tool_end(self, tool_use_id: str, name: str | None, input: Any, end: ToolCallEnd, t: float) -> None:
        start, started_name = self.started.pop(tool_use_id, (t, name))
        self.ended.add(tool_use_id)
        if self.i.detailed:
            self.tool(tool_use_id, name or started_name or "", input, end.is_error, _result_text(end), start, t)

    def tool(self, tool_use_id: str, name: str, input: Any, is_error: bool, output: str, start: float, t: float) -> None:
        """A tool call's events and spans (after its turn's api_request when a turn is open)."""
        request_id = self.turn.request_id if self.turn is not None else ""
        ms = _ms(t - start)
        params = tool_parameters(name, input) if self.settings.tool_details else {}
        tool_span = self._span("claude_code.tool", "tool", start, self.interaction, {
            "tool_name": name, "tool_name_safe": name, "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name, **({"bash_argv0": p} if (p := tool_parameters(name, input).get("bash_command"))
                                         else {}),
            "tool_use_id": tool_use_id, "gen_ai.tool.call.id": tool_use_id, "duration_ms": ms})
        blocked = self._span("claude_code.tool.blocked_on_user", "tool.blocked_on_user", start, tool_span, {
            "duration_ms": 0, "decision": N.DECISION, "source": N.DECISION_SOURCE})
        execution = self._span("claude_code.tool.execution", "tool.execution", start, tool_span, {
            "tool_use_id": tool_use_id, "gen_ai.tool.call.id": tool_use_id, "duration_ms": ms,
            "success": not is_error})
        for span in (blocked,):
            if span is not None:
                span.end(end_time=_ns(start))
        for span in (execution, tool_span):
            if span is not None:
                span.end(end_time=_ns(t))
        decision = {"decision": N.DECISION, "source": N.DECISION_SOURCE, "tool_name": name, "tool_use_id": tool_use_id,
                    "tool_source": "mcp" if name.startswith("mcp__") else "builtin",
                    **({"tool_parameters": _compact(params)} if params else {}),
                    "permission_mode": N.PERMISSION_MODE, "request_id": request_id}
        size = len(_compact(input).encode()) if input is not None else 0
        detail = ({"tool_parameters": _compact(params)} if params else {}) | (
            {"tool_input": _compact(input)} if self.settings.tool_details else {})
        result = {"tool_name": name, "tool_use_id": tool_use_id, "success": "false" if is_error else "true",
                  "duration_ms": str(ms), **detail, "tool_input_size_bytes": str(size),
                  "tool_result_size_bytes": str(len(output.encode())), "request_id": request_id}
        pending = [("tool_decision", start, decision, blocked), ("tool_result", t, result, None)]
        if self.turn is not None:
            self.turn.tools += pending
        else:
            for event in pending:
                self._event(*event)

    def turn_end(self, ev: TurnEnd, model: str | None, cost: float, t: float) -> None:
        if self.i.detailed:  # (into the open turn's events, after its api_request)
            self.unseen_tools(ev, self.turn.model_end or t if self.turn is not None else t)
        turn, self.turn = self.turn, None
        model = model or "unknown"
        usage = ev.usage
        read, made = usage.cache_read_input_tokens or 0, usage.cache_creation_input_tokens or 0
        fresh = max(0, usage.input_tokens - read - made)  # Claude Code's input leaves the cache out
        self.count(model, (cost, fresh, usage.output_tokens, read, made))
        if not self.i.detailed:
            return
        start = turn.start if turn is not None else t
        end = turn.model_end if turn is not None and turn.model_end is not None else t
        ttft = None if ev.ttft is None else ev.ttft.secs * 1000 + ev.ttft.nanos // 1_000_000
        request_id = turn.request_id if turn is not None else ""
        tokens = {"input_tokens": fresh, "output_tokens": usage.output_tokens, "cache_read_tokens": read,
                  "cache_creation_tokens": made}
        # the request's time: the model's part, to its first tool call; where that is not after the
        # turn's start (a replay's estimated times put both at once), the turn's own time
        ms = _ms((end if end > start else t) - start)
        ttft = ms if ttft is None else ttft  # a turn of headless input has none: the request's time bounds it
        timing = {"duration_ms": ms, "ttft_ms": ttft}
        self._event("api_request", end, {
            "model": model, **tokens, "cache_creation_5m_tokens": 0, "cache_creation_1h_tokens": 0,
            "cost_usd": cost, "cost_usd_micros": round(cost * 1e6), **timing, "request_id": request_id,
            "speed": N.SPEED, "query_source": N.EVENT_QUERY_SOURCE, "effort": N.EFFORT})
        text = _text(ev.assistant_message.content)
        self._event("assistant_response", end, {
            "response_length": len(text), "response": self._text_or_redacted(text), "request_id": request_id,
            "message.uuid": str(uuid.uuid5(uuid.NAMESPACE_URL, f"{self.session_id}/{request_id}")), "model": model,
            "query_source": N.EVENT_QUERY_SOURCE})
        if turn is not None and turn.span is not None:
            stop = ev.stop_reason or "end_turn"
            turn.span.set_attributes({
                **tokens, "duration_ms": ms, "success": True, "attempt": 1, "request_id": request_id,
                "gen_ai.response.id": request_id, "ttft_ms": ttft, "first_content_ms": ttft,
                "effort": N.EFFORT, "stop_reason": stop, "gen_ai.response.finish_reasons": [stop],
                "gen_ai.usage.input_tokens": usage.input_tokens, "gen_ai.usage.output_tokens": usage.output_tokens,
                "gen_ai.usage.cache_read.input_tokens": read, "gen_ai.usage.cache_write.input_tokens": made,
                "gen_ai.response.model": model})
            turn.span.end(end_time=_ns(start + ms / 1000))
        for event in turn.tools if turn is not None else []:
            self._event(*event)

    def api_error(self, message: str, ms: int, t: float) -> None:
        """Claude Code's `api_error` event of a provider error: its message, the HTTP status where
        the error kind implies or states one ("undefined" where none, as the CLI writes it), the
        request's time, and the attempt (caliban's retries are its own: the one it reported)."""
        error = api_error(message)
        self._event("api_error", t, {
            "model": self.model, "error": error.text.removeprefix("API Error: "),
            "status_code": "undefined" if error.status is None else str(error.status), "duration_ms": ms,
            "attempt": 1})

    def tell_prompt(self, text: str) -> None:
        """`user_prompt`, stamped at the run's start, where Claude Code writes it. Numbered as it
        is written, as every event: first when the prompt is known before the run (the shim's,
        an echo), after the run's events when a raw log says it only at its end (they are
        exported as they come, not held for it)."""
        self.told = True
        if self.interaction is not None:
            self.interaction.set_attributes({"user_prompt": self._text_or_redacted(text), "user_prompt_length": len(text)})
        self._event("user_prompt", self.run_t, {
            "prompt_length": str(len(text)), "prompt": self._text_or_redacted(text),
            "prompt_text": self._text_or_redacted(text),
            "message.uuid": str(uuid.uuid5(uuid.NAMESPACE_URL, f"{self.session_id}/{self.prompt_id}"))})

    def count(self, model: str, values: tuple[float, int, int, int, int]) -> None:
        """A turn's cost and tokens (input, output, cache read, cache made), counted at once
        (the SDK has them at its next collection, a long run's too: the move's time is not read)."""
        self.model = model
        counted = self.counted
        for i, value in enumerate(values):
            counted[i] += value
        self.i.add(zip(self.keys.get(model) or self._keys(model), values, strict=True))

    def _keys(self, model: str) -> tuple[Key, ...]:
        base = (*self.common.items(), ("model", model), ("query_source", N.METRIC_QUERY_SOURCE), ("effort", N.EFFORT))
        made = self.keys[model] = ((N.COST, base), *((N.TOKENS, (*base, ("type", kind)))
                                                     for kind in ("input", "output", "cacheRead", "cacheCreation")))
        return made

    def unseen_tools(self, ev: TurnEnd, t: float) -> None:
        """The turn's tool calls that made no moves of their own (headless input without partial
        messages writes them only in the turn's message): told from the message and its results."""
        calls = [b for b in ev.assistant_message.content if isinstance(b, dict) and b.get("type") == "tool_use"
                 and b.get("id") not in self.ended]
        if not calls:
            return
        try:
            results = msgspec.json.decode(ev.tool_results) if ev.tool_results else []
        except msgspec.DecodeError:
            results = []
        blocks = {b.get("tool_use_id"): b for m in results if isinstance(m, dict) and isinstance(m.get("content"), list)
                  for b in m["content"] if isinstance(b, dict) and b.get("type") == "tool_result"}
        for call in calls:
            block = blocks.get(call.get("id"), {})
            self.tool(str(call.get("id", "")), str(call.get("name", "")), call.get("input"),
                      bool(block.get("is_error")), _text(block.get("content")), t, t)

    def reconcile(self, run: RunSummary) -> None:
        """What the run's totals hold beyond its turns' (headless input reports usage and cost
        once, at its end, without the cache split: its input tokens count as `input`)."""
        u = run.usage
        read = max(0, u.get("cache_read_input_tokens", 0) - int(self.counted[3]))
        made = max(0, u.get("cache_creation_input_tokens", 0) - int(self.counted[4]))
        whole_input = self.counted[1] + self.counted[3] + self.counted[4]  # caliban's input holds the cache
        fresh = max(0, u.get("input_tokens", 0) - int(whole_input) - read - made)
        output = max(0, u.get("output_tokens", 0) - int(self.counted[2]))
        cost = run.cost_usd - self.counted[0] if run.cost_usd - self.counted[0] > 1e-12 else 0.0
        if cost or fresh or output or read or made:
            self.count(self.model, (cost, fresh, output, read, made))
        self.counted = [0.0, 0, 0, 0, 0]

    def run_end(self, run: RunSummary, t: float) -> None:
        began = self.turn.start if self.turn is not None else self.run_t  # the failed request's, at most
        if self.turn is not None:  # a run closed inside a turn (cut off, cancelled): its span ends here
            if self.turn.span is not None:
                self.turn.span.end(end_time=_ns(t))
            for event in self.turn.tools:
                self._event(*event)
            self.turn = None
        self.open = False
        if run.stop_kind == "ProviderError" and self.i.detailed:
            self.api_error(str(run.stop_value), _ms(t - began), t)
        self.reconcile(run)
        self.i.add([(self.active, run.duration_ms / 1000)])
        if self.interaction is not None:
            self.interaction.set_attribute("interaction.duration_ms", _ms(t - self.run_t))
            self.interaction.end(end_time=_ns(t))
            self.interaction = None
        self.started.clear()
        self.ended.clear()
