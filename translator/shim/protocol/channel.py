"""The SDK side of the session, as claude-agent-sdk's `Query` is the CLI side: stdin lines in,
frames out, and control requests both ways. It is the one owner of the requests the shim sends
the app (`can_use_tool`, `hook_callback`, `mcp_message`) and of the routing of every
`control_response` to the request it answers; the app's own requests go to the session, which
answers each at once (the SDK blocks on them).

A request of the shim's is settled by a callback (`request`), called once with its `Reply`
from the thread that learns it: the reader that reads the app's answer, the one timer thread
for a request's timeout, or whoever cancels. No thread waits for an answer, so calls that wait
side by side cost none each (`waited`: a callback's value waited for, by a thread with nothing
else to do).
An interrupt, or the shim stopping, `cancel()`s every request: the run they belonged to is over.
The end of the app's input ends every request too, and every later one is unanswered at once
(`Reply.unanswered`, which the asker settles as failing closed).
"""

from __future__ import annotations

import errno
import heapq
import itertools
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import orjson

from translator.shim.protocol import stdin
from translator.shim.protocol.frames import error
from translator.shim.protocol.transport import Stdio, Transport
from translator.shim.say import PROG, warn

INPUT_ENDED = "the app closed its input: no answer can come"
Inbound = dict[str, Any] | str | None  # a user message; the error of one not read; None: stdin ended
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Reply:
    """What came of a request of the shim's: the app's answer, its error, or none (cancelled)."""

    body: dict[str, Any] | None = None  # the app's success answer
    error: str = ""  # the app's error answer; or why no answer can come
    unanswered: bool = False  # none can come: the app's input ended, or the timeout passed


Settle = Callable[[Reply], None]


def waited(start: Callable[[Callable[[T], None]], None]) -> T:
    """What `start` hands its callback, waited for on this thread (every request ends: an
    answer, a cancel, the input's end or a timeout)."""
    done, got = threading.Event(), []

    def then(value: T) -> None:
        got.append(value)
        done.set()

    start(then)
    done.wait()
    return got[0]


class _Timers:
    """The requests' deadlines, on one thread for all of them (started at the first)."""

    def __init__(self, expire: Callable[[str, float], None]) -> None:
        self._expire = expire
        self._due: list[tuple[float, int, str, float]] = []  # (when, order, request id, its timeout)
        self._order = itertools.count()
        self._changed = threading.Condition()
        self._started = False

    def after(self, seconds: float, rid: str) -> None:
        with self._changed:
            heapq.heappush(self._due, (time.monotonic() + seconds, next(self._order), rid, seconds))
            if not self._started:
                self._started = True
                threading.Thread(target=self._run, name="request-timeouts", daemon=True).start()
            self._changed.notify()

    def _run(self) -> None:
        while True:
            with self._changed:
                while not self._due or self._due[0][0] > time.monotonic():
                    left = self._due[0][0] - time.monotonic() if self._due else None
                    self._changed.wait(None if left is None else min(left, threading.TIMEOUT_MAX))
                _, _, rid, seconds = heapq.heappop(self._due)
            self._expire(rid, seconds)  # (a request answered since: nothing to do)


def _unchanged(frames: list[bytes]) -> list[bytes]:
    return frames


class Channel:
    def __init__(self, on_request: Callable[[str, dict[str, Any]], None], on_user: Callable[[Inbound], None],
                 shape: Callable[[list[bytes]], list[bytes]] = _unchanged, transport: Transport | None = None) -> None:  # fmt: skip
        self._on_request, self._on_user = on_request, on_user
        self.transport = transport or Stdio()
        self.shape = shape  # what of the frames is written as they come (print mode holds some back)
        self._out = threading.Lock()
        self.closed = False  # stdout failed: the SDK stopped reading, or a write error
        self.write_error: str | None = None  # what failed, when it was not the reader leaving
        self._lock = threading.Lock()
        self._waiting: dict[str, Settle] = {}  # the shim's requests not settled yet, by id
        self._timers = _Timers(self._expire)
        self.input_ended = False

    # ------------------------------------------------------------------ frames out

    def write(self, frames: list[bytes]) -> None:
        self.write_bytes(b"".join(self.shape(frames)))

    def write_bytes(self, raw: bytes) -> None:
        data = memoryview(raw)
        with self._out:
            while data and not self.closed:
                try:
                    data = data[self.transport.write(data) :]
                except OSError as exc:
                    self.closed = True
                    if exc.errno != errno.EPIPE:
                        self.write_error = exc.strerror or str(exc)

    def send(self, *frames: dict[str, Any]) -> None:
        self.write([orjson.dumps(f) + b"\n" for f in frames])

    # ------------------------------------------------------------------ lines in

    def read_stdin(self) -> None:
        """Until EOF; then the session is told there is nothing more, whatever happened here."""
        try:
            for n, line in stdin.lines(self.transport.read):
                try:
                    self.message(n, line)
                except Exception as exc:  # a bug here must not end the reader: the app would wait
                    warn(f"stdin:{n}: internal error: {exc!r}")
        finally:  # (the session first: a call a cancelled wait lets through finds its run ended)
            self._on_user(None)
            self.end_input()

    def message(self, n: int, line: bytes | stdin.TooLong) -> None:
        if isinstance(line, stdin.TooLong):
            self.too_long(n, line)
            return
        if not line.strip():
            return
        try:
            msg, mended = stdin.decode(line)
        except ValueError:
            warn(f"stdin:{n}: not JSON, ignored: {line[:80]!r}")
            return
        if mended:
            warn(f"stdin:{n}: unpaired surrogate escape(s) replaced by U+FFFD")
        kind = msg.get("type") if isinstance(msg, dict) else None
        if kind == "control_request":
            rid, request = msg.get("request_id"), msg.get("request")
            rid = rid if isinstance(rid, str) else "" if rid is None else orjson.dumps(rid).decode()
            try:
                self._on_request(rid, request if isinstance(request, dict) else {})
            except Exception as exc:  # answered all the same: the SDK waits on every request
                subtype = request.get("subtype") if isinstance(request, dict) else None
                self.send(error(rid, f"caliban shim: malformed {subtype} request: {exc}"))
        elif kind == "user":
            self._on_user(msg)
        elif kind == "control_response":
            self.answer(msg)  # (the app's answer to can_use_tool or a hook callback)
        elif kind not in ("control_cancel_request", "keep_alive"):
            warn(f"stdin:{n}: message of type {kind!r} ignored")

    def too_long(self, n: int, line: stdin.TooLong) -> None:
        """Not read: a user message gets its error result (in its turn), a request its answer,
        an answer to one of the shim's requests ends that request as an error (never waited for)."""
        warn(f"stdin:{n}: {line.reason}, ignored")
        why = f"{PROG}: the message was not read: {line.reason} (the most a line may have)"
        if line.kind == "user":
            self._on_user(why)
        elif line.kind == "control_request" and line.request_id is not None:
            self.send(error(line.request_id, why))
        elif line.kind == "control_response" and line.request_id is not None:  # the request it answers ends
            self.answer({"response": {"subtype": "error", "request_id": line.request_id, "error": why}})

    # ------------------------------------------------------------------ the shim's requests

    def request(self, request: dict[str, Any], then: Settle, timeout: float | None = None) -> None:
        """Send a control request; `then(reply)` once it is settled: the app decides in its own
        time, or within `timeout` seconds (past it the request is cancelled, as Claude Code
        cancels one: `control_cancel_request`, which the SDKs take to abandon the callback).
        After the app's input has ended, `then` is called at once, here."""
        rid = str(uuid.uuid4())
        with self._lock:
            ended = self.input_ended
            if not ended:
                self._waiting[rid] = then
        if ended:
            then(Reply(error=INPUT_ENDED, unanswered=True))
            return
        if timeout is not None:
            self._timers.after(timeout, rid)
        self.send({"type": "control_request", "request_id": rid, "request": request})

    def _expire(self, rid: str, timeout: float) -> None:
        with self._lock:
            then = self._waiting.pop(rid, None)
        if then is not None:  # (else it was answered, or cancelled)
            self.send({"type": "control_cancel_request", "request_id": rid})
            then(Reply(error=f"no answer within {timeout:g} s", unanswered=True))

    def notify(self, frame: dict[str, Any]) -> None:
        """A frame that wants no answer (a session state change)."""
        self.send(frame)

    def answer(self, message: dict[str, Any]) -> None:
        response = message.get("response")
        if not isinstance(response, dict):
            return
        with self._lock:
            then = self._waiting.pop(str(response.get("request_id", "")), None)
        if then is None:
            return  # (late, or not ours)
        if response.get("subtype") == "success":
            body = response.get("response")
            then(Reply(body if isinstance(body, dict) else {}))
        else:
            then(Reply(error=str(response.get("error", "error"))))

    def cancel(self, ended: bool = False) -> None:
        """Settle every request waiting: cancelled (`ended`: unanswered, the input is over)."""
        with self._lock:
            waiting, self._waiting = list(self._waiting.values()), {}
        reply = Reply(error=INPUT_ENDED, unanswered=True) if ended else Reply()
        for then in waiting:
            then(reply)

    def end_input(self) -> None:
        """The app's input ended: what waits for an answer, and what would, is unanswered."""
        with self._lock:
            self.input_ended = True
        self.cancel(ended=True)
