"""A stop signal to `caliban-claude` on the drive backend leaves no `caliban mcp serve` behind,
and `CALIBAN_CLAUDE_BACKEND` forces the backend (raw protocol, no SDK)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from support_processes import fake_caliban, running

SHIM = str(Path(sys.executable).with_name("caliban-claude"))


def test_sigterm_mid_run_ends_the_server_too(tmp_path: Path) -> None:
    wrapper = fake_caliban(tmp_path)
    log = tmp_path / "serve.jsonl"
    slow = {"delay": 0.2, "messages": [{"turns": [{"text": " ".join(["w"] * 200)}]}]}
    env = {**os.environ, "CALIBAN_BIN": str(wrapper), "CALIBAN_CLAUDE_BACKEND": "drive",
           "FAKE_SERVE_SCRIPT": json.dumps(slow), "FAKE_SERVE_LOG": str(log)}  # fmt: skip
    shim = subprocess.Popen([SHIM, "--output-format", "stream-json", "--input-format", "stream-json", "--verbose"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)  # fmt: skip
    try:
        assert shim.stdin is not None and shim.stdout is not None
        shim.stdin.write(b'{"type":"control_request","request_id":"r1","request":{"subtype":"initialize"}}\n'
                         b'{"type":"user","message":{"role":"user","content":"go"}}\n')  # fmt: skip
        shim.stdin.flush()
        assert b'"request_id":"r1"' in shim.stdout.readline()
        deadline = time.monotonic() + 30
        while b'"caliban_poll"' not in (log.read_bytes() if log.exists() else b"") and time.monotonic() < deadline:
            time.sleep(0.05)  # (the run has started: it is being polled)
        (server,) = [json.loads(line)["pid"] for line in log.read_text().splitlines() if '"pid"' in line]
        assert running(server)
        shim.send_signal(signal.SIGTERM)
        assert shim.wait(30) == 128 + signal.SIGTERM
        deadline = time.monotonic() + 10
        while running(server) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not running(server)
    finally:
        shim.kill()
        shim.wait()
