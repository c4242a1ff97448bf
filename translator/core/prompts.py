"""A run's prompt, found once, whichever door it came by, and told to the watch as a move
(`Observer.prompt`): the shell that has it before the run (the shim: the app's message), the
prompt a headless log echoes (`--replay-user-messages`), or, for a raw log, which says it only
there, the first user message of its RunEnd's history. Every watcher (session files, telemetry)
takes it from here; none decodes a history or an echo itself. Only an observer that takes
prompts is given them: for the others (the metrics, the results table's rows) nothing is decoded."""

from __future__ import annotations

from typing import Any

import msgspec

from translator.encoders import RunSummary
from translator.encoders.observed import Observer, takes
from translator.model import HeadlessFrame, UserFrame


class _Message(msgspec.Struct):
    role: str = ""
    content: msgspec.Raw = msgspec.Raw(b'""')


_MESSAGES = msgspec.json.Decoder(list[msgspec.Raw])  # a history's messages, each left as its bytes
_MESSAGE = msgspec.json.Decoder(_Message)


def of_history(final_messages: msgspec.Raw) -> Any:
    """The first user message's content in a RunEnd's history, or None; only it is decoded."""
    try:
        items = _MESSAGES.decode(final_messages) if final_messages else []
    except msgspec.DecodeError:
        return None
    for item in items:
        try:
            message = _MESSAGE.decode(item)
        except msgspec.DecodeError:
            continue
        if message.role == "user":
            return msgspec.json.decode(message.content)
    return None


def echoed(raw: msgspec.Raw) -> Any:
    """A headless user frame's content when it is a prompt (text only, no tool results), else None."""
    try:
        content = msgspec.json.decode(raw) if raw else None
    except msgspec.DecodeError:
        return None
    if isinstance(content, str) or (isinstance(content, list) and content
                                    and all(isinstance(b, dict) and b.get("type") == "text" for b in content)):  # fmt: skip
        return content
    return None


class Prompts:
    """An observer's prompts, found for it: each move passed on, and each run's prompt told once
    (`prompt`), by whichever door it came. `told`: the open run's has been; `ahead`: the next
    run's has (the shim's message before its run; an echo that begins the next run)."""

    def __init__(self, inner: Observer) -> None:
        self.inner = inner
        self.timed = inner.timed
        self.takes = takes(inner) | {"run_start", "run_end", "headless_frame"}
        self.open = self.told = self.ahead = False
        self.run_t = 0.0
        self.stream_open, self.turn_start, self.tool_start = inner.stream_open, inner.turn_start, inner.tool_start
        self.tool_end, self.turn_end, self.interrupted = inner.tool_end, inner.turn_end, inner.interrupted

    def prompt(self, content: Any, t: float) -> None:
        """A prompt: the open run's if it has none yet, else the next run's."""
        if self.open and not self.told:
            self.told = True
        else:
            self.ahead = True
        self.inner.prompt(content, t)

    def run_start(self, model: str | None, t: float) -> None:
        self.open, self.told, self.ahead, self.run_t = True, self.ahead, False, t
        self.inner.run_start(model, t)

    def headless_frame(self, frame: HeadlessFrame, t: float) -> None:
        self.inner.headless_frame(frame, t)
        if isinstance(frame, UserFrame) and (content := echoed(frame.content)) is not None:
            self.prompt(content, t)

    def run_end(self, run: RunSummary, t: float) -> None:
        if not self.told and run.final_messages is not None:  # a raw log's: at its start, where it was said
            content = of_history(run.final_messages)
            if content is not None:
                self.prompt(content, self.run_t)
        self.open = self.told = False
        self.inner.run_end(run, t)


def prompted(observer: Observer) -> Observer:
    """`observer` with its prompts found (once: one already wrapped is itself; one that takes
    none is itself too, and no history or echo is decoded for it)."""
    return observer if isinstance(observer, Prompts) or "prompt" not in takes(observer) else Prompts(observer)
