"""An SDK app's session on caliban-claude, on either backend (in process: support_inprocess),
for the tests of what reads its session files (tests/shim/test_shim_usage_readers.py,
test_shim_clients_history.py): its frames, its results and the config dir its files are in."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import claude_agent_sdk
from claude_agent_sdk import ClaudeAgentOptions, PermissionResultAllow, ResultMessage
from support_fixtures import FIXTURES
from support_inprocess import in_process, queried
from support_processes import fake_caliban

SHIM = str(Path(sys.executable).with_name("caliban-claude"))
COUNTERS = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens")
# -p: two runs of two and one API calls; drive: one run of two calls with the cache split
PRINT_RUNS = ("tool_use_two_turns.jsonl", "thinking.jsonl")
DRIVE_USAGE = [{"input_tokens": 1200, "output_tokens": 20, "cache_read_input_tokens": 800, "cache_creation_input_tokens": 300},
               {"input_tokens": 1500, "output_tokens": 35, "cache_read_input_tokens": 1100, "cache_creation_input_tokens": 0}]  # fmt: skip
DRIVE_SCRIPT = {"messages": [{"turns": [
    {"text": "Listing.", "tools": [{"name": "Bash", "input": {"command": "ls"}, "id": "toolu_ls", "result": "a"}],
     "usage": DRIVE_USAGE[0]},
    {"text": "One file.", "usage": DRIVE_USAGE[1]}]}]}  # fmt: skip


class Session:
    """What an app left: its results (every frame it got) and the config dir of its session files."""

    def __init__(self, root: Path, frames: list[list[Any]], said: list[str] | None = None) -> None:
        self.config, self.frames = root / "claude", frames
        self.said = said or []  # the shim's stderr lines (the drive's session: its app's stderr callback)
        self.results = [m for run in frames for m in run if isinstance(m, ResultMessage)]

    def usage(self) -> dict[str, int]:
        """The result frames' usage, summed (each run's own: one query per session on -p)."""
        return {k: sum((r.usage or {}).get(k, 0) for r in self.results) for k in COUNTERS}

    def calls(self) -> int:
        """The API calls the runs made: the distinct message ids of the assistant frames."""
        return len({m.message_id for run in self.frames for m in run if isinstance(m, claude_agent_sdk.AssistantMessage)})

    def cost(self) -> float:
        return sum(r.total_cost_usd or 0.0 for r in self.results)


def env_of(root: Path, script: str) -> dict[str, str]:
    return {"CALIBAN_BIN": str(root / "caliban"), "CALIBAN_SESSIONS_DIR": str(root / "sessions"),
            "CLAUDE_CONFIG_DIR": str(root / "claude"),
            "FAKE_CALIBAN_SCRIPTS": json.dumps([{"file": str(FIXTURES / "caliban" / script)}])}  # fmt: skip


async def on_print(root: Path) -> Session:
    """Two SDK queries on `caliban -p` (the default backend), each a session of its own."""
    fake_caliban(root)
    (root / "work").mkdir()
    frames = []
    for script in PRINT_RUNS:
        options = ClaudeAgentOptions(cli_path=SHIM, env=env_of(root, script), cwd=str(root / "work"))
        frames.append([m async for m in queried("how many files are here?", options)])
    return Session(root, frames)


async def on_drive(root: Path) -> Session:
    """One message on the drive backend (the app gates its tools: can_use_tool), two API calls."""
    fake_caliban(root)
    (root / "work").mkdir()

    async def allow(name: str, tool_input: dict[str, Any], context: Any) -> Any:
        return PermissionResultAllow()

    options = ClaudeAgentOptions(cli_path=SHIM, env=env_of(root, PRINT_RUNS[0]), cwd=str(root / "work"), can_use_tool=allow)
    options.env["FAKE_SERVE_SCRIPT"] = json.dumps(DRIVE_SCRIPT)
    said: list[str] = []
    options.stderr = said.append
    async with in_process(options) as client:
        await client.query("how many files are here?")
        frames = [m async for m in client.receive_response()]
    return Session(root, [frames], said)


BACKENDS = {"print": on_print, "drive": on_drive}
