"""Session ids are ids, and sessions behave as Claude Code's (issues 37 and 40): an id that is
no UUID is refused with the CLI's own line (recorded from the real CLI, 2.1.332's bundled
binary, offline) and no path made from one leaves the sessions folders; a resumed file whose
last line was cut reads back whole; `continue` takes this folder's newest session; a fork's
file starts with its source's conversation, as the CLI's does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import claude_agent_sdk
import pytest
from claude_agent_sdk import ClaudeAgentOptions, ResultMessage, get_session_messages, list_sessions, rename_session
from support_fixtures import FIXTURES
from support_inprocess import printed, queried
from support_processes import fake_caliban

from translator.transcripts.files import slug

SHIM = str(Path(sys.executable).with_name("caliban-claude"))
CLAUDE = Path(claude_agent_sdk.__file__).parent / "_bundled" / "claude"  # the real CLI (2.1.332), run offline
PROMPT = "how many files are here?"
TOOL_TURN = [("user", "text"), ("assistant", "text"), ("assistant", "tool_use"), ("user", "tool_result"), ("assistant", "text")]

OTHER = "21111111-1111-4111-8111-111111111111"
INVALID = "Error: Invalid session ID. Must be a valid UUID."
NEEDS_FORK = "Error: --session-id with --continue or --resume also needs --fork-session."


def not_resumable(value: str) -> str:
    return ("Error: --resume requires a valid session ID or session title when used with --print. Usage: "
            f'claude -p --resume <session-id|title>. Provided value "{value}" is not a UUID and does not match '
            "any session title.")  # fmt: skip


class App:
    """An SDK app in its own working directory, on a fake caliban, with its own config dir."""

    def __init__(self, root: Path) -> None:
        self.root, self.work, self.config = root, root / "work", root / "claude"
        self.work.mkdir()
        fake_caliban(root)

    def options(self, **kw: Any) -> ClaudeAgentOptions:
        env = {"CALIBAN_BIN": str(self.root / "caliban"), "CALIBAN_SESSIONS_DIR": str(self.root / "sessions"),
               "CLAUDE_CONFIG_DIR": str(self.config),
               "FAKE_CALIBAN_SCRIPTS": json.dumps([{"file": str(FIXTURES / "caliban" / "tool_use_two_turns.jsonl")}])}  # fmt: skip
        return ClaudeAgentOptions(cli_path=SHIM, env=env, cwd=str(self.work), **kw)

    def files(self) -> list[Path]:
        return sorted(self.config.rglob("*.jsonl")) if self.config.exists() else []


async def ask(prompt: str, options: ClaudeAgentOptions) -> ResultMessage:
    messages = [m async for m in queried(prompt, options)]
    assert isinstance(messages[-1], ResultMessage)
    return messages[-1]


def blocks(messages: list[Any]) -> list[tuple[str, str]]:
    return [(m.type, b["type"]) for m in messages
            for b in (m.message["content"] if isinstance(m.message["content"], list) else [{"type": "text"}])]  # fmt: skip


@pytest.fixture
def app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> App:
    made = App(tmp_path)
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(made.config))
    return made


def shim(app: App, *argv: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**app.options().env, "PATH": os.environ["PATH"], "HOME": str(app.root)}
    return printed(["-p", *argv, "hi"], env, cwd or app.work)


def everything(root: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in root.rglob("*") if p.is_file()}


@pytest.mark.parametrize(("argv", "line"), [
    (["--session-id", "../x"], INVALID),
    (["--session-id", "/tmp/abs"], INVALID),
    (["--session-id", "{11111111-1111-4111-8111-111111111111}"], INVALID),
    (["--session-id", "11111111111141118111111111111111"], INVALID),
    (["--resume", "../victim"], not_resumable("../victim")),
    (["--resume", "../victim", "--fork-session"], not_resumable("../victim")),
    (["--resume", OTHER, "--session-id", "../../victim", "--fork-session"], INVALID),
    (["--resume", OTHER, "--session-id", str(uuid.uuid4())], NEEDS_FORK),
    (["--continue", "--session-id", str(uuid.uuid4())], NEEDS_FORK),
])  # fmt: skip
def test_an_id_that_is_no_uuid_is_refused_as_claude_code_refuses_it(app: App, argv: list[str], line: str) -> None:
    (app.root / "victim.json").write_text('{"name": "victim"}')
    (app.root / "sessions").mkdir()
    before = everything(app.root)
    done = shim(app, *argv)
    assert (done.returncode, done.stdout, done.stderr) == (1, "", line + "\n")
    assert everything(app.root) == before  # nothing written, nothing overwritten


def test_an_id_in_use_is_refused(app: App) -> None:
    first = shim(app, "--output-format", "json")
    sid = json.loads(first.stdout)["session_id"]
    done = shim(app, "--session-id", sid)
    assert (done.returncode, done.stderr) == (1, f"Error: Session ID {sid} is already in use.\n")


def test_any_uuid_is_an_id(app: App) -> None:
    for sid in ("00000000-0000-0000-0000-000000000000", "ABCDEF01-2345-6789-ABCD-EF0123456789"):
        done = shim(app, "--session-id", sid, "--output-format", "json")
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["session_id"] == sid


def test_a_title_resumes_this_folders_one_session_of_that_title(app: App) -> None:
    """The CLI's `--resume <session-id|title>`: the title (the last rename's) is looked up among
    this folder's session files; a title on two of them is refused (the shim's choice, a line
    naming the count), and a title that reads as a path is only ever a title."""
    title = "../victim"
    first, second = (json.loads(shim(app, "--output-format", "json").stdout)["session_id"] for _ in range(2))
    elsewhere = app.root / "elsewhere"
    elsewhere.mkdir()
    other = json.loads(shim(app, "--output-format", "json", cwd=elsewhere).stdout)["session_id"]
    for sid, folder in ((first, app.work), (second, app.work), (other, elsewhere)):
        rename_session(sid, title, directory=str(folder))
    (app.root / "victim.json").write_text('{"name": "victim"}')
    done = shim(app, "--resume", title)
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == f'Error: --resume: 2 sessions of this folder are titled "{title}"; resume one of them by its session ID.\n'
    rename_session(second, "the other one", directory=str(app.work))
    again = shim(app, "--resume", title, "--output-format", "json")
    assert json.loads(again.stdout)["session_id"] == first, again.stderr
    assert blocks(get_session_messages(first, directory=str(app.work))) == TOOL_TURN + TOOL_TURN
    assert (app.root / "victim.json").read_text() == '{"name": "victim"}'
    assert shim(app, "--resume", "the other").stderr == not_resumable("the other") + "\n"  # exactly the title


def claude(app: App, *argv: str) -> subprocess.CompletedProcess[str]:
    """The real CLI in the app's folder and config dir, offline (an API nobody answers)."""
    (app.root / "home").mkdir(exist_ok=True)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(app.root / "home"), "CLAUDE_CONFIG_DIR": str(app.config),
           "ANTHROPIC_API_KEY": "sk-ant-dummy", "ANTHROPIC_BASE_URL": "http://127.0.0.1:9", "DISABLE_TELEMETRY": "1",
           "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1", "CLAUDE_CODE_MAX_RETRIES": "0"}  # fmt: skip
    return subprocess.run([str(CLAUDE), "-p", *argv, "hi"], env=env, cwd=app.work, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=120)  # fmt: skip


def shown(done: subprocess.CompletedProcess[str], resumed: str) -> tuple[int, str, list[dict[str, Any]]]:
    """What a run printed, its frames' random ids made one (a fork's new id: `fork`)."""
    frames = [json.loads(line) for line in done.stdout.splitlines()]
    for frame in frames:
        frame["uuid"] = "u"
        frame["session_id"] = frame["session_id"] if frame["session_id"] == resumed else "fork"
    return done.returncode, done.stderr, frames


@pytest.mark.parametrize("output", ["stream-json", "json", "text"])
@pytest.mark.parametrize("fork", [[], ["--fork-session"]])
def test_a_session_that_is_not_there_is_the_clis_no_conversation(app: App, output: str, fork: list[str]) -> None:
    """`--resume` of a session with no file here (never made, or deleted: the SDKs'
    delete_session; caliban's own copy does not count, as the file is what says a session is
    there): the real CLI's line on stderr, its one result with stream-json, exit 1, nothing
    run; the same forked (the result names the fork's new id). The CLI run beside it."""
    (app.root / "sessions").mkdir()
    (app.root / "sessions" / f"{OTHER}.json").write_text(json.dumps({"name": OTHER, "messages": []}))
    argv = ["--resume", OTHER, *fork, "--output-format", output, "--verbose"]
    ours, real = shim(app, *argv), claude(app, *argv)
    assert shown(ours, OTHER) == shown(real, OTHER)
    assert shown(ours, OTHER)[:2] == (1, f"No conversation found with session ID: {OTHER}\n")
    assert len(shown(ours, OTHER)[2]) == (output == "stream-json")
    assert app.files() == []  # no session file made (nor caliban run: it would have written one)


async def test_a_session_whose_last_line_was_cut_reads_back_whole_after_a_resume(app: App) -> None:
    first = await ask(PROMPT, app.options())
    (path,) = app.files()
    data = path.read_bytes()
    path.write_bytes(data + data.splitlines(keepends=True)[-1][:40])  # a crash mid-line
    await ask("and now?", app.options(resume=first.session_id))
    messages = get_session_messages(first.session_id)
    assert blocks(messages) == TOOL_TURN + TOOL_TURN  # 4 of 10 before: the first new line went with the cut one
    assert all(json.loads(line) for line in path.read_bytes().splitlines())


async def test_continue_takes_this_folders_newest_session(app: App) -> None:
    here = await ask(PROMPT, app.options())
    elsewhere = app.root / "elsewhere"
    elsewhere.mkdir()
    options = app.options()
    options.cwd = str(elsewhere)
    there = await ask(PROMPT, options)  # newer, but another folder's
    again = await ask("and now?", app.options(continue_conversation=True))
    assert again.session_id == here.session_id != there.session_id
    assert blocks(get_session_messages(here.session_id, directory=str(app.work))) == TOOL_TURN + TOOL_TURN


async def test_a_fork_starts_with_its_sources_conversation(app: App) -> None:
    first = await ask(PROMPT, app.options())
    fork = await ask("and now?", app.options(resume=first.session_id, fork_session=True))
    assert fork.session_id != first.session_id
    folder = app.config / "projects" / slug(str(app.work))
    lines = [json.loads(line) for line in (folder / f"{fork.session_id}.jsonl").read_bytes().splitlines()]
    assert {line["sessionId"] for line in lines if "sessionId" in line} == {fork.session_id}
    copied = [line for line in lines if line.get("type") == "assistant" and "requestSessionId" in line]
    assert copied and all(line["requestSessionId"] == first.session_id for line in copied)
    assert list(copied[0])[-1] == "requestSessionId"  # at the end, as the CLI adds it
    assert blocks(get_session_messages(fork.session_id)) == TOOL_TURN + TOOL_TURN
    assert blocks(get_session_messages(first.session_id)) == TOOL_TURN  # the source is left as it was
    assert {info.session_id for info in list_sessions()} == {first.session_id, fork.session_id}


def git(cwd: Path, *argv: str) -> None:
    env = {"PATH": os.environ["PATH"], "HOME": str(cwd), "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}  # fmt: skip
    subprocess.run(["git", *argv], cwd=cwd, env=env, check=True, capture_output=True, timeout=30)


@pytest.mark.parametrize(("steps", "branch"), [
    ([], "HEAD"),  # no repository
    ([["init", "-q", "-b", "feature/rec-7"], ["add", "."], ["commit", "-q", "-m", "x"]], "feature/rec-7"),
    ([["init", "-q", "-b", "topic-unborn"]], "topic-unborn"),
    ([["init", "-q", "-b", "main"], ["add", "."], ["commit", "-q", "-m", "x"], ["checkout", "-q", "--detach"]], "HEAD"),
], ids=["none", "branch", "unborn", "detached"])  # fmt: skip
async def test_every_line_has_the_git_branch_as_the_cli_writes_it(app: App, steps: list[list[str]], branch: str) -> None:
    """set-t5/sessions' git_branch, git_unborn and git_detached: `gitBranch` on every line."""
    (app.work / "a.txt").write_text("a")
    for step in steps:
        git(app.work, *step)
    result = await ask(PROMPT, app.options())
    (path,) = app.files()
    lines = [json.loads(line) for line in path.read_bytes().splitlines()]
    with_uuid = [line for line in lines if "uuid" in line]
    assert with_uuid and {line.get("gitBranch") for line in with_uuid} == {branch}
    (info,) = list_sessions(directory=str(app.work))
    assert (info.session_id, info.git_branch) == (result.session_id, branch)
