"""Every flag of the Claude Code CLI's `--help` (the real binary the pinned Python Agent SDK
bundles) is mapped, accepted as a no-op (warned), or refused with one line; a flag that
restricts (--restricted, --safe-mode, --disable-slash-commands) is mapped onto caliban's flags,
never dropped; bypassPermissions is refused as the CLI refuses it (issue 40)."""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import replace
from pathlib import Path

import claude_agent_sdk
import pytest
from claude_agent_sdk import ClaudeAgentOptions
from claude_agent_sdk._internal.transport.subprocess_cli import SubprocessCLITransport
from fake_caliban import check
from support_fixtures import FIXTURES
from support_inprocess import printed
from support_processes import fake_caliban

from translator.shim.flags import BOOL_FLAGS, CANONICAL, SHORT, VALUE_FLAGS, parse
from translator.shim.mapping import IGNORED, MAPPED, plan, run_argv
from translator.shim.place import Place
from translator.shim.restricting import REFUSED, ROOT
from translator.shim.sessions import Session

CLAUDE = Path(claude_agent_sdk.__file__).parent / "_bundled" / "claude"
HANDLED_BY_MAIN = {"--help", "--version", "--permission-prompt-tool"}


@pytest.fixture(autouse=True)
def sessions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CALIBAN_SESSIONS_DIR", str(tmp_path / "sessions"))
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude"))
    monkeypatch.delenv("CALIBAN_CLAUDE_ARGS", raising=False)
    return tmp_path


def cli_help_flags(tmp_path: Path) -> set[str]:
    """The long flags `claude --help` lists (its own text, run offline in an empty home)."""
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "CLAUDE_CONFIG_DIR": str(tmp_path / ".claude")}
    text = subprocess.run([str(CLAUDE), "--help"], env=env, capture_output=True, text=True, timeout=60).stdout
    return set(re.findall(r"^\s+(?:-\w, )?(--[a-zA-Z][\w-]*)", text, flags=re.M))


def test_every_flag_of_the_clis_help_is_mapped_ignored_or_refused(tmp_path: Path) -> None:
    listed = cli_help_flags(tmp_path)
    assert len(listed) > 60 and "--restricted" in listed
    known = {CANONICAL.get(f, f) for f in VALUE_FLAGS | BOOL_FLAGS}
    for flag in listed - HANDLED_BY_MAIN:
        name = CANONICAL.get(SHORT.get(flag, flag), flag)
        assert name in known, flag
        assert name in MAPPED | set(IGNORED) | set(REFUSED), flag


def caliban_argv(options: ClaudeAgentOptions) -> tuple[list[str], list[str]]:
    argv = SubprocessCLITransport(prompt="x", options=replace(options, cli_path="caliban-claude"))._build_command()
    args = parse(argv[1:])
    here = Place(os.environ, os.getcwd())  # (as the fixture sets it)
    p = plan(args, here)
    got = run_argv("caliban", p, p.model, p.permission_mode, Session(args, p.warnings, here).args())
    check(got[1:])  # caliban would accept it
    return got, p.warnings


def denied(argv: list[str]) -> set[str]:
    return {argv[i + 1] for i, a in enumerate(argv) if a == "--deny"}


def test_restricted_mode_is_mapped_not_dropped() -> None:
    argv, warned = caliban_argv(ClaudeAgentOptions(extra_args={"restricted": None}, setting_sources=["user", "project"]))
    assert denied(argv) == {"Bash", "BashOutput", "KillShell", "WebFetch", "AgentTool"}
    assert "--restrict-paths" in argv  # the file tools fenced to the working directory
    i = argv.index("--setting-sources")
    assert argv[i + 1] == "managed,cli" and argv.count("--setting-sources") == 1
    assert not any("restricted" in w for w in warned)


def test_restricted_mode_keeps_what_tools_names() -> None:
    argv, _ = caliban_argv(ClaudeAgentOptions(extra_args={"restricted": None}, tools=["Bash", "Read"]))
    assert "Bash" not in denied(argv) and {"WebFetch", "AgentTool", "Write"} <= denied(argv)


def test_safe_mode_bare_and_no_slash_commands_turn_caliban_off_alike() -> None:
    safe, warned = caliban_argv(ClaudeAgentOptions(extra_args={"safe-mode": None}))
    assert {"--no-skills", "--no-plugins"} <= set(safe) and "--no-hooks" not in safe  # managed hooks stay
    assert safe[safe.index("--setting-sources") + 1] == "managed,cli"
    assert any("memory" in w for w in warned)
    bare, _ = caliban_argv(ClaudeAgentOptions(extra_args={"bare": None}))
    assert {"--no-hooks", "--no-plugins"} <= set(bare) and "--bare" not in bare  # caliban's --bare saves no session
    slash, _ = caliban_argv(ClaudeAgentOptions(extra_args={"disable-slash-commands": None}))
    assert "--no-skills" in slash


@pytest.mark.parametrize("flag", ["name", "autocompact", "brief", "exclude-dynamic-system-prompt-sections",
                                  "system-prompt-snapshot", "chrome"])  # fmt: skip
def test_a_flag_that_changes_nothing_caliban_could_do_is_warned(flag: str) -> None:
    value = "x" if f"--{flag}" in VALUE_FLAGS else None
    _, warned = caliban_argv(ClaudeAgentOptions(extra_args={flag: value}))
    assert any(w.startswith(f"--{flag}: ") and w.endswith("; ignored") for w in warned), warned


def shim(tmp_path: Path, *argv: str, **env: str) -> subprocess.CompletedProcess[str]:
    fake_caliban(tmp_path)
    environ = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "CLAUDE_CONFIG_DIR": str(tmp_path / "claude"),
               "CALIBAN_BIN": str(tmp_path / "caliban"), "CALIBAN_SESSIONS_DIR": str(tmp_path / "sessions"),
               "FAKE_CALIBAN_SCRIPTS": f'[{{"file": "{FIXTURES / "caliban" / "hi.jsonl"}"}}]', **env}  # fmt: skip
    return printed(["-p", *argv, "hi"], environ, tmp_path)


@pytest.mark.parametrize("argv", [["--restricted", "--permission-mode", "bypassPermissions"],
                                  ["--restricted", "--dangerously-skip-permissions"]])  # fmt: skip
def test_restricted_mode_refuses_bypass_permissions(tmp_path: Path, argv: list[str]) -> None:
    done = shim(tmp_path, *argv, IS_SANDBOX="1")
    assert (done.returncode, done.stdout, done.stderr) == (1, "", "Error: bypassPermissions not supported in restricted mode\n")


@pytest.mark.skipif(os.geteuid() != 0, reason="the CLI's refusal is for root")
@pytest.mark.parametrize("sandbox", [None, "true", "0", "1 "])
def test_root_may_not_bypass_permissions_unless_is_sandbox_is_1(tmp_path: Path, sandbox: str | None) -> None:
    env = {} if sandbox is None else {"IS_SANDBOX": sandbox}
    for argv in (["--dangerously-skip-permissions"], ["--permission-mode", "bypassPermissions"]):
        done = shim(tmp_path, *argv, **env)
        assert (done.returncode, done.stdout, done.stderr) == (1, "", ROOT + "\n")


@pytest.mark.skipif(os.geteuid() != 0, reason="the CLI's refusal is for root")
def test_root_bypasses_permissions_in_a_sandbox(tmp_path: Path) -> None:
    done = shim(tmp_path, "--dangerously-skip-permissions", IS_SANDBOX="1")
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("argv", [["--worktree"], ["-w"], ["--tmux"], ["--bg"], ["--remote-control"],
                                  ["--cloud=x"], ["--from-pr=12"]])  # fmt: skip
def test_a_flag_whose_session_caliban_cannot_run_is_refused_in_one_line(tmp_path: Path, argv: list[str]) -> None:
    done = shim(tmp_path, *argv)
    assert done.returncode == 64 and done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert line.startswith("caliban-claude: --") and ": " in line.removeprefix("caliban-claude: ")


@pytest.mark.parametrize("argv", [["mcp", "serve"], ["mcp", "list"]])
def test_mcp_serve_is_one_line_saying_it_is_not_available(tmp_path: Path, argv: list[str]) -> None:
    """The CLI's `claude mcp serve` (set-t5/mcp-serve/) serves its tools; caliban has no such server."""
    done = printed(argv, {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}, tmp_path)
    assert (done.returncode, done.stdout) == (64, "")
    assert done.stderr.splitlines() == ["caliban-claude: mcp: not available: caliban-claude cannot serve caliban's tools "
                                        "over MCP (caliban's own `mcp serve` is its drive surface: runs and permits, no "
                                        "tools/call); use caliban through -p or an Agent SDK"]  # fmt: skip
