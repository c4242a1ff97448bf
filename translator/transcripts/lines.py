"""A stream's runs as the lines of Claude Code's session file (`projects/<slug>/<session>.jsonl`),
made from what an observer is told (encoders/observed.py). Pure: lines wait in `take()`.

Only what the readers use: the SDKs' `list_sessions` (the head's `cwd` and first `timestamp`, the
first prompt, the tail's `last-prompt`), `get_session_messages` (`user`/`assistant` lines chained
by `uuid`/`parentUuid`) and ccusage, llm-usage and claude-monitor (each `assistant` line's `message.id`, `requestId`,
`message.model`, `message.usage`, `timestamp` and, where ccusage takes it over its own prices,
`costUSD`). A response is one `assistant` line per content block, all with the turn's usage and
cost, as Claude Code writes them (the readers count a message once, by its id).

A turn's lines wait until the next turn ends or the run does, and a run's until its prompt is
known (a raw log has it only in RunEnd's history). Headless input (caliban -p) reports usage and
cost once, for the whole run: its turns' lines wait for the run's end, where the totals are split
evenly across its API calls (the remainder on the last), each line marked `usageEstimate`."""

from __future__ import annotations

import functools
import time
import uuid
from hashlib import sha1
from typing import Any

import msgspec
import orjson

from translator.encoders import RunSummary
from translator.encoders.claude_code.frames import wire_usage
from translator.encoders.provider_errors import api_error
from translator.model import (
    ESTIMATED,
    HeadlessFrame,
    ToolCallEnd,
    ToolCallStart,
    TurnEnd,
    TurnStart,
)

# The namespace of the ids derived from a log (each line's
# uuid from the session and the line's place): translating the same log again gives the same ids.
NAMESPACE = uuid.UUID("6f1c2d3e-8a4b-5c6d-9e0f-7a8b9c0d1e2f")
COUNTERS = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens")
# What an estimated line says of its usage and costUSD (caliban -p gives the run's totals only)
ESTIMATE = b',"usageEstimate":"caliban -p: the run\'s totals split evenly across its API calls"'


def derived(name: str) -> str:
    """uuid5 in NAMESPACE. (uuid.uuid5 imports hashlib at its first call, ~10 ms: a live stream's
    first turn would wait for it; here it is imported with the module, at the start.)"""
    return str(uuid.UUID(bytes=sha1(NAMESPACE.bytes + name.encode()).digest()[:16], version=5))


def iso(t: float) -> str:
    """Unix seconds as Claude Code's timestamps: UTC, milliseconds, `Z`."""
    seconds, ms = divmod(round(t * 1000), 1000)
    return f"{_second(seconds)}.{ms:03d}Z"


@functools.lru_cache(maxsize=64)
def _second(seconds: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds))


class Ids:
    """A session's line ids: derived (the session's own UUID with its last 48 bits counted on: the
    same log gives the same ids, at one format a line), or random (uuid4) for a live session
    whose file a later process may go on (a resume)."""

    def __init__(self, session_id: str | None) -> None:
        self.count = 0
        self.prefix, self.node = "", 0
        if session_id is not None:
            base = derived(session_id)
            self.prefix, self.node = base[:24], int(base[24:], 16)

    def next(self, count: int = 1) -> list[str]:
        """The next `count` ids."""
        if not self.prefix:
            return [str(uuid.uuid4()) for _ in range(count)]
        first, self.count = self.count + 1, self.count + count
        prefix, node = self.prefix, self.node
        return [f"{prefix}{(node + n) & 0xFFFFFFFFFFFF:012x}" for n in range(first, first + count)]


_MESSAGES = msgspec.json.Decoder(list[msgspec.Raw])  # a history's messages, each left as its bytes
_ENCODE = msgspec.json.Encoder().encode  # (it writes a Raw as its bytes)


def messages(raw: msgspec.Raw | None) -> list[msgspec.Raw]:
    """A JSON list's items as their bytes (a TurnEnd's tool results, a RunEnd's history)."""
    try:
        return _MESSAGES.decode(raw) if raw else []
    except msgspec.DecodeError:
        return []


def prompt_text(content: Any) -> str:
    """What a prompt says, as the readers' summaries show it."""
    if isinstance(content, str):
        return content
    blocks = content if isinstance(content, list) else ()
    return " ".join(b["text"] for b in blocks if isinstance(b, dict) and isinstance(b.get("text"), str))


# A line's middle, between its parent and its uuid, as bytes (a line is built by splicing, not encoded
# whole: its parts are JSON already). An assistant line is one content block of its message.
ASSISTANT = (b'"message":{"id":%s,"type":"message","role":"assistant","model":%s,"content":[%s],'
             b'"stop_reason":%s,"stop_sequence":null,"usage":%s},"requestId":%s,"type":"assistant","costUSD":%s%s')
PROMPT = b'"type":"user","message":{"role":"user","content":%s}'
# A provider error's synthetic answer, as Claude Code writes it in the session file (recorded with the
# CLI 2.1.332 and the fake API: fixtures/claude-code/api_error_400.session.jsonl): no usage, no cost
API_ERROR = (b'"message":{"id":%s,"type":"message","role":"assistant","model":"<synthetic>","content":[%s],'
             b'"stop_reason":"stop_sequence","stop_sequence":"","usage":{"input_tokens":0,"output_tokens":0,'
             b'"cache_creation_input_tokens":0,"cache_read_input_tokens":0}},"type":"assistant","error":%s,'
             b'"isApiErrorMessage":true,"apiErrorStatus":%s,"apiErrorType":%s')
INTERRUPTED = "[Request interrupted by user]"  # the user line Claude Code writes after an interrupted run's turns
RESULTS = b'"type":"user","message":%s'  # one message of a TurnEnd's tool results, as caliban gave it


class Turn:
    """A turn's message until its lines are made (an estimated one's usage and cost are set at
    the run's end)."""

    __slots__ = ("blocks", "cost", "estimated", "id", "model", "results", "stop", "t", "usage")

    def __init__(self, ev: TurnEnd, message_id: str, model: str, cost: float, t: float, estimated: bool) -> None:
        self.id, self.model, self.t, self.cost, self.estimated = message_id, model, t, cost, estimated
        self.stop = ev.stop_reason
        self.usage = wire_usage(ev.usage.counts())
        self.blocks = [orjson.dumps(b) for b in ev.assistant_message.content
                       if not (isinstance(b, dict) and b.get("type") == "text" and not b.get("text"))]  # fmt: skip
        self.results = messages(ev.tool_results)

    def lines(self) -> list[tuple[bytes, float]]:
        """Its lines' middles: one per block, then its tool results (after the message, as Claude Code)."""
        # caliban reports no API request id: the message id stands in (ccusage counts a message once by both)
        ident = orjson.dumps(self.id)
        tail = (orjson.dumps(self.cost), ESTIMATE if self.estimated else b"")
        fixed = (ident, orjson.dumps(self.model), orjson.dumps(self.stop), orjson.dumps(self.usage), ident, *tail)
        made = [(ASSISTANT % (fixed[0], fixed[1], block, *fixed[2:]), self.t) for block in self.blocks]
        return made + [(RESULTS % bytes(result), self.t) for result in self.results]


class Transcript:
    """One session file's lines, an `Observer` of one input stream. `session_id`: the stream's
    (a log's is told when it opens: files.Written); `from_log`: a log's, whose line ids are
    derived from it (the same log gives the same file and lines), where the shim's are random
    (a resumed file goes on); `parent`: the uuid a resumed session's first line follows;
    `written_at`: a replayed file's modification time, where its estimated times start (the
    same log, the same times)."""

    def __init__(
        self,
        *,
        cwd: str,
        version: str,
        entrypoint: str,
        session_id: str | None = None,
        parent: str | None = None,
        written_at: float | None = None,
        from_log: bool = False,
        git_branch: str | None = None,
    ) -> None:
        self.session_id = session_id
        self.source = ""  # the log's path or URL (a log's transcript: files.Written)
        self.git_branch = git_branch  # the cwd's branch, when the writer knows it (caliban-claude)
        self.cwd = cwd
        self.version = version
        self.entrypoint = entrypoint
        self.leaf = parent  # the last line's uuid
        self.written_at = written_at
        self.from_log = from_log  # a headless log's init names the cwd (the project folder), its echoes the prompts
        self.derived = from_log
        self.lines: list[bytes] = []  # ready for the file
        self._ids: Ids | None = None  # made once the session is named
        self._suffix: bytes | None = None
        self._stamp = (-1.0, b"")  # the last time written and how (a turn's lines share one)
        self._held: list[tuple[bytes, float] | Turn] = []  # the run's line middles (or turns) not yet given their ids
        self._last: Turn | None = None  # the last turn, until the next ends or the run does
        self._turn: tuple[str, str] = ("", "")  # the open turn's message id and model
        self._wire: dict[str, int] = dict.fromkeys(COUNTERS, 0)  # the run's usage written so far
        self._cost = 0.0  # and its cost
        self._estimated: list[Turn] = []  # the run's turns without usage of their own (caliban -p)
        self._prompt: Any = None
        self._prompted = False
        self._start: float | None = None  # the stream's first run's start
        self._open = False  # a run is open (between its start and its end)
        self._interrupted = False  # the app interrupted the open run

    def take(self) -> list[bytes]:
        lines, self.lines = self.lines, []
        return lines

    # ------------------------------------------------------------------ from the shell

    # ------------------------------------------------------------------ the Observer

    def prompt(self, content: Any, t: float) -> None:
        """A run's prompt (core/prompts.py: the app's message, a headless echo, a raw log's
        history at the run's end): the run's first goes before its turns, a further one after
        what came before it."""
        line = (PROMPT % orjson.dumps(content), t)
        if not self._prompted:
            self._held.insert(0, line)
        else:
            if self._last is not None:
                self._held.append(self._last)
                self._last = None
            self._held.append(line)
        self._prompt, self._prompted = content, True
        self._release(None)

    def headless_frame(self, frame: HeadlessFrame, t: float) -> None:
        pass  # (its init names the stream; its echoes are prompts)

    def interrupted(self) -> None:
        """The app interrupted the open run (the shim knows it): said after its turns, as Claude Code."""
        self._interrupted = self._open

    def run_start(self, model: str | None, t: float) -> None:
        self._open = True
        if self._start is None:
            self._start = t

    def turn_start(self, ev: TurnStart, t: float) -> None:
        self._turn = (ev.message_id, ev.model)

    def tool_start(self, ev: ToolCallStart, t: float) -> None:
        pass

    def tool_end(self, tool_use_id: str, name: str | None, input: Any, end: ToolCallEnd, t: float) -> None:
        pass  # its result is in TurnEnd's copy (a headless turn's only there), written after the turn's message

    def turn_end(self, ev: TurnEnd, model: str | None, cost: float, t: float) -> None:
        message_id, turn_model = self._turn
        # headless input names no message and reports no usage per turn: both made here
        estimated = not message_id and not any(ev.usage.counts().values())
        turn = Turn(ev, message_id or f"msg_{self._ids_for(1)[0]}", model or turn_model, cost, t, estimated)
        for key in COUNTERS:
            self._wire[key] += turn.usage[key]
        self._cost += cost
        if estimated:
            self._estimated.append(turn)
        if self._last is not None:
            self._held.append(self._last)
        self._last, self._turn = turn, ("", "")
        if self._prompted:
            self._release(None)

    def run_end(self, run: RunSummary, t: float) -> None:
        if self._last is not None:
            self._held.append(self._last)
        if self._estimated:
            self._apportion(run)
        if run.stop_kind == "ProviderError":  # the CLI's synthetic answer, after what the run said
            error = api_error(str(run.stop_value))
            self._held.append((API_ERROR % (b'"%s"' % self._ids_for(1)[0].encode(), orjson.dumps(
                {"type": "text", "text": error.text}), orjson.dumps(error.category), orjson.dumps(error.status),
                orjson.dumps(error.type)), t))
        if self._interrupted:
            self._held.append((PROMPT % orjson.dumps([{"type": "text", "text": INTERRUPTED}]), t))
        self._release(run)
        if self._prompt is not None and self.leaf is not None and self.session_id is not None:
            self.lines.append(_ENCODE({"type": "last-prompt", "lastPrompt": prompt_text(self._prompt),
                                       "leafUuid": self.leaf, "sessionId": self.session_id}) + b"\n")  # fmt: skip
        self._prompt, self._prompted, self._last = None, False, None
        self._open = self._interrupted = False
        self._wire, self._cost, self._estimated = dict.fromkeys(COUNTERS, 0), 0.0, []

    def _apportion(self, run: RunSummary) -> None:
        """What the run reports beyond its turns' own usage and cost, split evenly across the
        turns that had none (the remainder on the last), so the readers' sums are the result's."""
        turns, wire = self._estimated, wire_usage(run.usage)
        for key in COUNTERS:
            share, rest = divmod(max(wire[key] - self._wire[key], 0), len(turns))
            for turn in turns:
                turn.usage[key] = share
            turns[-1].usage[key] += rest
        cost = max(run.cost_usd - self._cost, 0.0)
        for turn in turns[:-1]:
            turn.cost = cost / len(turns)
        turns[-1].cost = cost - sum(turn.cost for turn in turns[:-1])

    # ------------------------------------------------------------------ lines

    def mark(self) -> str:
        """What every id of a log's transcript starts with, its lines' and its messages' (a live
        session's are random: ''), so a later translation of the log finds its lines (files.renew)."""
        self._ids_for(0)
        return self._ids.prefix if self._ids is not None else ""

    def _ids_for(self, count: int) -> list[str]:
        if self._ids is None:
            # a log's ids from its session and its path: two logs of one session (a run, its resume) share a file
            self._ids = Ids(f"{self.session_id}\0{self.source}" if self.derived else None)
        return self._ids.next(count)

    def _release(self, run: RunSummary | None) -> None:
        """The held lines, given their ids and times, chained, in order, never stamped before the
        line above. A replayed file's wait for its run's end (`run`), whose clock says whether
        their times are an estimate to start at the file's own time: all shifted alike."""
        if run is None and (self.written_at is not None or self._estimated):
            return  # (an estimated turn's usage is known at the run's end)
        ready, self._held = self._held, []
        middles = [line for item in ready for line in (item.lines() if isinstance(item, Turn) else (item,))]
        if not middles:
            return
        shift = 0.0
        if self.written_at is not None and run is not None and run.duration_source == ESTIMATED:
            shift = self.written_at - (self._start or 0.0)  # a replay's estimate, from the file's own time
        suffix, out = self._common(), self.lines.append
        parent = b"null" if self.leaf is None else b'"%s"' % self.leaf.encode()
        last_t, stamp = self._stamp
        for (middle, t), uid in zip(middles, self._ids_for(len(middles)), strict=True):
            t = max(t + shift, last_t)
            if t != last_t:
                last_t, stamp = t, iso(t).encode()
            ident = uid.encode()
            out(b'{"parentUuid":%s,"isSidechain":false,%s,"uuid":"%s","timestamp":"%s",%s' % (parent, middle, ident, stamp, suffix))
            parent = b'"%s"' % ident
        self._stamp = (last_t, stamp)
        self.leaf = uid

    def _common(self) -> bytes:
        """The keys every message line ends with, encoded once (`"userType":…}` and a newline)."""
        if self._suffix is None:
            keys = {"userType": "external", "entrypoint": self.entrypoint, "cwd": self.cwd,
                    "sessionId": self.session_id, "version": self.version}  # fmt: skip
            if self.git_branch is not None:
                keys["gitBranch"] = self.git_branch
            tail = _ENCODE(keys)
            self._suffix = tail[1:] + b"\n"
        return self._suffix
