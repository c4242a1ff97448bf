"""A minimal ACP client (the Agent Client Protocol, newline-delimited JSON-RPC 2.0 on stdio), as
an editor is one: it runs an ACP agent (Zed's adapters, node), sends `initialize`,
`session/new`, `session/prompt`, `session/cancel`, and answers the agent's `fs/read_text_file`,
`fs/write_text_file`, `session/request_permission` and, where it says it has a terminal, the
`terminal/*` methods (a command is run to its end by `sh -c` at `terminal/create`, in the
workspace: the later methods answer from that). Shared by the ACP tests (no tests)."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from pathlib import Path
from typing import Any


class AcpClient:
    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path, permission: str = "allow") -> None:
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     env=env, cwd=cwd)  # fmt: skip
        self.cwd, self.permission = cwd, permission
        self.next_id = 0
        self.answers: dict[int, dict[str, Any]] = {}
        self.updates: list[dict[str, Any]] = []  # session/update notifications
        self.asked: list[tuple[str, dict[str, Any]]] = []  # the agent's requests: method, params
        self.written: dict[str, str] = {}
        self.terminals: dict[str, subprocess.CompletedProcess[str]] = {}  # by terminalId
        self._changed = threading.Condition()
        self.stderr: list[bytes] = []
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=lambda: self.stderr.extend(self.proc.stderr or []), daemon=True).start()

    def _send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            msg = json.loads(line)
            if "method" in msg and "id" in msg:
                self._send({"jsonrpc": "2.0", "id": msg["id"], "result": self._answer(msg["method"], msg.get("params", {}))})
            with self._changed:
                if "method" in msg and "id" not in msg and msg["method"] == "session/update":
                    self.updates.append(msg["params"])
                elif "id" in msg and "method" not in msg:
                    self.answers[msg["id"]] = msg
                self._changed.notify_all()

    def _answer(self, method: str, params: dict[str, Any]) -> Any:
        self.asked.append((method, params))
        if method == "fs/read_text_file":
            return {"content": Path(params["path"]).read_text()}
        if method == "fs/write_text_file":
            self.written[params["path"]] = params["content"]
            return None
        if method == "session/request_permission":
            return {"outcome": {"outcome": "selected", "optionId": self.permission}}
        if method == "terminal/create":
            env = {**os.environ, **{e["name"]: e["value"] for e in params.get("env", [])}}
            done = subprocess.run(["/bin/sh", "-c", params["command"], *params.get("args", [])], cwd=params.get("cwd") or self.cwd,
                                  env=env, capture_output=True, text=True, timeout=30)  # fmt: skip
            terminal = f"term_{len(self.terminals)}"
            self.terminals[terminal] = done
            return {"terminalId": terminal}
        if method.startswith("terminal/"):
            done = self.terminals[params["terminalId"]]
            status = {"exitCode": done.returncode, "signal": None}
            if method == "terminal/output":
                return {"output": done.stdout + done.stderr, "truncated": False, "exitStatus": status}
            return status if method == "terminal/wait_for_exit" else {}  # (release, kill)
        return None

    def request(self, method: str, params: dict[str, Any], timeout: float = 60) -> dict[str, Any]:
        mid, self.next_id = self.next_id, self.next_id + 1
        self._send({"jsonrpc": "2.0", "id": mid, "method": method, "params": params})
        deadline = time.monotonic() + timeout
        with self._changed:
            while mid not in self.answers:
                left = deadline - time.monotonic()
                if left <= 0 or self.proc.poll() is not None:
                    raise TimeoutError(f"{method}: no answer ({b''.join(self.stderr)[-2000:]!r})")
                self._changed.wait(min(left, 0.5))
            return self.answers.pop(mid)

    def notify(self, method: str, params: dict[str, Any]) -> None:
        self._send({"jsonrpc": "2.0", "method": method, "params": params})

    def wait_for(self, method: str, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while not any(m == method for m, _ in self.asked):
            if time.monotonic() > deadline:
                raise TimeoutError(method)
            time.sleep(0.02)

    def start(self, fs_write: bool = False, terminal: bool = False) -> str:
        """initialize and session/new: the session id."""
        caps = {"fs": {"readTextFile": True, "writeTextFile": fs_write}, "terminal": terminal}
        init = self.request("initialize", {"protocolVersion": 1, "clientCapabilities": caps})
        assert "result" in init, init
        new = self.request("session/new", {"cwd": str(self.cwd), "mcpServers": []})
        assert "result" in new, new
        self.session = new["result"]
        return str(new["result"]["sessionId"])

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:  # (the recording's adapter needed SIGTERM once its stdin closed)
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
