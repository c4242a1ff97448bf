"""`--format claude-code`'s block assembly: a turn's content blocks built from its deltas and
tool-call events, each written as its own assistant frame as soon as the events prove it
complete (with partial messages, framed by its stream events); a thinking block, and what
follows it, waits for its signature."""

from __future__ import annotations

from collections.abc import Callable
from operator import attrgetter
from typing import Any

import orjson
from orjson import dumps

from translator.encoders.claude_code.frames import (
    ASSISTANT,
    INPUT_DELTA,
    STREAM_EVENT,
    TEXT_DELTA,
    THINKING_DELTA,
    THINKING_DISPLAY,
    THINKING_EXTRA,
    THINKING_TOKENS,
    UNKNOWN_USAGE_JSON,
    iso_json,
)
from translator.encoders.content import claude_block, is_empty_text
from translator.model import (
    AssistantTextDelta,
    AssistantThinkingDelta,
    Delta,
    DeltaRun,
    ToolCallInputDelta,
    ToolCallStart,
)

_INDEX, _TEXT = attrgetter("content_block_index"), attrgetter("text")
CHARS_PER_TOKEN = 4  # Claude Code's rough token estimate for thinking text


class Block:
    """One content block of the turn being streamed."""

    __slots__ = ("done", "index", "input", "kind", "name", "parts", "t_start", "tool_id")

    def __init__(self, kind: str, index: int, t: float, tool_id: str = "", name: str = "") -> None:
        self.kind = kind  # text | thinking | tool_use
        self.index = index  # the API's content block index
        self.parts: list[str] = []  # text, thinking or partial_json as it streamed
        self.tool_id = tool_id
        self.name = name
        self.input: Any = {}  # a tool call's input, once known
        self.t_start = t
        self.done = False


class TurnBlocks:
    """One turn's content blocks and the frames that carry them (the encoder starts each turn
    afresh with `start`)."""

    __slots__ = ("blocks", "emitted", "frames", "holding", "message_id", "message_json", "new_id", "out", "partial",
                 "pending", "session_id", "session_json", "thinking_tokens", "tools", "turn_model")  # fmt: skip

    def __init__(
        self, out: list[bytes], session_id: str, new_id: Callable[[], str], *, partial: bool, frames: bool
    ) -> None:
        self.out = out
        self.session_id = session_id
        self.session_json = dumps(session_id)
        self.new_id = new_id
        self.partial = partial  # partial messages: stream events around every block
        self.frames = frames  # not --results-only
        self.start("", "")

    def start(self, message_id: str, model: str) -> None:
        """A new turn: nothing of the previous one is kept."""
        self.message_id = message_id
        self.message_json = dumps(message_id)
        self.turn_model = model
        self.blocks: list[Block] = []  # this turn's blocks, in order
        self.tools: dict[str, Block] = {}  # its tool_use blocks by id (the first, if one repeats)
        self.emitted = 0  # how many of them have their assistant frame out
        self.holding = False  # completed blocks wait behind a thinking block (see complete)
        self.pending: list[DeltaRun] = []  # runs of deltas, undecoded
        self.thinking_tokens = 0

    def stream(self, event: dict[str, Any] | bytes, extra: bytes = b"") -> None:
        """A `stream_event` (callers check `partial`: only partial messages have them): its
        event, serialised or not; `extra`, the keys after its uuid, serialised."""
        if not isinstance(event, bytes):
            event = dumps(event)
        self.out.append(STREAM_EVENT % (event, self.session_json, dumps(self.new_id()), extra, self.message_json))

    def _delta(self, template: bytes, index: int, text: str, extra: bytes = b"") -> None:
        """A delta's `stream_event`, written whole from its template (frames.TEXT_DELTA, ...)."""
        self.out.append(template % (index, dumps(text), self.session_json, dumps(self.new_id()), extra, self.message_json))

    # ---------------------------------------------------------------- blocks

    def open(self, kind: str, index: int, t: float, tool_id: str = "", name: str = "") -> Block:
        block = Block(kind, index, t, tool_id, name)
        self.blocks.append(block)
        if self.partial:
            if kind == "text":
                start: dict[str, Any] = {"type": "text", "text": ""}
            elif kind == "thinking":
                start = {"type": "thinking", "thinking": "", "signature": ""}
            else:
                start = {"type": "tool_use", "id": tool_id, "name": name, "input": {}}
            extra = THINKING_DISPLAY if kind == "thinking" else b""
            self.stream({"type": "content_block_start", "index": index, "content_block": start}, extra)
        return block

    def _current(self, kind: str, index: int, t: float) -> Block:
        """The open block of this kind and index; a new one ends the previous block."""
        if self.blocks:
            last = self.blocks[-1]
            if not last.done and last.kind == kind and last.index == index:
                return last
            self.complete(last, t)
        return self.open(kind, index, t)

    def complete(self, block: Block, t: float) -> None:
        """The events prove `block` complete: its assistant frame goes out now. Without partial
        messages a thinking block, and the blocks after it, wait for the turn's end (only
        TurnEnd carries the signature) or for a tool call (which must not wait)."""
        if block.done:
            return
        block.done = True
        if not self.partial and (block.kind == "thinking" or self.holding):
            self.holding = True
            return
        self._flush(t)

    def release(self, t: float) -> None:
        """Write every completed block now, held thinking included (without its signature)."""
        self.holding = False
        self._flush(t)

    def _flush(self, t: float) -> None:
        while self.emitted < len(self.blocks) and self.blocks[self.emitted].done:
            self.write(self.blocks[self.emitted], t, None, None)

    def write(self, block: Block, t: float, content: dict[str, Any] | None, usage: bytes | None) -> None:
        """The block's assistant frame (from `content`, the authoritative message block, when
        given); with partial messages, after its signature and before its content_block_stop."""
        self.emitted += 1
        block.done = True
        if content is not None:
            content = claude_block(content)
        elif block.kind == "tool_use":
            content = {"type": "tool_use", "id": block.tool_id, "name": block.name, "input": block.input}
        else:
            text = "".join(block.parts)
            block.parts = [text]  # complete: TurnEnd matches it by this text, joined once
            if block.kind == "text":
                content = {"type": "text", "text": text}
            else:
                content = {"type": "thinking", "thinking": text, "signature": ""}
        if self.partial and block.kind == "thinking":  # "" when the block ended before its TurnEnd
            self.stream(
                {"type": "content_block_delta", "index": block.index,
                 "delta": {"type": "signature_delta", "signature": content.get("signature", "")}}
            )
        if self.frames and not is_empty_text(content):  # the agent drops empty text blocks
            self.out.append(self._assistant(block, t, content, usage))
        if self.partial:
            self.stream({"type": "content_block_stop", "index": block.index})

    def _assistant(self, block: Block, t: float, content: dict[str, Any], usage: bytes | None) -> bytes:
        """`usage`: the turn's, serialised (None before its TurnEnd: zeros)."""
        extra = b""
        if block.kind == "thinking":
            extra = THINKING_EXTRA % max(0, round((t - block.t_start) * 1000))
        return ASSISTANT % (
            self.message_json, dumps(self.turn_model), dumps(content), usage or UNKNOWN_USAGE_JSON,
            self.session_json, dumps(self.new_id()), iso_json(t), extra,
        )  # fmt: skip

    # ---------------------------------------------------------------- blocks from the events

    def raw_deltas(self, run: DeltaRun, t: float) -> None:
        """Text deltas wait (their content may not be needed before TurnEnd); a run with
        thinking is decoded now, after those before it (thinking_tokens frames go out at once)."""
        if not run.thinking:
            self.pending.append(run)
            return
        self.resolve(t)
        self._one_by_one(run.deltas, t)

    def resolve(self, t: float) -> None:
        """Decode the runs of text deltas kept so far, now that their content is needed."""
        pending, self.pending = self.pending, []
        for run in pending:
            deltas = run.deltas
            indexes = set(map(_INDEX, deltas))
            if len(indexes) == 1:  # the usual case, one block's run of deltas: taken whole
                block = self._current("text", indexes.pop(), t)
                block.parts.extend(map(_TEXT, deltas))
            else:
                self._one_by_one(deltas, t)

    def _one_by_one(self, deltas: list[Delta], t: float) -> None:
        for ev in deltas:
            if isinstance(ev, AssistantTextDelta):
                self._text(ev, t)
            else:
                self._thinking(ev, t)

    def text_delta(self, ev: AssistantTextDelta, t: float) -> None:
        if self.pending:
            self.resolve(t)
        self._text(ev, t)

    def thinking_delta(self, ev: AssistantThinkingDelta, t: float) -> None:
        if self.pending:
            self.resolve(t)
        self._thinking(ev, t)

    def _text(self, ev: AssistantTextDelta, t: float) -> None:
        block = self._current("text", ev.content_block_index, t)
        block.parts.append(ev.text)
        if self.partial:
            self._delta(TEXT_DELTA, block.index, ev.text)

    def _thinking(self, ev: AssistantThinkingDelta, t: float) -> None:
        block = self._current("thinking", ev.content_block_index, t)
        block.parts.append(ev.text)
        delta = int(len(ev.text) / CHARS_PER_TOKEN + 0.5)
        self.thinking_tokens += delta
        if self.frames:
            self.out.append(THINKING_TOKENS % (self.thinking_tokens, delta, self.session_json, dumps(self.new_id())))
        if self.partial:
            self._delta(THINKING_DELTA, block.index, ev.text, THINKING_DISPLAY)

    def tool_start(self, ev: ToolCallStart, t: float) -> None:
        self.resolve(t)
        if self.blocks:
            self.complete(self.blocks[-1], t)
        self.release(t)  # text before a tool call shows before the tool runs
        self.open_tool(t, ev.tool_use_id, ev.name)

    def open_tool(self, t: float, tool_id: str, name: str) -> Block:
        """A tool call's block, after the others."""
        index = self.blocks[-1].index + 1 if self.blocks else 0
        block = self.open("tool_use", index, t, tool_id, name)
        self.tools.setdefault(tool_id, block)
        return block

    def tool_input(self, ev: ToolCallInputDelta, t: float) -> None:
        block = self.tools.get(ev.tool_use_id)
        if block is None or block.done:
            return
        chunk = ev.partial_json
        if self.partial:
            self._delta(INPUT_DELTA, block.index, chunk)
        block.parts.append(chunk)
        # A prefix of a JSON object never parses: once the input does, it is all there.
        if chunk.rstrip().endswith("}"):
            try:
                block.input = orjson.loads("".join(block.parts))
            except orjson.JSONDecodeError:
                return
            self.complete(block, t)
