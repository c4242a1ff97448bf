"""claude-history 0.8.0 and claude-code-log 1.7.0 (PyPI, pinned), readers of Claude Code's session
files, on what caliban-claude leaves (an SDK app, on either backend) and on `translator
--transcripts`' files: each shows every session's conversation (the prompt, the tool calls with
their inputs and results, the answers), claude-code-log its tokens, those of the result frames.

caliban run without `--session` says `ephemeral` in every run's init: such logs, translated, were
one session file per folder (their line and message ids alike, from the one id), which
claude-history showed as one conversation with the other's messages gone and claude-code-log
refused ("Multiple Claude sessions have id ephemeral"). Each is its own session now."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support_fixtures import FIXTURES
from support_processes import run
from support_sdk_sessions import BACKENDS, Session

BIN = Path(sys.executable).parent
PROMPT = "how many files are here?"
COUNTED = (("Input", "input_tokens"), ("Output", "output_tokens"), ("Cache Creation", "cache_creation_input_tokens"),
           ("Cache Read", "cache_read_input_tokens"))  # fmt: skip
TOOL_USE = [("assistant", "I'll count the files."), ("tool_use", "Bash", {"command": "ls | wc -l"}), ("tool_result", "3"),
            ("assistant", "There are 3 files.")]  # fmt: skip
THINKING = [("thinking", "The user wants 17 * 23. 17 * 20 = 340, 17 * 3 = 51, 340 + 51 = 391."), ("assistant", "17 * 23 = 391.")]
SHOWN = {  # claude-code-log's messages of each session, by backend (their order: the runs')
    "print": [[("user", PROMPT), *TOOL_USE], [("user", PROMPT), *THINKING]],
    "drive": [[("user", PROMPT), ("assistant", "Listing."), ("tool_use", "Bash", {"command": "ls"}), ("tool_result", "a"),
               ("assistant", "One file.")]],
}  # fmt: skip
# claude-history merges the lines of one message id (Claude Code writes a line per content block) and keeps the last
HISTORY = {
    "print": [[("user", PROMPT, []), ("assistant", "", ["Bash"]), ("tool", "", []), ("assistant", "There are 3 files.", [])],
              [("user", PROMPT, []), ("assistant", "17 * 23 = 391.", [])]],
    "drive": [[("user", PROMPT, []), ("assistant", "", ["Bash"]), ("tool", "", []), ("assistant", "One file.", [])]],
}  # fmt: skip


def history(projects: Path, session_id: str) -> dict[str, Any]:
    """`claude-history export ID --format json` (it reads CLAUDE_HISTORY_DIR's projects)."""
    env = {**os.environ, "CLAUDE_HISTORY_DIR": str(projects)}
    done = subprocess.run([str(BIN / "claude-history"), "export", session_id, "-f", "json"], env=env, capture_output=True,
                          timeout=60, check=True)  # fmt: skip
    return dict(json.loads(done.stdout))


def rendered(project: Path, home: Path) -> dict[str, Any]:
    """`claude-code-log PROJECT --format json -o -`: its document of the project's sessions."""
    env = {**os.environ, "HOME": str(home)}
    done = subprocess.run([str(BIN / "claude-code-log"), str(project), "--no-cache", "-f", "json", "-o", "-"], env=env,
                          capture_output=True, timeout=120, check=True)  # fmt: skip
    return dict(json.loads(done.stdout))


def shown(message: dict[str, Any]) -> tuple[Any, ...]:
    """What claude-code-log shows of a message: its kind and text (a tool call's name and input)."""
    content = message["content"]
    if message["type"] == "tool_use":
        return ("tool_use", content["tool_name"], {k: v for k, v in content["input"].items() if v is not None})
    if message["type"] == "tool_result":
        return ("tool_result", content["output"]["content"])
    if message["type"] == "thinking":
        return ("thinking", content["thinking"])
    return (message["type"], " ".join(item["text"] for item in content["items"]))


def sessions_shown(document: dict[str, Any]) -> dict[str, list[tuple[Any, ...]]]:
    """Each session's messages, in the document's order, by session id."""
    got: dict[str, list[tuple[Any, ...]]] = {}

    def walk(messages: list[dict[str, Any]]) -> None:
        for m in messages:
            if m["type"] != "session_header":
                got.setdefault(m["session_id"], []).append(shown(m))
            walk(m.get("children", []))

    walk(document["messages"])
    return got


def token_summary(usage: dict[str, int]) -> str:
    return "Token usage \u2013 " + " | ".join(f"{name}: {usage[key]}" for name, key in COUNTED if usage.get(key))


@pytest.fixture(params=sorted(BACKENDS))
async def made(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, Session]:
    session = await BACKENDS[request.param](tmp_path)
    assert [r.is_error for r in session.results] == [False] * len(session.results)
    return request.param, session


async def test_claude_history_shows_each_sessions_conversation(made: tuple[str, Session]) -> None:
    backend, session = made
    projects = session.config / "projects"
    got = [history(projects, r.session_id) for r in session.results]
    assert [(g["session_id"], g["title"], g["cwd"]) for g in got] == [
        (r.session_id, PROMPT, str(session.config.parent / "work")) for r in session.results]  # fmt: skip
    assert [[(m["role"], m["text"], m["tools"]) for m in g["messages"]] for g in got] == HISTORY[backend]


def test_claude_history_drops_a_turns_text_before_its_tool_call_on_the_clis_own_file_too(tmp_path: Path) -> None:
    """The reference for HISTORY's shape: the real CLI's session file (2.1.333, recorded) of a turn
    with text and a tool call reads back the same way, the text gone."""
    (tmp_path / "p").mkdir()
    recorded = FIXTURES / "cc-2.1.333" / "sessions" / "agent_print.jsonl"
    (tmp_path / "p" / recorded.name).write_bytes(recorded.read_bytes())
    got = history(tmp_path, recorded.stem)
    assert [(m["role"], m["text"], m["tools"]) for m in got["messages"]] == [
        ("user", "review the files", []), ("assistant", "", ["Agent"]), ("tool", "", []),
        ("assistant", "The reviewer says: 3 files, all fine.", [])]  # fmt: skip


async def test_claude_code_log_shows_each_sessions_messages_and_the_results_tokens(made: tuple[str, Session],
                                                                                  tmp_path: Path) -> None:  # fmt: skip
    backend, session = made
    (project,) = (session.config / "projects").iterdir()
    document = rendered(project, tmp_path / "home")
    ids = [r.session_id for r in session.results]
    assert [s["id"] for s in document["sessions"]] == ids
    assert [s["first_user_message"] for s in document["sessions"]] == [PROMPT] * len(ids)
    assert [s["token_summary"] for s in document["sessions"]] == [token_summary(r.usage or {}) for r in session.results]
    got = sessions_shown(document)
    assert [got[i] for i in ids] == SHOWN[backend]


def caliban_logs(root: Path) -> list[Path]:
    """Two headless logs of caliban run without --session, in one folder (the second echoes its
    prompts: --replay-user-messages), and the translator's own fixture of raw events."""
    logs = []
    for name in ("tool_use_two_turns", "multi_input_frames.replay"):
        log = root / "logs" / f"{name}.jsonl"
        log.parent.mkdir(exist_ok=True)
        log.write_bytes((FIXTURES / "headless" / f"{name}.jsonl").read_bytes().replace(b'"SESSION"', b'"ephemeral"'))
        logs.append(log)
    return [*logs, FIXTURES / "tool_use_two_turns.events.jsonl"]


REPLAYED = [("user", "hi"), ("assistant", "Hello! How can I help?"), ("user", "what is 2+2?"), ("assistant", "2 + 2 = 4.")]


def test_translated_logs_of_caliban_without_a_session_are_sessions_of_their_own(tmp_path: Path,
                                                                                monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    from claude_code_log.providers.claude import ClaudeProvider

    logs, config = caliban_logs(tmp_path), tmp_path / "claude"
    done = run("--format", "claude-code", "--results-only", "--transcripts", str(config), *map(str, logs))
    assert done.returncode == 0 and done.stderr == b"", done.stderr
    results = [json.loads(line) for line in done.stdout.splitlines()]
    ids = list(dict.fromkeys(r["session_id"] for r in results))  # (the second log has two runs)
    assert len(ids) == 3 and "ephemeral" not in ids
    usage = {i: {k: sum(r["usage"][k] for r in results if r["session_id"] == i) for _, k in COUNTED} for i in ids}
    files = sorted(config.rglob("*.jsonl"))
    assert sorted(f.stem for f in files) == sorted(ids)

    answers = [[(m["role"], m["text"], m["tools"]) for m in history(config / "projects", i)["messages"]] for i in ids]
    assert answers == [[("assistant", "", ["Bash"]), ("tool", "", []), ("assistant", "There are 3 files.", [])],
                       [(role, text, []) for role, text in REPLAYED],
                       HISTORY["print"][0]]  # fmt: skip

    documents = [rendered(project, tmp_path / "home") for project in sorted({f.parent for f in files})]
    got = {i: m for d in documents for i, m in sessions_shown(d).items()}
    assert [got[i] for i in ids] == [TOOL_USE, REPLAYED, [("user", PROMPT), *TOOL_USE]]
    # its index lists a session by its first prompt (the first log echoes none)
    summaries = {s["id"]: s["token_summary"] for d in documents for s in d["sessions"]}
    assert summaries == {i: token_summary(usage[i]) for i in ids[1:]}

    (tmp_path / "home" / ".claude").mkdir(parents=True, exist_ok=True)
    (tmp_path / "home" / ".claude" / "projects").symlink_to(config / "projects")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # (the provider, its TUI's and server's, reads ~/.claude/projects)
    provider = ClaudeProvider()
    loaded = {s.session_id: [type(e).__name__[0] for e in provider.load_session(s.session_id)] for s in provider.discover_sessions()}
    assert loaded == {ids[0]: list("AAUA"), ids[1]: list("UAUA"), ids[2]: list("UAAUA")}  # (user, assistant entries)


def test_two_logs_of_one_caliban_session_are_one_session_with_every_message(tmp_path: Path, ccusage: Any) -> None:
    """A run and its resume (`caliban --session ID`, then `--resume ID`) say one id: one session
    file, each log's messages in it once, under ids of its own, whether the logs are translated
    together or apart, and again (they had the same ids, from the one session's: claude-history
    kept one of each pair, ccusage counted one; translated apart, the second replaced the first)."""
    own = "3b8e1c52-8f0a-4d6b-9c1e-2a7f5d4e6b10"
    (tmp_path / "logs").mkdir()
    logs = []
    for name in ("tool_use_two_turns", "thinking"):
        logs.append(log := tmp_path / "logs" / f"{name}.jsonl")
        log.write_bytes((FIXTURES / "headless" / f"{name}.jsonl").read_bytes().replace(b'"SESSION"', b'"%s"' % own.encode()))
    done = run("--format", "claude-code", "--results-only", *map(str, logs))
    results = [json.loads(line) for line in done.stdout.splitlines()]
    assert {r["session_id"] for r in results} == {own}
    for config, translations in ((tmp_path / "together", [logs]), (tmp_path / "apart", [logs[:1], logs[1:], logs[:1]])):
        for these in translations:
            done = run("--transcripts", str(config), *map(str, these))
            assert done.returncode == 0 and done.stderr == b"", done.stderr
        (file,) = config.rglob("*.jsonl")
        assert file.stem == own
        got = history(config / "projects", own)
        assert sorted((m["role"], m["text"], tuple(m["tools"])) for m in got["messages"]) == sorted([
            ("assistant", "", ("Bash",)), ("tool", "", ()), ("assistant", "There are 3 files.", ()),
            ("assistant", "17 * 23 = 391.", ())]), config.name  # fmt: skip
        shown_here = sessions_shown(rendered(file.parent, tmp_path / "home"))[own]
        assert sorted(map(repr, shown_here)) == sorted(map(repr, [*TOOL_USE, *THINKING])), config.name
        totals = ccusage(config, "session")["totals"]
        assert (totals["inputTokens"], totals["outputTokens"]) == tuple(
            sum(r["usage"][k] for r in results) for k in ("input_tokens", "output_tokens")), config.name  # fmt: skip
