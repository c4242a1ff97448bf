"""The drive backend's permission bridge, timed: from a prompt appearing in (the fake)
caliban to the app's `can_use_tool` being called, and from the app's answer to
`caliban_permit` reaching caliban (the poll interval included), over 100 prompts. The real
claude-agent-sdk drives `caliban-claude`, which drives tests/support/fake_caliban_serve.py; the two
ends are stamped by the fake's log and by the callback (one machine, one wall clock).
Target: a median of at most 50 ms each way. Run: .venv/bin/python bench/permission_latency.py
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from claude_agent_sdk import ClaudeAgentOptions, ClaudeSDKClient, PermissionResultAllow

ROOT = Path(__file__).resolve().parent.parent
FAKE = ROOT / "tests" / "support" / "fake_caliban.py"
SHIM = str(Path(sys.executable).with_name("caliban-claude"))
PROMPTS = 100
TARGET_MS = 50.0


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


async def measure(root: Path, quiet: float) -> tuple[list[float], list[float]]:
    wrapper = root / "caliban"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE}" "$@"\n')
    wrapper.chmod(0o755)
    # One tool a turn, each turn a little text first: a prompt at a time, as caliban raises them.
    turns = [{"text": f"step {i}", "tools": [{"name": "Bash", "input": {"command": f"true {i}"}, "id": f"toolu_{i}"}]}
             for i in range(PROMPTS)]  # fmt: skip
    script = {"quiet_before_ask": quiet, "messages": [{"turns": [*turns, {"text": "done"}]}]}
    log = root / "serve.jsonl"
    called: dict[str, float] = {}
    answered: dict[str, float] = {}

    async def allow(name: str, tool_input: dict[str, Any], context: Any) -> PermissionResultAllow:
        called[context.tool_use_id] = time.time()
        answered[context.tool_use_id] = time.time()
        return PermissionResultAllow()

    env = {"CALIBAN_BIN": str(wrapper), "FAKE_SERVE_SCRIPT": json.dumps(script), "FAKE_SERVE_LOG": str(log)}
    options = ClaudeAgentOptions(cli_path=SHIM, env=env, can_use_tool=allow)
    async with ClaudeSDKClient(options) as client:
        await client.query("go")
        async for _ in client.receive_response():
            pass
    entries = [json.loads(line) for line in log.read_text().splitlines()]
    pending = {e["pending"]: e["t"] for e in entries if "pending" in e}
    permitted = {e["permit"]: e["t"] for e in entries if "permit" in e}
    to_app = [(called[t] - pending[t]) * 1000 for t in called]
    to_caliban = [(permitted[t] - answered[t]) * 1000 for t in answered]
    return to_app, to_caliban


def main() -> int:
    status = 0
    # A prompt right after the turn's last event (the poll at its fastest), and one after a quiet
    # 200 ms (the poll backed off to its ceiling): the two ends of what a prompt meets.
    for quiet in (0.0, 0.2):
        with tempfile.TemporaryDirectory() as tmp:
            to_app, to_caliban = asyncio.run(measure(Path(tmp), quiet))
        for what, values in (("prompt in caliban -> app's can_use_tool", to_app),
                             ("app's answer -> caliban_permit", to_caliban)):  # fmt: skip
            median, p99 = statistics.median(values), percentile(values, 99)
            met = median <= TARGET_MS
            status |= not met
            print(f"{what} ({quiet * 1000:.0f} ms quiet before the prompt): median {median:.1f} ms, p99 {p99:.1f} ms "
                  f"over {len(values)} prompts (target: median <= {TARGET_MS:.0f} ms: {'met' if met else 'MISSED'})")  # fmt: skip
    return status


if __name__ == "__main__":
    sys.exit(main())
