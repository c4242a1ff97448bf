"""One `caliban [--model M] mcp serve` process, as its client: newline-delimited JSON-RPC 2.0
on its stdin/stdout (rmcp 1.7), a tool call at a time waited for by id, its stderr forwarded
to ours. The server ends when its stdin closes; a run is stopped only by ending the server
(the surface has no cancel), and no server outlives its client (`close()`, `kill()`).

Whatever the server does, the client is bounded: each request has one deadline, from its first
byte written (the server's stdin is non-blocking: one that stops reading fills its pipe) to
its answer; only the answer to a request in flight is kept (one to an id never sent, or to a
request given up, is dropped as it comes).
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
import threading
import time
from typing import IO, Any

import orjson

from translator.shim.limits import MCP_S
from translator.shim.place import Place

PROTOCOL = "2025-06-18"
TOOLS = frozenset({"caliban_run", "caliban_poll", "caliban_status", "caliban_send_input", "caliban_permit"})
START_S = 30.0  # to start and list its tools (a loaded machine starts slowly)
MAX_LINE = 256 << 20  # one answer line (a poll carries RunEnd's whole history)


class ServerGone(Exception):
    """The server ended, did not start, or stopped answering: why, in one line."""


class ToolError(Exception):
    """A tool's `isError` answer: the server's own text."""


class McpServer:
    def __init__(self, argv: list[str], place: Place, call_s: float = MCP_S) -> None:
        """`place`: the session's environment and folder, the server's; `call_s`: one tool
        call's deadline (they answer at once: a poll never blocks)."""
        self.argv, self.call_s = argv, call_s
        self.stderr_tail = ""
        self._answers: dict[int, dict[str, Any]] = {}
        self._asked: set[int] = set()  # the requests in flight: only their answers are kept
        self._ready = threading.Condition()
        self._gone = False
        self._next = 0
        self._write = threading.Lock()
        self._started = False  # until then its stderr is kept, not forwarded: a failed probe is one line
        try:
            # Its own process group: a terminal's Ctrl-C reaches the shim only.
            self.proc: subprocess.Popen[bytes] | None = subprocess.Popen(
                argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, process_group=0,
                env=dict(place.env), cwd=place.cwd,
            )  # fmt: skip
        except OSError as exc:
            self.proc = None
            self._gone = True
            self.stderr_tail = f"cannot run {argv[0]}: {exc.strerror or exc}"
            return
        assert self.proc.stdin is not None and self.proc.stdout is not None and self.proc.stderr is not None
        os.set_blocking(self.proc.stdin.fileno(), False)  # (a write waits in poll(), to its deadline)
        threading.Thread(target=self._read, args=(self.proc.stdout,), name="mcp-out", daemon=True).start()
        self._errors = threading.Thread(target=self._forward_stderr, args=(self.proc.stderr,), name="mcp-err", daemon=True)
        self._errors.start()

    # ------------------------------------------------------------------ protocol

    def start(self) -> None:
        """initialize, initialized, tools/list: raises ServerGone unless the five tools are there."""
        self.request("initialize", {"protocolVersion": PROTOCOL, "capabilities": {},
                                    "clientInfo": {"name": "caliban-claude", "version": "1"}}, START_S)  # fmt: skip
        self._send({"jsonrpc": "2.0", "method": "notifications/initialized"}, time.monotonic() + START_S, START_S)
        listed = self.request("tools/list", {}, START_S).get("tools")
        names = {t.get("name") for t in listed if isinstance(t, dict)} if isinstance(listed, list) else set()
        if not names >= TOOLS:
            raise ServerGone(f"its MCP server lacks {', '.join(sorted(TOOLS - names))}")
        self._started = True

    def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """A tool's success body (the JSON in its one text block); ToolError for `isError`."""
        result = self.request("tools/call", {"name": tool, "arguments": arguments}, self.call_s)
        content = result.get("content")
        text = content[0].get("text", "") if isinstance(content, list) and content and isinstance(content[0], dict) else ""
        if result.get("isError"):
            raise ToolError(text)
        try:
            body = orjson.loads(text)
        except orjson.JSONDecodeError:
            raise ServerGone(f"{tool} answered with no JSON body: {text[:80]!r}") from None
        if not isinstance(body, dict):
            raise ServerGone(f"{tool} answered {text[:80]!r}")
        return body

    def poll(self, run_id: str, cursor: int) -> tuple[dict[str, Any], list[Any], int]:
        """caliban_poll's body, its events, and the cursor after them. caliban's `next_cursor` is
        its buffer's length, the cursor sent plus the events returned (registry.rs `poll`):
        anything else is the server's protocol error (a cursor that skips or repeats events
        would lose or double them), and ServerGone."""
        body = self.call("caliban_poll", {"run_id": run_id, "cursor": cursor})
        events, after = body.get("events"), body.get("next_cursor")
        if not isinstance(events, list):
            raise ServerGone(f"caliban_poll answered events that are no list: {str(events)[:80]!r}")
        if type(after) is not int or after != cursor + len(events):
            raise ServerGone(f"caliban_poll answered next_cursor {repr(after)[:40]}, where its events end at "
                             f"{cursor + len(events)}")  # fmt: skip
        return body, events, after

    def request(self, method: str, params: dict[str, Any], timeout: float) -> dict[str, Any]:
        """Its result, within `timeout` seconds of its first byte written."""
        deadline = time.monotonic() + timeout
        with self._ready:
            self._next += 1
            rid = self._next
            self._asked.add(rid)
        try:
            self._send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}, deadline, timeout)
            with self._ready:
                left = deadline - time.monotonic()
                if not self._ready.wait_for(lambda: rid in self._answers or self._gone, max(left, 0.0)):
                    raise ServerGone(f"no answer to {method} within {timeout:g} s")
                if rid not in self._answers:
                    raise ServerGone(self.why())
                answer = self._answers[rid]
        finally:
            with self._ready:
                self._asked.discard(rid)
                self._answers.pop(rid, None)
        if "error" in answer:
            error = answer["error"] if isinstance(answer["error"], dict) else {}
            raise ServerGone(f"{method}: {error.get('message', 'error')} ({error.get('code')})")
        result = answer.get("result")
        return result if isinstance(result, dict) else {}

    def _send(self, message: dict[str, Any], deadline: float, timeout: float) -> None:
        """The whole line, by `deadline` (a server that stops reading does not hold us longer)."""
        proc = self.proc
        if proc is None or proc.stdin is None:
            raise ServerGone(self.why())
        data = memoryview(orjson.dumps(message) + b"\n")
        unread = ServerGone(f"caliban mcp serve read none of its input for {timeout:g} s")
        if not self._write.acquire(timeout=max(deadline - time.monotonic(), 0.0)):
            raise unread
        try:
            fd = proc.stdin.fileno()
            ready = select.poll()
            ready.register(fd, select.POLLOUT)
            while data:
                try:
                    data = data[os.write(fd, data) :]
                except BlockingIOError:  # its pipe is full: wait for it to read, to the deadline
                    left = deadline - time.monotonic()
                    if left <= 0 or not ready.poll(max(1, int(left * 1000))):
                        raise unread from None
        except (OSError, ValueError):
            raise ServerGone(self.why()) from None
        finally:
            self._write.release()

    def _read(self, stream: IO[bytes]) -> None:
        try:
            while line := stream.readline(MAX_LINE):
                if not line.endswith(b"\n") and len(line) >= MAX_LINE:
                    break  # a line past any answer's size: the server is broken
                try:
                    msg = orjson.loads(line)
                except orjson.JSONDecodeError:
                    continue
                if isinstance(msg, dict) and isinstance(msg.get("id"), int):
                    with self._ready:
                        if msg["id"] in self._asked:  # (else never sent, or given up: not kept)
                            self._answers[msg["id"]] = msg
                            self._ready.notify_all()
        except (OSError, ValueError):
            pass
        with self._ready:
            self._gone = True
            self._ready.notify_all()

    def _forward_stderr(self, stream: IO[bytes]) -> None:
        for line in iter(stream.readline, b""):
            text = line.decode("utf-8", "replace").strip()
            if not self._started:
                self.stderr_tail = self.stderr_tail or text  # (clap's first line says why)
                continue
            if text:
                self.stderr_tail = text
            with contextlib.suppress(OSError, ValueError, AttributeError):  # (no sys.stderr: started without one)
                os.write(sys.stderr.fileno(), line if line.endswith(b"\n") else line + b"\n")

    # ------------------------------------------------------------------ lifetime

    @property
    def alive(self) -> bool:
        return self.proc is not None and not self._gone and self.proc.poll() is None

    def why(self) -> str:
        """What ended the server, for the app's error result."""
        if self.proc is None:
            return self.stderr_tail
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(0.5)  # (its output closes a moment before it exits)
        if self.proc.poll() is not None:
            self._errors.join(0.5)
        status = self.proc.poll()
        if status is None:
            ended = "closed its output"
        elif status < 0:
            ended = f"was killed by {signal.Signals(-status).name}"
        else:
            ended = f"exited with status {status}"
        return f"caliban mcp serve {ended}" + (f": {self.stderr_tail}" if self.stderr_tail else "")

    def close(self, grace: float = 2.0) -> None:
        """End it as its stdin closing does (exit 0), then by signal if it lingers."""
        proc = self.proc
        if proc is None:
            return
        with contextlib.suppress(OSError, ValueError), self._write:
            if proc.stdin is not None:
                proc.stdin.close()
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            self._signal(signal.SIGTERM)
            try:
                proc.wait(1.0)
            except subprocess.TimeoutExpired:
                self.kill()

    def kill(self) -> None:
        """Stop it at once (an interrupt: the only cancel the surface has), and reap it."""
        self._signal(signal.SIGKILL)
        if self.proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(5.0)

    def _signal(self, signum: int) -> None:
        proc = self.proc
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(OSError):
                os.killpg(proc.pid, signum)  # the group: whatever the server started goes too
