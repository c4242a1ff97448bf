"""A stream's runs as the lines of Claude Code's session file (`projects/<slug>/<session>.jsonl`),
made from what an observer is told (encoders/observed.py). Pure: lines wait in `take()`.

Only what the readers use: the SDKs' `list_sessions` (the head's `cwd` and first `timestamp`, the
first prompt, the tail's `last-prompt`), `get_session_messages` (`user`/`assistant` lines chained
by `uuid`/`parentUuid`) and ccusage (each `assistant` line's `message.id`, `requestId`,
`message.model`, `message.usage` and `timestamp`). A response is one `assistant` line per content
block, all with the turn's usage, as Claude Code writes them (ccusage counts a message once).

A turn's lines wait until the next turn ends or the run does (headless input reports its usage
once, at the run's end: it goes on the last turn), and a run's until its prompt is known (a raw
log has it only in RunEnd's history)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import msgspec
import orjson

from translator.encoders import RunSummary
from translator.encoders.claude_code.frames import wire_usage
from translator.model import ESTIMATED, ToolCallEnd, ToolCallStart, TurnEnd, TurnStart

# The namespace of the ids derived from a log (the session from its first turn, each line's
# uuid from the session and the line's place): translating the same log again gives the same ids.
NAMESPACE = uuid.UUID("6f1c2d3e-8a4b-5c6d-9e0f-7a8b9c0d1e2f")
COUNTERS = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens")


def iso(t: float) -> str:
    """Unix seconds as Claude Code's timestamps: UTC, milliseconds, `Z`."""
    return datetime.fromtimestamp(round(t, 3), UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class Ids:
    """A session's line ids: derived (the session's own UUID with its last 48 bits counted on: the
    same log gives the same ids, at one format a line), or random (uuid4) for a live session
    whose file a later process may go on (a resume)."""

    def __init__(self, session_id: str | None) -> None:
        self.count = 0
        self.prefix, self.node = "", 0
        if session_id is not None:
            base = str(uuid.uuid5(NAMESPACE, session_id))
            self.prefix, self.node = base[:24], int(base[24:], 16)

    def next(self) -> str:
        if not self.prefix:
            return str(uuid.uuid4())
        self.count += 1
        return f"{self.prefix}{(self.node + self.count) & 0xFFFFFFFFFFFF:012x}"


class _Message(msgspec.Struct):
    role: str = ""
    content: msgspec.Raw = msgspec.Raw(b'""')


_MESSAGES = msgspec.json.Decoder(list[msgspec.Raw])  # a history's messages, each left as its bytes
_MESSAGE = msgspec.json.Decoder(_Message)
_ENCODE = msgspec.json.Encoder().encode  # (it writes a Raw as its bytes)


def messages(raw: msgspec.Raw | None) -> list[msgspec.Raw]:
    """A JSON list's items as their bytes (a TurnEnd's tool results, a RunEnd's history)."""
    try:
        return _MESSAGES.decode(raw) if raw else []
    except msgspec.DecodeError:
        return []


def prompt_of(final_messages: msgspec.Raw) -> Any:
    """The first user message's content in a RunEnd's history, or None; only it is decoded."""
    for item in messages(final_messages):
        try:
            message = _MESSAGE.decode(item)
        except msgspec.DecodeError:
            continue
        if message.role == "user":
            return msgspec.json.decode(message.content)
    return None


def prompt_text(content: Any) -> str:
    """What a prompt says, as the readers' summaries show it."""
    if isinstance(content, str):
        return content
    blocks = content if isinstance(content, list) else ()
    return " ".join(b["text"] for b in blocks if isinstance(b, dict) and isinstance(b.get("text"), str))


class Transcript:
    """One session file's lines, an `Observer` of one input stream. `session_id` None: derived
    from the stream's first turn (with `derived` ids: the same log gives the same file and
    lines); `parent`: the uuid a resumed session's first line follows; `written_at`: a replayed
    file's modification time, where its estimated times start (the same log, the same times)."""

    def __init__(
        self,
        *,
        cwd: str,
        version: str,
        entrypoint: str,
        session_id: str | None = None,
        parent: str | None = None,
        written_at: float | None = None,
    ) -> None:
        self.session_id = session_id
        self.cwd = cwd
        self.version = version
        self.entrypoint = entrypoint
        self.leaf = parent  # the last line's uuid
        self.written_at = written_at
        self.derived = session_id is None
        self.lines: list[bytes] = []  # ready for the file
        self._ids: Ids | None = None  # made once the session is named
        self._suffix: bytes | None = None
        self._stamp = (-1.0, "")  # the last time written and how (a turn's lines share one)
        self._held: list[dict[str, Any]] = []  # the run's lines not yet given their ids
        self._last: list[dict[str, Any]] = []  # the last turn's assistant lines (the usage may grow)
        self._turn: dict[str, Any] = {}
        self._wire: dict[str, int] = dict.fromkeys(COUNTERS, 0)  # the run's usage written so far
        self._prompt: Any = None
        self._prompted = False
        self._run_t = 0.0
        self._start: float | None = None  # the stream's first run's start
        self._ready = 0  # how many held lines may go (the prompt's and the turns' before the last)

    def take(self) -> list[bytes]:
        lines, self.lines = self.lines, []
        return lines

    # ------------------------------------------------------------------ from the shell

    def prompt(self, content: Any, t: float) -> None:
        """The next run's prompt, as the app sent it (the shim knows it before the run)."""
        self._prompt = content
        self._prompted = True
        self._held.append(self._user(content, t))
        self._ready = len(self._held)
        self._release(None)

    # ------------------------------------------------------------------ the Observer

    def run_start(self, model: str | None, t: float) -> None:
        self._run_t = t
        if self._start is None:
            self._start = t

    def turn_start(self, ev: TurnStart, t: float) -> None:
        self._turn = {"id": ev.message_id, "model": ev.model}

    def tool_start(self, ev: ToolCallStart, t: float) -> None:
        pass

    def tool_end(self, tool_use_id: str, name: str | None, input: Any, end: ToolCallEnd, t: float) -> None:
        pass  # its result is in TurnEnd's copy (a headless turn's only there), written after the turn's message

    def turn_end(self, ev: TurnEnd, model: str | None, cost: float, t: float) -> None:
        if self.session_id is None:
            self.session_id = str(uuid.uuid5(NAMESPACE, orjson.dumps([ev.turn_index, self._turn, ev.assistant_message.content]).decode()))
        wire = wire_usage(ev.usage.counts())
        for key in COUNTERS:
            self._wire[key] += wire[key]
        message_id = self._turn.get("id") or f"msg_{self._id()}"
        head = {"id": message_id, "type": "message", "role": "assistant", "model": model or self._turn.get("model")}
        tail = {"stop_reason": ev.stop_reason, "stop_sequence": None, "usage": wire}
        blocks = [b for b in ev.assistant_message.content if not (isinstance(b, dict) and b.get("type") == "text" and not b.get("text"))]
        self._ready = len(self._held) if self._prompted else 0
        # caliban reports no API request id: the message id stands in (ccusage counts a message once by both)
        self._last = [{"type": "assistant", "message": {**head, "content": [block], **tail}, "requestId": message_id, "t": t}
                      for block in blocks]  # fmt: skip
        # the turn's tool results as caliban gave them, each message one line, after the message
        self._held += self._last + [{"type": "user", "message": result, "t": t} for result in messages(ev.tool_results)]
        self._turn = {}
        self._release(None)

    def run_end(self, run: RunSummary, t: float) -> None:
        wire = wire_usage(run.usage)
        more = {key: max(wire[key] - self._wire[key], 0) for key in COUNTERS}
        if any(more.values()) and self._last:  # headless input: the run's usage, said at its end
            usage = {key: self._last[0]["message"]["usage"][key] + more[key] for key in COUNTERS}
            for line in self._last:
                line["message"]["usage"] = usage
        if not self._prompted and run.final_messages is not None:
            self._prompt = prompt_of(run.final_messages)
            if self._prompt is not None:
                self._held.insert(0, self._user(self._prompt, self._run_t))
        if self.session_id is None:  # no turn: nothing to say (and no name to say it under)
            self._held = []
        self._ready = len(self._held)
        self._release(run)
        if self._prompt is not None and self.leaf is not None and self.session_id is not None:
            self._emit({"type": "last-prompt", "lastPrompt": prompt_text(self._prompt), "leafUuid": self.leaf,
                        "sessionId": self.session_id})  # fmt: skip
        self._prompt, self._prompted, self._last = None, False, []
        self._wire = dict.fromkeys(COUNTERS, 0)

    # ------------------------------------------------------------------ lines

    def _user(self, content: Any, t: float) -> dict[str, Any]:
        return {"type": "user", "message": {"role": "user", "content": content}, "t": t}

    def _id(self) -> str:
        if self._ids is None:
            self._ids = Ids(self.session_id if self.derived else None)
        return self._ids.next()

    def _release(self, run: RunSummary | None) -> None:
        """The held lines that may go, given their ids, chained, in order."""
        ready, self._held = self._held[: self._ready], self._held[self._ready :]
        self._ready = 0
        shift = 0.0
        if self.written_at is not None and run is not None and run.duration_source == ESTIMATED:
            shift = self.written_at - (self._start or 0.0)  # a replay's estimate, from the file's own time
        for held in ready:
            t = held.pop("t") + shift
            if t != self._stamp[0]:
                self._stamp = (t, iso(t))
            uid = self._id()
            line = _ENCODE({"parentUuid": self.leaf, "isSidechain": False, **held, "uuid": uid, "timestamp": self._stamp[1]})
            self.leaf = uid
            self.lines.append(line[:-1] + self._common())

    def _common(self) -> bytes:
        """The keys every message line ends with, encoded once (`,"userType":…}` and a newline)."""
        if self._suffix is None:
            tail = _ENCODE({"userType": "external", "entrypoint": self.entrypoint, "cwd": self.cwd,
                            "sessionId": self.session_id, "version": self.version})  # fmt: skip
            self._suffix = b"," + tail[1:] + b"\n"
        return self._suffix

    def _emit(self, line: dict[str, Any]) -> None:
        self.lines.append(_ENCODE(line) + b"\n")
