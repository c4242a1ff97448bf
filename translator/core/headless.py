"""The agent's headless stream-json, read into the fold's run and turn moves.

The dialect has no turn boundaries of its own and streams a tool call only after it ran; what
it takes to map its frames onto the fold's moves (the tool calls seen, the kind and index of
the streaming block, whether the turn came as deltas, the results waiting for their message)
is kept here, per run, so that the fold's run state stays the same for both dialects.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, cast

import msgspec
import orjson
from msgspec import Raw

from translator import model as M
from translator.core import headless_result as H
from translator.core.fold import RunFold
from translator.core.open_run import OpenRun, Totals
from translator.core.reading import Headless

# What a range-checked field of a frame must hold, for the diagnostic.
_COUNT = f" (a whole number 0 to {M.U32_MAX})"
HINTS = {
    "t_ms": f" (milliseconds, 0 to {M.MAX_DURATION_S * 1000})",
    "total_cost_usd": " (a number, not negative)",
    "usage": f" (input_tokens and output_tokens, whole numbers 0 to {M.U32_MAX})",
    **dict.fromkeys(("duration_ms", "retry_delay_ms"), f" (a whole number 0 to {M.U64_MAX})"),
    **dict.fromkeys(
        ("turns", "total_input_tokens", "total_output_tokens", "num_turns", "tool_calls_seen",
         "turns_without_edit", "attempt", "max_retries"),
        _COUNT,
    ),
}


class HeadlessOutput(Protocol):
    """What the headless reader needs of an output format besides its moves (the Encoder
    protocol's): every encoder has it; the knowledge of the dialect stays here."""

    # Whether headless input is translated (its echoed prompt then answers the run before it,
    # as Claude Code frames runs) or passed through (see headless_frame).
    translates_headless: bool

    # Every headless frame as read, before the moves the reader makes of it (`moves`: whether
    # it makes any). An encoder that passes headless input through writes the frames and
    # ignores the moves of their run until its result (given `upstream`); one that translates
    # writes the moves, and the frames of which none are made.
    def headless_frame(self, frame: M.HeadlessFrame, line: bytes, t: float, moves: bool) -> None: ...


class Dialect:
    """What the headless dialect keeps for one run."""

    __slots__ = ("block", "content", "held", "results", "since_tool", "streamed", "tool_ids")

    def __init__(self) -> None:
        self.since_tool: list[str] = []  # text deltas since the last tool boundary
        self.tool_ids: set[str] = set()  # the tool calls seen
        self.block: tuple[type | None, int] = (None, -1)  # the kind (frame class) and index of the streaming block
        self.streamed = False  # this turn came with deltas (partial messages)
        self.results: list[dict[str, Any]] = []  # a turn's tool results, until its message
        # A streamed turn's message, as its deltas and tool calls built it (with partial messages
        # no message frame comes: its end is made of this, for what reads the turn's blocks).
        self.content: list[dict[str, Any]] = []
        # A turn's tool frames while it is not known whether a message will follow them (a
        # turn that opens with a tool call, before the stream showed its kind: see `_hold`).
        self.held: list[M.ToolUseFrame | M.ToolResultFrame] = []


class HeadlessReader:
    """Headless frames → the fold's public moves, as raw events would have made them."""

    def __init__(self, fold: RunFold) -> None:
        self.fold = fold
        self._run: OpenRun | None = None
        self._dialect = Dialect()
        # Whether the agent streams partial messages (deltas, no message frames), once the
        # stream has shown it: one agent process (from its init on) prints one kind.
        self._partial: bool | None = None
        # Every frame type the dialect has goes to its handler by class (a result, read whole
        # as well, to `_result`).
        self._handlers: dict[type, Callable[[Any, float, bytes], None]] = {
            M.SystemFrame: self._system,
            M.UserFrame: self._user,
            M.TextFrame: self._delta,
            M.ThinkingFrame: self._delta,
            M.ToolUseFrame: self._tool_use,
            M.ToolResultFrame: self._tool_result,
            M.MessageFrame: self._message,
            M.WarningFrame: self._other,
            M.HookEventFrame: self._other,
        }

    def read(self, item: Headless, now: float) -> None:
        """One headless frame, which arrived at `now`, made into the fold's moves."""
        frame = item.frame
        if type(frame) is M.ResultFrame:
            assert item.whole is not None
            self._result(frame, now, item.line, item.whole)
        else:
            self._handlers[type(frame)](frame, now, item.line)

    def _output(self) -> HeadlessOutput:
        """The encoder the fold writes through now (nothing while a failed run's rest is
        read), as the output of this dialect: every encoder is one."""
        return cast(HeadlessOutput, self.fold.runs.encoder)

    def _of(self, run: OpenRun) -> Dialect:
        """The dialect state of `run` (a new run starts with a fresh one)."""
        if run is not self._run:
            self._run, self._dialect = run, Dialect()
        return self._dialect

    def _turn(self, run: OpenRun | None, now: float) -> None:
        """A headless frame of the model's: the turn it belongs to starts if none is open."""
        if run is None or not self.fold.in_turn:
            index = len(run.message_ids) if run is not None else 0
            start = M.TurnStart(turn_index=index, message_id="", model=self.fold.runs.model or "")
            self.fold.turn_start(start, now, numbered=False)

    def _system(self, ev: M.SystemFrame, now: float, line: bytes) -> None:
        if ev.subtype != "init":
            self._other(ev, now, line)
            return
        model = ev.model.rsplit("/", 1)[-1] if ev.model is not None else None  # "provider/model"
        self.fold.new_run(now, model)  # an open run that had a turn lost its result: the table closes it
        self._partial = None  # perhaps another process, another kind
        self._frame(ev, now, line)
        self._open(now, ev)

    def _user(self, ev: M.UserFrame, now: float, line: bytes) -> None:
        """An echoed prompt: for Claude Code, a new run, the previous one answered."""
        fold = self.fold
        if not self._output().translates_headless:
            self._other(ev, now, line)
            return
        self._frame(ev, now, line)
        run = fold.run
        if run is not None and run.saw_turn:
            self._finish(run, now, fold.runs.stamp(now, ev))
        self._open(now, ev)

    def _delta(self, ev: M.TextFrame | M.ThinkingFrame, now: float, line: bytes) -> None:
        fold = self.fold
        run = fold.run
        if self._partial is None:  # the first delta: held tool frames were streamed
            self._partial = True
            if run is not None:
                self._release(run, now)
        if run is not None and self._of(run).block[0] is M.ToolResultFrame:
            self._turn_end(run, now, self._of(run).content, "tool_use")  # a tool's result: the next call began
        self._frame(ev, now, line)
        run = self._open(now, ev)
        self._turn(run, now)
        st = self._of(run)
        st.streamed = True
        kind = type(ev)
        key = "text" if kind is M.TextFrame else "thinking"
        if st.block[0] is not kind:
            st.block = (kind, st.block[1] + 1)
            st.content.append({key: "", "type": key})  # keys in caliban's order, as its message frames
        st.content[-1][key] += ev.delta
        cls = M.AssistantTextDelta if kind is M.TextFrame else M.AssistantThinkingDelta
        delta = cls(turn_index=0, content_block_index=st.block[1], text=ev.delta)
        if kind is M.TextFrame:
            st.since_tool.append(ev.delta)
        fold.deltas(M.DeltaRun([delta]), now, one_by_one=True)

    def _tool_use(self, ev: M.ToolUseFrame, now: float, line: bytes) -> None:
        """Written when the tool call ends (after it ran), with its whole input. Without
        partial messages the turn's text is not known yet: the call waits for the message."""
        self._frame(ev, now, line)
        run = self._open(now, ev)
        self._turn(run, now)
        st = self._of(run)
        st.tool_ids.add(ev.id)
        st.since_tool.clear()
        if self._hold(st, ev):
            return
        self._tool_use_moves(st, ev, now)

    def _hold(self, st: Dialect, ev: M.ToolUseFrame | M.ToolResultFrame) -> bool:
        """Keep a tool frame of a turn that showed no delta while the stream has not shown
        its kind: a message frame then says the turn was whole, a delta or the result that
        it streamed (it opened with the call, and no message will come)."""
        if self._partial is None:
            st.held.append(ev)
            return True
        return False

    def _release(self, run: OpenRun, now: float) -> None:
        """The held tool frames of `run`, now that the stream's kind is known, made into
        the moves that kind makes of them (at `now`: the frames go out in time order)."""
        st = self._of(run)
        held, st.held = st.held, []
        if held and self._partial:
            st.streamed = True
        for ev in held:
            if isinstance(ev, M.ToolUseFrame):
                self._tool_use_moves(st, ev, now)
            else:
                self._tool_result_moves(st, ev, now)

    def _tool_use_moves(self, st: Dialect, ev: M.ToolUseFrame, now: float) -> None:
        st.block = (M.ToolUseFrame, st.block[1] + 1)
        if st.streamed:  # its input whole, as the one delta of the call
            st.content.append({"id": ev.id, "input": msgspec.json.decode(ev.input), "name": ev.name, "type": "tool_use"})
            self.fold.tool_start(M.ToolCallStart(turn_index=0, tool_use_id=ev.id, name=ev.name), now)
            self.fold.tool_input(M.ToolCallInputDelta(turn_index=0, tool_use_id=ev.id, partial_json=bytes(ev.input).decode()), now)
        else:
            self.fold.tool_use(ev.id, ev.name, bytes(ev.input).decode())

    def _tool_result(self, ev: M.ToolResultFrame, now: float, line: bytes) -> None:
        self._frame(ev, now, line)
        run = self._open(now, ev)
        st = self._of(run)
        st.since_tool.clear()
        if not self._hold(st, ev):
            self._tool_result_moves(st, ev, now)

    def _tool_result_moves(self, st: Dialect, ev: M.ToolResultFrame, now: float) -> None:
        st.block = (M.ToolResultFrame, st.block[1])
        if ev.t_ms:
            self.fold.tool_ran(ev.t_ms / 1000)
        content = ev.content
        if bytes(memoryview(content)[:1]) == b'"':  # a plain text: one text block
            content = Raw(orjson.dumps([{"type": "text", "text": msgspec.json.decode(content, type=str)}]))
        block = {"type": "tool_result", "tool_use_id": ev.tool_use_id, "is_error": ev.is_error}
        st.results.append(block | {"content": orjson.Fragment(bytes(content))})  # for its turn's end
        if st.streamed:
            end = M.ToolCallEnd(turn_index=0, tool_use_id=ev.tool_use_id, is_error=ev.is_error, content=content)
            self.fold.tool_end(end, now)

    def _message(self, ev: M.MessageFrame, now: float, line: bytes) -> None:
        self._frame(ev, now, line)
        run = self._open(now, ev)
        if self._partial is None:
            self._partial = False
            self._release(run, now)
        self._turn(run, now)
        content = ev.content
        tools = [b["id"] for b in content if isinstance(b, dict) and b.get("type") == "tool_use" and "id" in b]
        self._of(run).tool_ids.update(tools)
        self._turn_end(run, now, content, "tool_use" if tools else "end_turn", ev.role)

    def _turn_end(self, run: OpenRun, now: float, content: list[Any], stop: str, role: str = "assistant") -> None:
        """The end of a headless turn: its message frame, or (with partial messages, where
        there is none) the next call's start or the result. The dialect has no usage per turn."""
        st = self._of(run)
        turn_end = M.TurnEnd(
            turn_index=0,
            assistant_message=M.Message(role=role, content=content),
            tool_results=Raw(orjson.dumps([{"role": "user", "content": st.results}] if st.results else [])),
            stop_reason=stop,
            usage=M.Usage(input_tokens=0, output_tokens=0), ttft=None, tbt=None,
        )
        st.results, st.content = [], []
        st.block = (None, -1)
        st.streamed = False
        self.fold.turn_end(turn_end, now)

    def _result(self, ev: M.ResultFrame, now: float, line: bytes, whole: dict[str, Any]) -> None:
        """The run's upstream result: `ev` typed and checked, `whole` the frame as the reader
        decoded it whole (every key, in order), which the repair starts from."""
        self._frame(ev, now, line)
        self._finish(self._open(now, ev), now, self.fold.runs.stamp(now, ev), ev, whole)

    def _open(self, now: float, ev: M.HeadlessFrame) -> OpenRun:
        """The open run, or a new one (its reply found its own way: see _finish)."""
        return self.fold.open_run(now, ev)

    def _finish(
        self, run: OpenRun, now: float, t: float, upstream: M.ResultFrame | None = None, whole: dict[str, Any] | None = None
    ) -> None:
        """Close a headless run: at the upstream result, or (for Claude Code) at the
        next echoed prompt, when the agent has evidently answered this one."""
        if self._partial is None and self._of(run).held:
            self._partial = True  # tool calls and no message before the result: streamed
        self._release(run, now)
        st = self._of(run)
        if st.streamed:  # with partial messages the last call ends here
            self._turn_end(run, now, st.content, "end_turn")
        end = H.run_end(upstream if upstream is not None else M.ResultFrame(subtype="success", turns=run.turns))
        totals = Totals(
            usage=end.total_usage.counts(),  # the dialect reports tokens once, at its end
            tool_calls=len(st.tool_ids),
            answer="".join(st.since_tool) if st.since_tool else None,  # partial messages: no message frames
            upstream=whole if upstream is not None else None,
            cost_usd=upstream.total_cost_usd if upstream is not None else None,
        )
        self.fold.close_run(end, now, t, totals)

    def _frame(self, ev: M.HeadlessFrame, now: float, line: bytes, moves: bool = True) -> None:
        """The frame as read, to the encoder, before the moves made of it (`moves`: none are):
        it writes either the frame or those moves."""
        self._output().headless_frame(ev, line.strip(), self.fold.runs.stamp(now, ev), moves)

    def _other(self, ev: M.HeadlessFrame, now: float, line: bytes) -> None:
        """Frames with no raw-event counterpart (retries, warnings, hooks, echoed prompts)."""
        self._frame(ev, now, line, False)
