"""docs/shim.md's table of every flag and command of the CLI's `--help` is held to the help as
recorded (fixtures/claude-code/help.txt), and the recording to the binary the pinned Python
Agent SDK bundles, so that neither goes stale unseen (issue 40); the CLI's commands but `mcp`
are each one line."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import claude_agent_sdk
import pytest
from support_fixtures import FIXTURES, ROOT
from support_inprocess import printed

from translator.shim.unserved import COMMANDS

HELP = FIXTURES / "claude-code" / "help.txt"
CLAUDE = Path(claude_agent_sdk.__file__).parent / "_bundled" / "claude"


def flags(text: str) -> set[str]:
    """Every long flag of the help's options, aliases too (`--allowedTools, --allowed-tools`)."""
    options = text.split("\nOptions:\n", 1)[1].split("\nCommands:\n", 1)[0]
    named = (m.group(1) for m in re.finditer(r"^  (-\S.*?)(?: {2}|$)", options, flags=re.M))
    return {flag for names in named for flag in re.findall(r"--[a-zA-Z][\w-]*", names)}


def commands(text: str) -> set[str]:
    """Every command of the help, each alias (`stop|kill`)."""
    listed = text.split("\nCommands:\n", 1)[1]
    return {name for m in re.finditer(r"^  ([\w|-]+)", listed, flags=re.M) for name in m.group(1).split("|")}


def rows() -> str:
    doc = (ROOT / "docs" / "shim.md").read_text()
    section = doc.split("\n### Every flag of the CLI\n", 1)[1].split("\n#", 1)[0]
    return "\n".join(line for line in section.splitlines() if line.startswith("|"))


def test_the_recorded_help_is_the_bundled_clis(tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "CLAUDE_CONFIG_DIR": str(tmp_path / ".claude")}
    live = subprocess.run([str(CLAUDE), "--help"], env=env, capture_output=True, text=True, timeout=60).stdout
    assert live == HELP.read_text()


def test_every_flag_and_command_of_the_help_has_a_row() -> None:
    text = HELP.read_text()
    named = set(re.findall(r"--[a-zA-Z][\w-]*", rows()))
    assert len(flags(text)) > 60 and sorted(flags(text) - named) == []
    listed = set(re.findall(r"`([\w-]+)[` ]", rows()))
    assert len(commands(text)) > 15 and sorted(commands(text) - listed) == []


def test_the_commands_refused_are_the_helps() -> None:
    assert commands(HELP.read_text()) - {"mcp"} == COMMANDS


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_command_of_the_cli_is_one_line(tmp_path: Path, command: str) -> None:
    done = printed([command], {**os.environ, "HOME": str(tmp_path)}, tmp_path)
    assert (done.returncode, done.stdout) == (64, "")
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"caliban-claude: {command}: not available: ")
