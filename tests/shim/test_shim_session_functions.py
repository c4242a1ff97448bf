"""Every session function of both Agent SDKs on caliban-claude's sessions, as docs/shim.md's
table says (issue 40): the functions read and write the session files the shim writes (none
runs the CLI but TS `startup()` and `prewarm()`), and what they write is kept when the shim goes
on with the session. The table is held to the SDKs' own exports, so that a function an SDK adds
cannot go without a row."""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import claude_agent_sdk as sdk
import pytest
from support_fixtures import FIXTURES, ROOT, SUPPORT
from support_processes import fake_caliban

SHIM = str(Path(sys.executable).with_name("caliban-claude"))
PROMPT = "how many files are here?"
TURN = ["user", "assistant", "assistant", "user", "assistant"]  # tool_use_two_turns, as get_session_messages reads it


def table(heading: str) -> str:
    """docs/shim.md's table under `heading`: its rows' text."""
    doc = (ROOT / "docs" / "shim.md").read_text()
    section = doc.split(f"\n{heading}\n", 1)[1]
    return "\n".join(line for line in section.split("\n\n## ")[0].splitlines() if line.startswith("|"))


def named(function: str, rows: str) -> bool:
    return re.search(rf"`{function}(\(\))?`", rows) is not None


def python_functions() -> set[str]:
    return {n for n in sdk.__all__ if re.search("session|subagent", n, re.I) and inspect.isfunction(getattr(sdk, n))}


def test_every_session_function_of_the_python_sdk_has_a_row() -> None:
    rows = table("### Every session function of the SDKs")
    assert len(python_functions()) >= 20
    assert sorted(f for f in python_functions() if not named(f, rows)) == []


def test_every_session_function_of_the_ts_sdk_has_a_row(sdk_entry: Path) -> None:
    declared = (sdk_entry.parent / "sdk.d.ts").read_text()
    functions = set(re.findall(r"^export declare function (\w+)", declared, flags=re.M))
    ours = {f for f in functions if re.search("session|subagent|prewarm|startup", f, re.I)}
    rows = table("### Every session function of the SDKs")
    assert len(ours) >= 15
    assert sorted(f for f in ours if not named(f, rows)) == []


@pytest.fixture
def sdk_entry(sdk: Path) -> Path:  # (conftest's: the TS SDK installed once)
    return sdk


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """caliban-claude's environment on the fake caliban (the tests' config dir is the SDK's too)."""
    work = tmp_path / "work"
    work.mkdir()
    made = {"CALIBAN_BIN": str(fake_caliban(tmp_path)), "CALIBAN_SESSIONS_DIR": str(tmp_path / "sessions"),
            "CLAUDE_CONFIG_DIR": str(tmp_path / "claude"),
            "FAKE_CALIBAN_SCRIPTS": json.dumps([{"file": str(FIXTURES / "caliban" / "tool_use_two_turns.jsonl")}])}  # fmt: skip
    for key, value in made.items():
        monkeypatch.setenv(key, value)
    monkeypatch.chdir(work)
    return made


def ask(prompt: str, *flags: str) -> dict[str, Any]:
    done = subprocess.run([SHIM, "-p", prompt, "--output-format", "json", *flags], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def test_the_python_sdks_session_functions_on_caliban_claudes_files(env: dict[str, str]) -> None:
    here = os.getcwd()
    sid = ask(PROMPT)["session_id"]
    (listed,) = sdk.list_sessions(directory=here)
    assert (listed.session_id, listed.summary, listed.cwd, listed.git_branch) == (sid, PROMPT, here, "HEAD")
    assert [m.type for m in sdk.get_session_messages(sid, directory=here)] == TURN
    sdk.rename_session(sid, "count files", directory=here)
    sdk.tag_session(sid, "work", directory=here)
    ask("again", "--resume", sid)  # the shim goes on in the same file: the title and tag stay
    info = sdk.get_session_info(sid, directory=here)
    assert info is not None and (info.custom_title, info.tag, info.summary) == ("count files", "work", "count files")
    assert [m.type for m in sdk.get_session_messages(sid, directory=here)] == TURN + TURN
    assert sdk.list_subagents(sid, directory=here) == []  # caliban's sub-agents write no transcripts
    assert sdk.get_subagent_messages(sid, "agent-none", directory=here) == []
    fork = sdk.fork_session(sid, directory=here).session_id
    assert ask("in the fork", "--resume", fork)["session_id"] == fork  # resumed from the file (history.py)
    assert [m.type for m in sdk.get_session_messages(fork, directory=here)] == TURN * 3
    # a title resumes its session, as the CLI's `--resume <session-id|title>`: the last rename wins
    sdk.rename_session(sid, "counting", directory=here)
    untitled = subprocess.run([SHIM, "-p", "x", "--resume", "count files"], capture_output=True, text=True,
                              stdin=subprocess.DEVNULL, timeout=60)  # fmt: skip
    assert untitled.returncode == 1 and "is not a UUID and does not match any session title" in untitled.stderr
    assert ask("by its title", "--resume", "counting")["session_id"] == sid
    assert [m.type for m in sdk.get_session_messages(sid, directory=here)] == TURN * 3
    sdk.delete_session(sid, directory=here)
    assert [s.session_id for s in sdk.list_sessions(directory=here)] == [fork]
    # the file said the session exists: without it, as for the CLI, there is none to resume,
    # though caliban's own file stays (it is caliban's) and still holds the conversation
    gone = subprocess.run([SHIM, "-p", "after the delete", "--resume", sid, "--output-format", "json"],
                          capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=60)  # fmt: skip
    assert (gone.returncode, gone.stdout, gone.stderr) == (1, "", f"No conversation found with session ID: {sid}\n")
    held = json.loads((Path(env["CALIBAN_SESSIONS_DIR"]) / f"{sid}.json").read_text())["messages"]
    assert held[0] == PROMPT and held[-1] == "by its title"
    assert sdk.get_session_info(sid, directory=here) is None  # the failed resume wrote no file


def test_the_python_sdks_store_functions_on_caliban_claudes_files(env: dict[str, str]) -> None:
    here = os.getcwd()
    sid = ask(PROMPT)["session_id"]
    store = sdk.InMemorySessionStore()

    async def main() -> tuple[list[str], list[str], str]:
        await sdk.import_session_to_store(sid, store, directory=here)
        listed = [s.session_id for s in await sdk.list_sessions_from_store(store, directory=here)]
        messages = [m.type for m in await sdk.get_session_messages_from_store(store, sid, directory=here)]
        forked = (await sdk.fork_session_via_store(store, sid, directory=here)).session_id
        return listed, messages, forked

    listed, messages, forked = asyncio.run(main())
    assert listed == [sid] and messages == TURN and forked != sid


def test_the_ts_sdks_session_functions_on_caliban_claudes_files(sdk_entry: Path, env: dict[str, str]) -> None:
    script = SUPPORT / "ts_sdk" / "session_functions.mjs"
    done = subprocess.run(["node", str(script), str(sdk_entry), SHIM, os.getcwd()], capture_output=True, text=True,
                          timeout=240)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout)
    assert got["listed"] == [[True, PROMPT]] and got["messages"] == TURN
    assert got["archived"] == {"summary": "count files", "customTitle": "count files", "tag": "work", "archived": True}
    assert got["resumed"] == "success"
    assert got["afterPrompt"]["archived"] is False  # a prompt in the session unarchives it, as the CLI's does
    assert got["unarchived"]["archived"] is False
    assert (got["subagents"], got["subagentMessages"]) == ([], [])
    assert got["forkMessages"] == TURN + TURN and got["fork"]["summary"] == "count files (fork)"
    assert got["forkResumed"] == ["success", True]
    assert got["afterDelete"] == [True]
    assert got["startup"] == "There are 3 files."  # startup(): the spawn ahead of the prompt
