"""A session's environment and folder are its own (translator/shim/place.py): nothing under
translator/shim reads the process's (`os.environ`, its working directory) but the command's
entry point, every child is started with the session's, so two sessions served side by side in
one process each see theirs: their caliban's environment, folder and answers, their files."""

from __future__ import annotations

import ast
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from claude_agent_sdk import ClaudeAgentOptions, ResultMessage
from support_fixtures import FIXTURES
from support_inprocess import in_process
from support_processes import fake_caliban

import translator.shim
from translator.transcripts.files import slug

SHIM = Path(translator.shim.__file__).parent
CLI = str(Path(sys.executable).with_name("caliban-claude"))  # (the SDK wants one; the session runs here)
# What reads the process's environment or folder (abspath, expanduser: through them).
PROCESS_WIDE = {"os.environ", "os.getenv", "os.putenv", "os.getcwd", "os.getcwdb", "os.chdir", "os.path.abspath",
                "os.path.expanduser", "os.path.realpath", "Path.cwd", "Path.home", "pathlib.Path.cwd"}  # fmt: skip
# The entry points of processes of their own: the command, and the relay caliban starts (its token).
ENTRY_POINTS = {("main.py", "main"), ("tools/relay.py", "main")}
CHILDREN = {"subprocess.Popen", "subprocess.run", "subprocess.call", "subprocess.check_call", "subprocess.check_output",
            "Popen", "ProcessGroup", "os.system", "os.spawnv", "os.execv"}  # fmt: skip


def process_wide_reads(source: str, name: str) -> list[str]:
    """Each read of the process's environment or folder in module `name` (a path under
    translator/shim), and each child started without the session's `env` and `cwd`, as
    `name:line: what` (outside ENTRY_POINTS)."""
    tree = ast.parse(source, name)
    found: list[str] = []

    def visit(node: ast.AST, function: str) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            function = node.name
        allowed = (name, function) in ENTRY_POINTS
        if isinstance(node, ast.Attribute) and ast.unparse(node) in PROCESS_WIDE and not allowed:
            found.append(f"{name}:{node.lineno}: {ast.unparse(node)}")
        if isinstance(node, ast.Call) and ast.unparse(node.func) in CHILDREN and not allowed:
            keywords = {k.arg for k in node.keywords}
            if not ({"env", "cwd"} <= keywords or None in keywords):  # (None: **popen, passed on)
                found.append(f"{name}:{node.lineno}: {ast.unparse(node.func)} without env= and cwd=")
        for child in ast.iter_child_nodes(node):
            visit(child, function)

    visit(tree, "")
    return found


def test_nothing_below_the_entry_point_reads_the_process_environment_or_folder() -> None:
    paths = sorted(SHIM.rglob("*.py"))
    assert len(paths) > 40
    assert [read for p in paths for read in process_wide_reads(p.read_text(), p.relative_to(SHIM).as_posix())] == []


def test_the_check_finds_what_it_is_for() -> None:
    """(The check above, on a module that does each thing it forbids, and on the entry point.)"""
    body = ("    os.environ.get('A')\n    os.getcwd()\n    subprocess.Popen(['x'], env={})\n"
            "    ProcessGroup(['x'], **popen)\n    os.path.expanduser('~')\n")  # fmt: skip
    source = f"import os, subprocess\n\ndef f():\n{body}\n\ndef main():\n{body}"
    assert process_wide_reads(source, "main.py") == [
        "main.py:4: os.environ", "main.py:5: os.getcwd", "main.py:6: subprocess.Popen without env= and cwd=",
        "main.py:8: os.path.expanduser"]  # fmt: skip


class Side:
    """One app of two: its own folder, config folder, caliban log, answer and model alias."""

    def __init__(self, root: Path, name: str, answer: str) -> None:
        self.root, self.name = root / name, name
        self.work, self.config, self.log = self.root / "work", self.root / "claude", self.root / "calls.jsonl"
        self.work.mkdir(parents=True)
        self.script = [{"file": str(FIXTURES / "caliban" / answer)}]

    def options(self, caliban: Path) -> ClaudeAgentOptions:
        env = {"CALIBAN_BIN": str(caliban), "CALIBAN_SESSIONS_DIR": str(self.root / "sessions"),
               "CLAUDE_CONFIG_DIR": str(self.config), "FAKE_CALIBAN_LOG": str(self.log),
               "FAKE_CALIBAN_SCRIPTS": json.dumps(self.script),
               "CALIBAN_CLAUDE_MODELS": json.dumps({"sonnet": f"{self.name}/model"})}  # fmt: skip
        return ClaudeAgentOptions(cli_path=CLI, env=env, cwd=str(self.work), model="sonnet")


async def test_two_sessions_side_by_side_each_see_their_own_place(tmp_path: Path) -> None:
    caliban = fake_caliban(tmp_path)
    a, b = Side(tmp_path, "a", "tool_use_two_turns.jsonl"), Side(tmp_path, "b", "benign_text.jsonl")
    async with in_process(a.options(caliban)) as first, in_process(b.options(caliban)) as second:
        await first.query("which files?")
        await second.query("hello")  # (both sessions live, both messages asked, before either is read)

        async def read(client: Any) -> list[Any]:
            return [m async for m in client.receive_response()]

        got_a, got_b = await asyncio.gather(read(first), read(second))
    for side, messages, answer in ((a, got_a, "There are 3 files."), (b, got_b, "ok")):
        result = messages[-1]
        assert isinstance(result, ResultMessage) and result.result == answer  # its caliban's: its own env's script
        (call,) = [json.loads(line) for line in side.log.read_text().splitlines()]  # its own log: its own env
        assert call["cwd"] == str(side.work)
        assert call["argv"][call["argv"].index("--model") + 1] == f"{side.name}/model"
        assert (side.config / "projects" / slug(str(side.work)) / f"{result.session_id}.jsonl").is_file()
