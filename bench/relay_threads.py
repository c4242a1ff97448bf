"""The relay's threads, counted: the shim's threads alive (/proc/PID/task) while N relayed calls
of the app's own tools wait side by side, first for the app's `can_use_tool`, then for its
handler (`mcp_message`), for N = 1 and N = 50. The installed `caliban-claude` over its pipes,
the raw stream-json protocol (the app holds every request until all N have come), the fake
caliban behind it calling its MCP servers in parallel (tests/support/fake_caliban.py).
Target: as many threads with 50 calls waiting as with one (no thread a call).
Run: .venv/bin/python bench/relay_threads.py
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
FAKE = ROOT / "tests" / "support" / "fake_caliban.py"
SHIM = str(Path(sys.executable).with_name("caliban-claude"))
ARGV = [SHIM, "--output-format", "stream-json", "--verbose", "--input-format", "stream-json",
        "--permission-prompt-tool", "stdio"]  # fmt: skip
MANIFEST = {"initializeResult": {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                                 "serverInfo": {"name": "calc", "version": "1.0.0"}},
            "toolsListResult": {"tools": [{"name": "add", "inputSchema": {"type": "object"}}]}}  # fmt: skip
WAIT_S = 60.0


class App:
    def __init__(self, root: Path, calls: int) -> None:
        wrapper = root / "caliban"
        wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE}" "$@"\n')
        wrapper.chmod(0o755)
        script = [{"mcp_calls": [{"tool": "mcp__calc__add", "input": {"a": n, "b": 1}} for n in range(calls)],
                   "text": "Done.", "parallel": True}]  # fmt: skip
        env = {**os.environ, "CALIBAN_BIN": str(wrapper), "CALIBAN_SESSIONS_DIR": str(root / "sessions"),
               "FAKE_CALIBAN_SCRIPTS": json.dumps(script)}  # fmt: skip
        self.proc = subprocess.Popen(ARGV, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     env=env)  # fmt: skip
        self.rest = b""

    def send(self, frame: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(frame).encode() + b"\n")
        self.proc.stdin.flush()

    def answer(self, rid: str, body: dict[str, Any]) -> None:
        self.send({"type": "control_response", "response": {"subtype": "success", "request_id": rid, "response": body}})

    def frame(self, deadline: float) -> dict[str, Any]:
        assert self.proc.stdout is not None
        while b"\n" not in self.rest:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.proc.stdout], [], [], left)[0]:
                raise TimeoutError("the shim said nothing in time")
            chunk = os.read(self.proc.stdout.fileno(), 1 << 16)
            if not chunk:
                raise EOFError("the shim's stdout ended")
            self.rest += chunk
        line, self.rest = self.rest.split(b"\n", 1)
        frame: dict[str, Any] = json.loads(line)
        return frame

    def requests(self, subtype: str, count: int, deadline: float) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        while len(found) < count:
            frame = self.frame(deadline)
            if frame.get("type") == "control_request" and frame["request"].get("subtype") == subtype:
                found.append(frame)
            elif frame.get("type") == "control_response":
                continue
        return found

    def threads(self) -> int:
        return len(os.listdir(f"/proc/{self.proc.pid}/task"))


def measure(calls: int) -> tuple[int, int, int]:
    """The shim's threads at rest, with `calls` waiting for can_use_tool, with them waiting for the handler."""
    with tempfile.TemporaryDirectory() as tmp:
        app = App(Path(tmp), calls)
        try:
            deadline = time.monotonic() + WAIT_S
            app.send({"type": "control_request", "request_id": "init",
                      "request": {"subtype": "initialize", "sdkMcpServers": ["calc"],
                                  "sdkMcpServerManifests": {"calc": MANIFEST}}})  # fmt: skip
            while app.frame(deadline).get("type") != "control_response":
                pass
            time.sleep(0.2)
            rest = app.threads()
            app.send({"type": "user", "message": {"role": "user", "content": "add"}})
            asked = app.requests("can_use_tool", calls, deadline)
            time.sleep(0.2)
            at_gate = app.threads()
            for request in asked:
                app.answer(request["request_id"], {"behavior": "allow", "updatedInput": request["request"]["input"]})
            relayed = app.requests("mcp_message", calls, deadline)
            time.sleep(0.2)
            at_handler = app.threads()
            for request in relayed:
                message = request["request"]["message"]
                reply = {"jsonrpc": "2.0", "id": message["id"], "result": {"content": [{"type": "text", "text": "ok"}]}}
                app.answer(request["request_id"], {"mcp_response": reply})
            while app.frame(deadline).get("type") != "result":
                pass
            return rest, at_gate, at_handler
        finally:
            app.proc.kill()
            app.proc.wait()


def main() -> int:
    figures = {calls: measure(calls) for calls in (1, 50)}
    for calls, (rest, at_gate, at_handler) in figures.items():
        print(f"{calls:2d} relayed call(s) side by side: shim threads {rest} at rest, {at_gate} while they wait for "
              f"can_use_tool, {at_handler} while they wait for the handler")  # fmt: skip
    met = figures[50][1:] == figures[1][1:]
    print(f"target: as many threads with 50 calls waiting as with one: {'met' if met else 'NOT met'}")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
