"""The real TypeScript Agent SDK (`@anthropic-ai/claude-agent-sdk` from npm, run by node) drives
`caliban-claude`, which drives the fake caliban. Skipped, and said so, where node is not
installed (`.ci/run` installs it, so CI always runs them)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from support_fixtures import FIXTURES, SUPPORT
from support_processes import fake_caliban

from translator.shim.flags import BOOL_FLAGS, CANONICAL, VALUE_FLAGS
from translator.shim.mapping import MAPPED

DRIVE = SUPPORT / "ts_sdk" / "drive.mjs"
SHIM = str(Path(sys.executable).with_name("caliban-claude"))


@dataclass
class Session:
    """What one SDK session gave: the app's messages, the init result, an exception, and
    what caliban was run with."""

    events: list[dict[str, Any]]
    calls: list[dict[str, Any]]

    def of(self, kind: str) -> list[Any]:
        return [e["data"] for e in self.events if e["kind"] == kind]

    @property
    def messages(self) -> list[dict[str, Any]]:
        return self.of("msg")

    @property
    def kinds(self) -> list[str]:
        return [m["type"] + (f"/{m['subtype']}" if m["type"] in ("system", "result") else "") for m in self.messages]

    @property
    def stderr(self) -> str:
        return "".join(self.of("stderr"))

    def argv(self, n: int = 0) -> list[str]:
        return list(self.calls[n]["argv"])


@pytest.fixture
def drive(sdk: Path, tmp_path: Path) -> Any:
    wrapper = fake_caliban(tmp_path)

    def run(spec: dict[str, Any], *scripts: str | dict[str, Any], env: dict[str, str] | None = None) -> Session:
        spec = {**spec, "options": {"pathToClaudeCodeExecutable": SHIM, "cwd": str(tmp_path), **spec.get("options", {})}}
        environ = {**os.environ, "CALIBAN_BIN": str(wrapper), "CALIBAN_SESSIONS_DIR": str(tmp_path / "sessions"),
                   "FAKE_CALIBAN_LOG": str(tmp_path / "calls.jsonl"), "CALIBAN_CLAUDE_ARGS": "",
                   "FAKE_CALIBAN_SCRIPTS": json.dumps([script(s) for s in scripts]),
                   **(env or {})}  # fmt: skip
        (tmp_path / "spec.json").write_text(json.dumps(spec))  # (in a file: a command line is anyone's to read)
        done = subprocess.run(["node", str(DRIVE), str(sdk), f"@{tmp_path / 'spec.json'}"], capture_output=True,
                              env=environ, timeout=90, check=False)  # fmt: skip
        events = [json.loads(line) for line in done.stdout.splitlines()]
        assert events and events[-1]["kind"] == "done", done.stderr.decode()
        log = tmp_path / "calls.jsonl"
        calls = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
        return Session(events, calls)

    return run


def script(given: str | dict[str, Any]) -> dict[str, Any]:
    """A fake caliban run: a fixture's name, or its script (`pause_after`, ...)."""
    run = {"file": given} if isinstance(given, str) else given
    return {**run, "file": str(FIXTURES / "caliban" / run["file"])}


def has(argv: list[str], *tokens: str) -> bool:
    return any(argv[i : i + len(tokens)] == list(tokens) for i in range(len(argv)))


TOOL_RUN = ["system/init", "assistant", "assistant", "user", "assistant", "result/success"]
PROMPT = "how many files are here?"


def test_query_with_a_tool_call(drive: Any) -> None:
    got = drive({"prompt": PROMPT}, "tool_use_two_turns.jsonl")
    assert got.kinds == TOOL_RUN and got.of("exception") == []
    result = got.messages[-1]
    assert (result["result"], result["num_turns"], result["is_error"]) == ("There are 3 files.", 2, False)
    (init,) = got.of("init_result")
    assert init["claude_code_version"] == "2.1.333" and init["account"]["apiProvider"] == "firstParty"
    (call,) = got.calls
    assert call["stdin"] == PROMPT and "--no-system" in call["argv"]  # the SDK's default systemPrompt [""]


def test_a_system_prompt_string_reaches_caliban(drive: Any) -> None:
    got = drive({"prompt": PROMPT, "options": {"systemPrompt": "You are a pirate."}}, "benign_text.jsonl")
    assert got.kinds == ["system/init", "assistant", "result/success"]
    assert has(got.argv(), "--system", "You are a pirate.")


def test_the_preset_with_an_append_reaches_caliban(drive: Any) -> None:
    options = {"systemPrompt": {"type": "preset", "preset": "claude_code", "append": "Be terse."}}
    got = drive({"prompt": PROMPT, "options": options}, "benign_text.jsonl")
    assert got.kinds == ["system/init", "assistant", "result/success"]
    assert "--system" not in got.argv() and "--no-system" not in got.argv()  # caliban's own prompt
    assert got.calls[0]["stdin"] == f"Be terse.\n\n{PROMPT}"
    assert "appendSystemPrompt: caliban has no appended system prompt" in got.stderr


def test_an_external_mcp_server_in_the_default_delivery(drive: Any) -> None:
    server = {"type": "stdio", "command": "/usr/bin/python3", "args": ["echo_server.py"]}
    got = drive({"prompt": "echo hello mcp", "options": {"mcpServers": {"ext": server},
                                                         "allowedTools": ["mcp__ext__echo"]}}, "benign_text.jsonl")  # fmt: skip
    assert got.kinds == ["system/init", "assistant", "result/success"] and got.of("exception") == []
    assert got.of("init_result")[0]["mcp_servers_applied"] is True
    argv = got.argv()
    assert got.calls[0]["settings"] == {"mcp_servers": {"ext": server}}  # (read from its file: argfiles.py)
    assert has(argv, "--allow", "mcp__ext__echo")


# An external MCP server that looks, once caliban has started it, for its own API token on every
# command line of the machine (`/proc/*/cmdline`), and at the file caliban's settings came in.
PEEKER = """
import json, os, stat, sys
token, hits = os.environ["API_TOKEN"].encode(), []
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            argv = fh.read()
            if token in argv:
                hits.append(argv.decode()[:300])
    except OSError:
        pass
with open(f"/proc/{os.getppid()}/cmdline", "rb") as fh:
    argv = fh.read().decode().split("\\0")
path = argv[argv.index("--settings") + 1]
modes = [oct(stat.S_IMODE(os.stat(p).st_mode)) for p in (path, os.path.dirname(path))]
with open(sys.argv[1], "w") as fh:
    json.dump({"hits": hits, "settings": path, "modes": modes, "read": token.decode() in open(path).read()}, fh)
for line in sys.stdin:
    msg = json.loads(line)
    if "id" in msg:
        result = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}}, "serverInfo": {"name": "p", "version": "1"}}
        result = {"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]} if msg["method"] == "tools/list" else result
        print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}), flush=True)
"""


def test_no_secret_of_an_mcp_server_is_on_any_command_line(drive: Any, tmp_path: Path) -> None:
    (tmp_path / "peeker.py").write_text(PEEKER)
    token = "sk-secret-" + os.urandom(8).hex()
    server = {"type": "stdio", "command": sys.executable, "args": [str(tmp_path / "peeker.py"), str(tmp_path / "seen.json")],
              "env": {"API_TOKEN": token}}  # fmt: skip
    got = drive({"prompt": "hi", "options": {"mcpServers": {"ext": server}}},
                {"file": "benign_text.jsonl", "mcp_calls": [], "text": "Hi."})  # fmt: skip
    assert got.kinds[-1] == "result/success" and got.of("exception") == []
    seen = json.loads((tmp_path / "seen.json").read_text())
    assert seen["hits"] == [] and seen["read"] is True  # caliban read it from its file, nobody's argv holds it
    assert seen["modes"] == ["0o600", "0o700"] and not Path(seen["settings"]).exists()  # private, and gone at the end
    assert token not in json.dumps(got.argv())


def test_persist_session_false_leaves_no_session(drive: Any, tmp_path: Path) -> None:
    config = {"CLAUDE_CONFIG_DIR": str(tmp_path / "claude")}  # and no Claude Code session file either
    got = drive({"prompt": PROMPT, "options": {"persistSession": False}}, "benign_text.jsonl", env=config)
    assert got.kinds[-1] == "result/success"
    argv = got.argv()
    assert "--sessions-dir" in argv and not Path(argv[argv.index("--sessions-dir") + 1]).exists()
    assert not (tmp_path / "sessions").exists() and not (tmp_path / "claude").exists()
    again = drive({"prompt": PROMPT}, "benign_text.jsonl", env=config)  # (and a normal one does keep it)
    assert list((tmp_path / "sessions").glob("*.json"))
    assert len(list((tmp_path / "claude" / "projects").glob("*/*.jsonl"))) == 1
    assert again.kinds[-1] == "result/success"


def test_settings_and_disallowed_tools_by_initialize(drive: Any) -> None:
    options = {"settings": {"permissions": {"allow": ["Bash(touch d.txt)"]}}, "settingsDelivery": "initialize",
               "disallowedTools": ["WebFetch", "WebSearch"], "disallowedToolsDelivery": "initialize"}  # fmt: skip
    got = drive({"prompt": PROMPT, "options": options}, "tool_use_two_turns.jsonl")
    assert got.kinds == TOOL_RUN and got.of("exception") == []
    init = got.of("init_result")[0]
    assert init["settings_applied"] is True and init["disallowed_tools_applied"] is True
    argv = got.argv()
    assert got.calls[0]["settings"] == {"permissions": {"allow": ["Bash(touch d.txt)"]}}
    assert has(argv, "--deny", "WebFetch", "--deny", "WebSearch")


def test_settings_caliban_cannot_take_are_refused_by_the_sdk(drive: Any) -> None:
    options = {"settings": {"env": {"A": "1"}}, "settingsDelivery": "initialize"}
    got = drive({"prompt": PROMPT, "options": options}, "benign_text.jsonl")
    (exception,) = got.of("exception")
    assert "did not confirm the settings" in exception and got.calls == []  # nothing ran
    assert "settings: env not supported by caliban; ignored" in got.stderr


def test_managed_settings_by_initialize(drive: Any) -> None:
    options = {"managedSettings": {"permissions": {"deny": ["WebFetch"]}}, "managedSettingsDelivery": "initialize"}
    got = drive({"prompt": PROMPT, "options": options}, "benign_text.jsonl")
    assert got.kinds[-1] == "result/success" and got.of("init_result")[0]["managed_settings_applied"] is True
    assert got.calls[0]["settings"] == {"permissions": {"deny": ["WebFetch"]}}


def test_max_turns_ends_in_the_sdks_error(drive: Any) -> None:
    got = drive({"prompt": PROMPT, "options": {"maxTurns": 1}}, "max_turns.jsonl")
    assert got.kinds[-1] == "result/error_max_turns" and has(got.argv(), "--max-turns", "1")
    assert got.of("exception") == ["Claude Code returned an error result: Reached maximum number of turns (1)"]


def test_two_streamed_messages_are_two_runs_of_one_session(drive: Any) -> None:
    got = drive({"prompt": ["hi", "what is 2+2?"]}, "benign_text.jsonl", "hi.jsonl")
    assert got.kinds == ["system/init", "assistant", "result/success"] * 2
    results = [m for m in got.messages if m["type"] == "result"]
    assert [r["result_index"] for r in results] == [0, 1] and [r["result"] for r in results] == ["ok", "Hello! How can I help?"]
    assert [c["stdin"] for c in got.calls] == ["hi", "what is 2+2?"]
    assert got.argv(0)[got.argv(0).index("--session") + 1] == got.argv(1)[got.argv(1).index("--session") + 1]


def test_hooks_on_a_caliban_without_mcp_serve_are_said_to_be_unbridged(drive: Any) -> None:
    """(With `mcp serve` the drive backend calls them: test_shim_drive_ts.py.)"""
    got = drive({"prompt": PROMPT, "hooks": True}, "tool_use_two_turns.jsonl", env={"FAKE_CALIBAN_NO_SERVE": "1"})
    assert got.kinds == TOOL_RUN and got.of("hook") == []  # caliban -p cannot call them
    assert "SDK hook callbacks cannot be bridged" in got.stderr


def test_a_hook_that_must_block_is_refused_by_the_sdk(drive: Any) -> None:
    got = drive({"prompt": PROMPT, "hooks": True, "blockingHook": True}, "tool_use_two_turns.jsonl")
    (exception,) = got.of("exception")
    assert "onFailure" in exception and got.messages == []


def test_resume_continues_the_session(drive: Any, sdk: Path, tmp_path: Path) -> None:
    config = {"CLAUDE_CONFIG_DIR": str(tmp_path / "claude")}
    first = drive({"prompt": "hi"}, "benign_text.jsonl", env=config)
    session = first.messages[-1]["session_id"]
    again = drive({"prompt": "more", "options": {"resume": session}}, "hi.jsonl", env=config)
    assert again.kinds == ["system/init", "assistant", "result/success"]
    assert again.messages[-1]["session_id"] == session and has(again.argv(1), "--resume", session)
    # and the TS SDK's own readers read the resumed session as one conversation, from its one file
    done = subprocess.run(["node", str(SUPPORT / "ts_sdk" / "sessions.mjs"), str(sdk)], capture_output=True,
                          env={**os.environ, **config}, timeout=60, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    read = json.loads(done.stdout)
    (info,) = read["sessions"]
    assert (info["sessionId"], info["firstPrompt"], info["summary"]) == (session, "hi", "more")
    prompts = [m["message"]["content"] for m in read["messages"][session] if m["type"] == "user"]
    assert prompts == [[{"type": "text", "text": "hi"}], [{"type": "text", "text": "more"}]]  # as the SDK sent them
    assert [m["type"] for m in read["messages"][session]] == ["user", "assistant"] * 2


def test_every_flag_the_sdk_writes_is_mapped_or_warned(drive: Any, tmp_path: Path) -> None:
    logger = tmp_path / "claude"  # the SDK's executable: notes its argv, then runs the shim
    logger.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > "{tmp_path}/argv"\nexec "{SHIM}" "$@"\n')
    logger.chmod(0o755)
    options = {
        "pathToClaudeCodeExecutable": str(logger), "thinking": {"type": "adaptive", "display": "summarized"},
        "effort": "high", "maxTurns": 5, "maxBudgetUsd": 1, "taskBudget": {"total": 5}, "model": "sonnet",
        "fallbackModel": "haiku", "agent": "reviewer", "betas": ["context-1m-2025-08-07"], "debug": True,
        "allowedTools": ["Bash(ls:*)"], "disallowedTools": ["WebFetch"], "tools": ["Bash", "Read"],
        "mcpServers": {"ext": {"type": "stdio", "command": "echo"}}, "mcpServersDelivery": "argv",
        "settingSources": ["user"], "strictMcpConfig": True, "permissionMode": "default", "includeHookEvents": True,
        "includePartialMessages": True, "additionalDirectories": [str(tmp_path)], "persistSession": False,
        "plugins": [{"type": "local", "path": str(tmp_path)}], "settings": {"permissions": {"deny": ["Write"]}},
        "managedSettings": {"permissions": {"deny": ["Edit"]}}, "extraArgs": {"replay-user-messages": None},
        "outputFormat": {"type": "json_schema", "schema": {"type": "object"}},
    }  # fmt: skip
    got = drive({"prompt": PROMPT, "options": options}, "benign_text.jsonl")
    assert got.kinds[-1] == "result/success", got.of("exception")
    written = [a.split("=")[0] for a in (tmp_path / "argv").read_text().splitlines() if a.startswith("--")]
    known = {CANONICAL.get(f, f) for f in VALUE_FLAGS | BOOL_FLAGS}
    assert set(written) <= known, set(written) - known  # no flag the shim does not know
    for flag in set(written) - MAPPED:
        assert flag in got.stderr, flag  # each one caliban cannot take is said
    assert "unknown option" not in got.stderr
    argv = got.argv()
    for run in (("--model", "claude-sonnet-4-5"), ("--max-turns", "5"), ("--debug",), ("--allow", "Bash(ls*)"),
                ("--deny", "WebFetch"), ("--json-schema", '{"type":"object"}'), ("--setting-sources", "user")):
        assert has(argv, *run), (run, argv)  # fmt: skip


def test_partial_messages(drive: Any) -> None:
    got = drive({"prompt": PROMPT, "options": {"includePartialMessages": True}}, "tool_use_two_turns.partial.jsonl")
    assert "stream_event" in got.kinds and got.kinds[-1] == "result/success"
    events = [m["event"]["type"] for m in got.messages if m["type"] == "stream_event"]
    assert events[0] == "message_start" and "content_block_delta" in events and events[-1] == "message_stop"
    assert "--include-partial-messages" in got.argv()


def test_interrupt_then_the_next_message(drive: Any) -> None:
    spec = {"prompt": [PROMPT, "what is 2+2?"], "options": {"includePartialMessages": True}, "interrupt": True}
    got = drive(spec, {"file": "tool_use_two_turns.partial.jsonl", "pause_after": 3}, "benign_text.jsonl")
    assert got.of("interrupt") == [{"still_queued": []}]
    results = [m for m in got.messages if m["type"] == "result"]
    assert [r["subtype"] for r in results] == ["error_during_execution", "success"]
    interrupted = next(m for m in got.messages if m["type"] == "user")
    assert interrupted["message"]["content"] == [{"type": "text", "text": "[Request interrupted by user]"}]
    assert len(got.calls) == 2 and got.of("exception") == []


def test_set_model_reaches_the_next_run(drive: Any) -> None:
    got = drive({"prompt": ["hi", "again"], "setModel": "haiku"}, "benign_text.jsonl", "hi.jsonl")
    assert got.kinds[-1] == "result/success" and got.of("set_model") == [None]
    assert "--model" not in got.argv(0) and has(got.argv(1), "--model", "claude-haiku-4-5")


def test_abort_ends_the_shim_and_caliban(drive: Any) -> None:
    got = drive({"prompt": PROMPT, "abort": True}, {"file": "tool_use_two_turns.jsonl", "pause_after": 1})
    (exception,) = got.of("exception")
    assert "abort" in exception.lower()
    (call,) = got.calls
    deadline = time.monotonic() + 10
    while os.path.exists(f"/proc/{call['pid']}") and time.monotonic() < deadline:  # the SDK does not wait
        time.sleep(0.05)
    assert not os.path.exists(f"/proc/{call['pid']}") or "Z" in Path(f"/proc/{call['pid']}/stat").read_text().split()[2]
