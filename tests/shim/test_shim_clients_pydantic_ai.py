"""pydantic-ai-claude-code 0.8.1 (PyPI, pinned): a pydantic-ai agent whose model is Claude Code via
its CLI (`claude --print --output-format json --permission-mode bypassPermissions
--dangerously-skip-permissions`, the prompt on stdin), `claude_cli_path` caliban-claude, over
the fake caliban. The client writes each request to `user_request.md` in a numbered folder of
its working directory and asks the model to read it; the answer is the result's text, the usage
its tokens, and a second run carries the first's messages in that file. On either backend (the
client passes no callbacks: caliban -p unless CALIBAN_CLAUDE_BACKEND=drive forces caliban mcp serve).

The client needs pydantic-ai 1.x (0.8.1 sets the model's `provider`, which pydantic-ai 1.79 made
read-only), whose MCP extra wants mcp < 2, so it runs in a venv of its own (support_venv:
pydantic-ai-slim 1.77.0, the newest 1.x it works with, and the client without the full
pydantic-ai it names), driven by tests/support/pydantic_ai/agent.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support_fixtures import FIXTURES, SUPPORT
from support_processes import fake_caliban
from support_venv import venv_installed

SHIM = str(Path(sys.executable).with_name("caliban-claude"))
CACHE = Path(os.environ.get("CALIBAN_CLAUDE_PYDANTIC_AI_CACHE") or Path.home() / ".cache" / "caliban-claude-pydantic-ai")
ROOT = "--dangerously-skip-permissions cannot be used with root/sudo privileges for security reasons"  # the CLI's line
PROMPTS = ["how many files are here?", "and 17 * 23?"]
# the drive's two runs, a server each: the -p fixtures' answers and tokens (tool_use_two_turns.jsonl, thinking.jsonl)
DRIVE = {"CALIBAN_CLAUDE_BACKEND": "drive", "FAKE_SERVE_SCRIPT": json.dumps({"servers": [
    {"messages": [{"turns": [
        {"text": "Listing.", "tools": [{"name": "Bash", "input": {"command": "ls"}, "id": "toolu_ls", "result": "a\nb\nc"}],
         "usage": {"input_tokens": 3000, "output_tokens": 20}},
        {"text": "There are 3 files.", "usage": {"input_tokens": 3376, "output_tokens": 37}}]}]},
    {"messages": [{"turns": [{"text": "17 * 23 = 391.", "usage": {"input_tokens": 3106, "output_tokens": 95}}]}]}]})}  # fmt: skip


@pytest.fixture(scope="module")
def python() -> Path:
    return venv_installed(CACHE, ["pydantic-ai-slim==1.77.0", "beautifulsoup4==4.14.2"], ["pydantic-ai-claude-code==0.8.1"])


def agent(python: Path, root: Path, **extra: str) -> list[dict[str, Any]]:
    """The agent's runs of PROMPTS, one after another (each its JSON line), and the calls caliban got."""
    fake_caliban(root)
    (root / "work").mkdir()
    scripts = [{"file": str(FIXTURES / "caliban" / name)} for name in ("tool_use_two_turns.jsonl", "thinking.jsonl")]
    env = {**os.environ, "CALIBAN_BIN": str(root / "caliban"), "CALIBAN_SESSIONS_DIR": str(root / "sessions"),
           "CLAUDE_CONFIG_DIR": str(root / "claude"), "FAKE_CALIBAN_LOG": str(root / "calls.jsonl"),
           "FAKE_SERVE_LOG": str(root / "serve.jsonl"), "FAKE_CALIBAN_SCRIPTS": json.dumps(scripts), **extra}  # fmt: skip
    if "IS_SANDBOX" not in extra:
        env.pop("IS_SANDBOX", None)
    done = subprocess.run([str(python), str(SUPPORT / "pydantic_ai" / "agent.py"), SHIM, str(root / "work"), *PROMPTS],
                          env=env, capture_output=True, timeout=180)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def calls(root: Path) -> list[dict[str, Any]]:
    log = root / "calls.jsonl"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def served(root: Path) -> list[dict[str, Any]]:
    """The drive's runs as calls() gives caliban -p's: each server's folder and prompt, and its
    permission answers (`allow`: what bypassPermissions gives caliban's ask)."""
    log = root / "serve.jsonl"
    runs: list[dict[str, Any]] = []
    for line in map(json.loads, log.read_text().splitlines() if log.exists() else []):
        if "pid" in line:
            runs.append({"cwd": line["cwd"], "allow": []})
        elif line.get("in", {}).get("params", {}).get("name") == "caliban_run":
            runs[-1]["stdin"] = line["in"]["params"]["arguments"]["prompt"]
        elif "permit" in line:
            runs[-1]["allow"].append(line["allow"])
    return runs


@pytest.mark.parametrize("backend", ["print", "drive"])
def test_an_agents_two_runs_get_caliban_claudes_answers_and_usage(python: Path, tmp_path: Path, backend: str) -> None:
    runs = agent(python, tmp_path, IS_SANDBOX="1", **(DRIVE if backend == "drive" else {}))
    assert runs == [
        {"output": "There are 3 files.", "model": "claude-sonnet-4-5", "usage": {"input_tokens": 6376, "output_tokens": 57}},
        {"output": "17 * 23 = 391.", "model": "claude-sonnet-4-5", "usage": {"input_tokens": 3106, "output_tokens": 95}},
    ]  # fmt: skip
    ran = calls(tmp_path) if backend == "print" else served(tmp_path)
    assert (calls(tmp_path), served(tmp_path))[backend == "print"] == []  # (the other backend never ran)
    folders = [Path(c["cwd"]) for c in ran]
    assert [f.parent for f in folders] == [tmp_path / "work"] * 2 and folders[0] != folders[1]
    assert all("Use the Read tool to read the file `user_request.md`" in c["stdin"] for c in ran)
    if backend == "print":
        assert all(c["argv"][c["argv"].index("--permission-mode") + 1] == "bypassPermissions" for c in ran)
    else:  # the first run's Bash, asked about, allowed; the second runs no tool
        assert [c["allow"] for c in ran] == [[True], []]
    # the second request holds the first run's exchange: the history is the client's, in its prompt
    assert (folders[1] / "user_request.md").read_text() == (
        f"Request: {PROMPTS[0]}\n\nAssistant: There are 3 files.\n\nRequest: {PROMPTS[1]}")


@pytest.mark.skipif(os.geteuid() != 0, reason="as another user the CLI takes --dangerously-skip-permissions")
def test_as_root_without_is_sandbox_the_agent_gets_the_clis_one_line(python: Path, tmp_path: Path) -> None:
    (run,) = agent(python, tmp_path)
    assert list(run) == ["error"] and run["error"].startswith("RuntimeError: Claude CLI error after ")
    assert run["error"].endswith(f"s: {ROOT}\n")
    assert calls(tmp_path) == []  # caliban never ran
