"""`caliban-claude` end to end: the real claude-agent-sdk drives the shim, which drives the
fake caliban (tests/support/fake_caliban.py) replaying recorded headless output. The SDK's
sessions are served in this process (support_inprocess.py); what only a process shows (signals,
exit status, stdio that fails or closes) goes through the installed command."""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from claude_agent_sdk import (
    AssistantMessage,
    ClaudeAgentOptions,
    ClaudeSDKClient,
    ResultError,
    ResultMessage,
    StreamEvent,
    SystemMessage,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    UserMessage,
)
from support_fixtures import FIXTURES, Reap
from support_inprocess import in_process, queried
from support_processes import fake_caliban, running

from translator.transcripts.files import session_path

SHIM = str(Path(sys.executable).with_name("caliban-claude"))
RECORDED = FIXTURES / "caliban"


@dataclass
class Caliban:
    """A fake caliban in a temporary directory, with its invocation log and sessions."""

    root: Path

    @property
    def sessions(self) -> Path:
        return self.root / "sessions"

    def options(self, *scripts: dict[str, Any], **kw: Any) -> ClaudeAgentOptions:
        env = {
            "CALIBAN_BIN": str(self.root / "caliban"),
            "CALIBAN_SESSIONS_DIR": str(self.sessions),
            "FAKE_CALIBAN_LOG": str(self.root / "calls.jsonl"),
            "FAKE_CALIBAN_SCRIPTS": json.dumps([{**s, "file": str(RECORDED / s["file"])} for s in scripts]),
        }
        return ClaudeAgentOptions(cli_path=SHIM, env=env, **kw)

    def calls(self) -> list[dict[str, Any]]:
        log = self.root / "calls.jsonl"
        return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


@pytest.fixture
def caliban(tmp_path: Path) -> Caliban:
    fake_caliban(tmp_path)
    return Caliban(tmp_path)


def flag(argv: list[str], name: str) -> str | None:
    """The value after `name` in argv (None when absent)."""
    return argv[argv.index(name) + 1] if name in argv else None


async def collect(prompt: str, options: ClaudeAgentOptions) -> list[Any]:
    return [m async for m in queried(prompt, options)]


async def until_result(client: ClaudeSDKClient) -> list[Any]:
    return [m async for m in client.receive_response()]


async def test_query_with_a_tool_call(caliban: Caliban) -> None:
    messages = await collect("how many files are here?", caliban.options({"file": "tool_use_two_turns.jsonl"}))
    kinds = [type(m).__name__ for m in messages]
    assert kinds == [
        "SystemMessage",
        "AssistantMessage",
        "AssistantMessage",
        "UserMessage",
        "AssistantMessage",
        "ResultMessage",
    ]
    init, text, call, tool_result, answer, result = messages
    assert init.subtype == "init" and init.data["claude_code_version"] == "2.1.333"
    assert init.data["cwd"] == "/home/dev/project" and init.data["tools"] == ["Bash"]
    assert text.content == [TextBlock(text="I'll count the files.")]
    assert isinstance(call.content[0], ToolUseBlock) and call.content[0].input == {"command": "ls | wc -l"}
    assert isinstance(tool_result.content[0], ToolResultBlock) and tool_result.content[0].content == "3"
    assert answer.content == [TextBlock(text="There are 3 files.")]
    assert isinstance(result, ResultMessage)
    assert (result.subtype, result.is_error, result.result, result.num_turns) == (
        "success",
        False,
        "There are 3 files.",
        2,
    )
    assert result.session_id == init.data["session_id"]
    assert result.total_cost_usd == pytest.approx(0.0259062)
    (call_log,) = caliban.calls()
    assert call_log["stdin"] == "how many files are here?"
    argv = call_log["argv"]
    assert argv[:4] == ["-p", "-", "--output-format", "stream-json"] and "--no-system" in argv
    assert flag(argv, "--session") == result.session_id


async def test_two_messages_are_two_caliban_runs_of_one_session(caliban: Caliban) -> None:
    options = caliban.options({"file": "tool_use_two_turns.jsonl"}, {"file": "benign_text.jsonl"}, model="sonnet")
    async with in_process(options) as client:
        await client.query("how many files are here?")
        first = await until_result(client)
        await client.query("hi")
        second = await until_result(client)
    r1, r2 = first[-1], second[-1]
    assert isinstance(r1, ResultMessage) and isinstance(r2, ResultMessage)
    assert (r1.result, r2.result) == ("There are 3 files.", "ok")
    assert r1.session_id == r2.session_id
    assert r2.total_cost_usd == pytest.approx(r1.total_cost_usd)  # cumulative; the second run cost 0
    assert [type(m).__name__ for m in second] == ["SystemMessage", "AssistantMessage", "ResultMessage"]
    calls = caliban.calls()
    assert [c["stdin"] for c in calls] == ["how many files are here?", "hi"]
    assert {flag(c["argv"], "--session") for c in calls} == {r1.session_id}
    assert all(flag(c["argv"], "--model") == "claude-sonnet-4-5" for c in calls)
    saved = json.loads((caliban.sessions / f"{r1.session_id}.json").read_text())
    assert saved["messages"] == ["how many files are here?", "hi"]


async def test_interrupt_cancels_the_run_and_the_shim_stays_usable(caliban: Caliban) -> None:
    options = caliban.options({"file": "tool_use_two_turns.jsonl", "pause_after": 2}, {"file": "benign_text.jsonl"})
    async with in_process(options) as client:
        await client.query("how many files are here?")
        seen: list[Any] = []
        async for message in client.receive_response():
            seen.append(message)
            if isinstance(message, SystemMessage) and message.subtype == "init":
                started = time.monotonic()
                await client.interrupt()
                assert time.monotonic() - started < 5
        await client.query("hi")
        after = await until_result(client)
    interrupted, result = seen[-2], seen[-1]
    assert isinstance(interrupted, UserMessage)
    assert interrupted.content == [TextBlock(text="[Request interrupted by user]")]
    assert isinstance(result, ResultMessage)
    assert (result.subtype, result.is_error, result.terminal_reason) == (
        "error_during_execution",
        True,
        "aborted_streaming",
    )
    assert isinstance(after[-1], ResultMessage) and after[-1].result == "ok"
    # caliban got SIGINT, not a kill: it saved the interrupted message, and the next run continued
    saved = json.loads((caliban.sessions / f"{result.session_id}.json").read_text())
    assert saved["messages"] == ["how many files are here?", "hi"]


async def test_max_turns_raises_result_error(caliban: Caliban) -> None:
    seen: list[Any] = []
    with pytest.raises(ResultError) as caught:
        async for message in queried("count", caliban.options({"file": "max_turns.jsonl"}, max_turns=1)):
            seen.append(message)
    result = seen[-1]
    assert isinstance(result, ResultMessage) and result.subtype == "error_max_turns"
    assert result.errors == ["Reached maximum number of turns (1)"]
    assert caught.value.exit_code == 1
    assert flag(caliban.calls()[0]["argv"], "--max-turns") == "1"


async def test_api_error_is_an_error_result(caliban: Caliban) -> None:
    seen: list[Any] = []
    with pytest.raises(ResultError):
        async for message in queried("hi", caliban.options({"file": "api_error.jsonl"})):
            seen.append(message)
    synthetic, result = seen[-2], seen[-1]
    assert isinstance(synthetic, AssistantMessage) and synthetic.model == "<synthetic>"
    assert isinstance(result, ResultMessage) and result.is_error and result.api_error_status == 500


async def test_thinking_without_signature_parses(caliban: Caliban) -> None:
    messages = await collect("17 * 23?", caliban.options({"file": "thinking.jsonl"}))
    thinking = [
        b for m in messages if isinstance(m, AssistantMessage) for b in m.content if isinstance(b, ThinkingBlock)
    ]
    assert [t.thinking for t in thinking] == ["The user wants 17 * 23. 17 * 20 = 340, 17 * 3 = 51, 340 + 51 = 391."]
    assert [t.signature for t in thinking] == [""]  # caliban prints none; the SDK requires the key
    assert messages[-1].result == "17 * 23 = 391."


async def test_partial_messages_stream_events(caliban: Caliban) -> None:
    options = caliban.options({"file": "thinking_partial.partial.jsonl"}, include_partial_messages=True)
    messages = await collect("17 * 23?", options)
    events = [m.event["type"] for m in messages if isinstance(m, StreamEvent)]
    assert events[0] == "message_start" and "content_block_delta" in events and events[-1] == "message_stop"
    assert "--include-partial-messages" in caliban.calls()[0]["argv"]
    assert messages[-1].result == "17 * 23 = 391."


async def test_resume_of_a_missing_session_is_an_error_result(caliban: Caliban) -> None:
    """No session file of that id here: the CLI's lone result and line before it exits 1
    (test_shim_sessions.py holds them to the bundled CLI's), which the SDK raises; caliban is
    never run."""
    line = "No conversation found with session ID: a1111111-1111-4111-8111-111111111111"
    with pytest.raises(ResultError, match=line):
        async for _ in queried("hi", caliban.options({"file": "benign_text.jsonl"}, resume="a1111111-1111-4111-8111-111111111111")):
            pass
    assert caliban.calls() == []


async def test_resume_continues_an_existing_session(caliban: Caliban) -> None:
    caliban.sessions.mkdir()
    (caliban.sessions / "e1111111-1111-4111-8111-111111111111.json").write_text(json.dumps({"name": "e1111111-1111-4111-8111-111111111111", "messages": ["before"]}))
    kept = Path(session_path(os.environ["CLAUDE_CONFIG_DIR"], os.getcwd(), "e1111111-1111-4111-8111-111111111111"))
    kept.parent.mkdir(parents=True, exist_ok=True)
    kept.touch()  # its Claude Code file: what says the session exists (sessions.py)
    options = caliban.options({"file": "benign_text.jsonl"}, resume="e1111111-1111-4111-8111-111111111111")
    async with in_process(options) as client:
        for prompt in ("one", "two"):
            await client.query(prompt)
            result = (await until_result(client))[-1]
            assert result.session_id == "e1111111-1111-4111-8111-111111111111" and result.result == "ok"
    first, second = (c["argv"] for c in caliban.calls())
    assert flag(first, "--resume") == "e1111111-1111-4111-8111-111111111111" and flag(second, "--session") == "e1111111-1111-4111-8111-111111111111"
    assert json.loads((caliban.sessions / "e1111111-1111-4111-8111-111111111111.json").read_text())["messages"] == ["before", "one", "two"]


async def test_set_model_and_permission_mode_apply_to_the_next_run(caliban: Caliban) -> None:
    async with in_process(caliban.options({"file": "benign_text.jsonl"}, permission_mode="dontAsk")) as client:
        await client.query("one")
        await until_result(client)
        await client.set_permission_mode("acceptEdits")
        with pytest.raises(Exception, match="unknown permission mode 'sometimes'"):
            await client.set_permission_mode("sometimes")  # type: ignore[arg-type]
        await client.set_model("opus")
        await client.query("two")
        second = await until_result(client)
    first, then = (c["argv"] for c in caliban.calls())
    assert flag(first, "--permission-mode") == "default" and "--model" not in first  # dontAsk → caliban's default
    assert flag(then, "--permission-mode") == "acceptEdits" and flag(then, "--model") == "claude-opus-4-1"
    status, init = second[0], second[1]  # Claude Code's status frame after the mode change, then the run
    assert isinstance(status, SystemMessage) and status.subtype == "status"
    assert status.data["permissionMode"] == "acceptEdits"
    assert isinstance(init, SystemMessage) and init.subtype == "init" and init.data["permissionMode"] == "acceptEdits"


async def test_unsupported_control_is_answered_at_once(caliban: Caliban) -> None:
    async with in_process(caliban.options({"file": "benign_text.jsonl"})) as client:
        started = time.monotonic()
        with pytest.raises(Exception, match="get_context_usage is not supported"):
            await client.get_context_usage()
        assert time.monotonic() - started < 5
        status = await client.get_mcp_status()
        assert status["mcpServers"] == []


async def test_disconnect_mid_run_leaves_nothing_behind(caliban: Caliban) -> None:
    client = ClaudeSDKClient(caliban.options({"file": "tool_use_two_turns.jsonl", "pause_after": 2}))
    await client.connect()
    info = await client.get_server_info()
    assert info is not None
    shim_pid = info["pid"]
    await client.query("how many files are here?")
    async for message in client.receive_messages():
        if isinstance(message, SystemMessage) and message.subtype == "init":
            break
    caliban_pid = caliban.calls()[0]["pid"]
    started = time.monotonic()
    await client.disconnect()  # stdin EOF, 5 s, SIGTERM (the shim: SIGINT caliban), 5 s, SIGKILL
    for _ in range(100):
        if not running(shim_pid) and not running(caliban_pid):
            break
        await anyio.sleep(0.1)
    assert not running(shim_pid) and not running(caliban_pid)
    assert time.monotonic() - started < 10  # within the SDK's grace, before its SIGKILL
    saved = json.loads((caliban.sessions / f"{flag(caliban.calls()[0]['argv'], '--session')}.json").read_text())
    assert saved["messages"] == ["how many files are here?"]  # caliban saved its session on SIGINT


async def test_a_caliban_that_dies_without_a_result_gives_an_error_result(caliban: Caliban) -> None:
    crash = {"file": "tool_use_two_turns.jsonl", "exit_after": 2, "exit": 101, "stderr": "thread 'main' panicked"}
    async with in_process(caliban.options(crash, {"file": "benign_text.jsonl"})) as client:
        await client.query("how many files are here?")
        first = await until_result(client)
        await client.query("hi")
        second = await until_result(client)
    result = first[-1]
    assert isinstance(result, ResultMessage) and result.is_error and result.subtype == "error_during_execution"
    assert result.errors == ["caliban exited with status 101 without a result: thread 'main' panicked"]
    assert second[-1].result == "ok"  # the shim stays usable


async def test_a_usage_error_and_a_missing_caliban_are_error_results(caliban: Caliban) -> None:
    usage = {
        "file": "benign_text.jsonl",
        "exit_after": 0,
        "exit": 2,
        "stderr": "error: unexpected argument '--x' found",
    }
    seen = []
    with pytest.raises(ResultError, match="status 2 without a result: error: unexpected argument"):
        async for message in queried("hi", caliban.options(usage)):
            seen.append(message)
    options = caliban.options({"file": "benign_text.jsonl"})
    options.env["CALIBAN_BIN"] = str(caliban.root / "no-such-caliban")
    with pytest.raises(ResultError, match="status 127 without a result: cannot run"):
        await collect("hi", options)


async def test_stderr_reaches_the_app_with_the_shims_warnings(caliban: Caliban) -> None:
    lines: list[str] = []
    script = {"file": "benign_text.jsonl", "stderr": "[caliban] a note from caliban"}
    options = caliban.options(script, stderr=lines.append, add_dirs=["/srv"], extra_args={"replay-user-messages": None})
    messages = await collect("hi", options)
    assert "[caliban] a note from caliban" in lines
    assert any(line.startswith("caliban-claude: warning: --add-dir") for line in lines)
    echo = messages[0]  # --replay-user-messages: the prompt comes back first
    assert isinstance(echo, UserMessage) and echo.content == "hi"


async def test_callbacks_on_a_caliban_without_mcp_serve_are_warned_about_and_the_run_completes(caliban: Caliban) -> None:
    """(With `mcp serve`, the drive backend calls them: test_shim_drive.py.)"""
    from claude_agent_sdk import HookMatcher, PermissionResultAllow

    async def allow(name: str, tool_input: dict[str, Any], context: Any) -> PermissionResultAllow:
        return PermissionResultAllow()

    async def hook(tool_input: Any, tool_use_id: str | None, context: Any) -> dict[str, Any]:
        return {}

    lines: list[str] = []
    options = caliban.options(
        {"file": "tool_use_two_turns.jsonl"}, stderr=lines.append, can_use_tool=allow,
        hooks={"PreToolUse": [HookMatcher(matcher=None, hooks=[hook])]},
    )  # fmt: skip
    options.env["FAKE_CALIBAN_NO_SERVE"] = "1"
    async with in_process(options) as client:
        await client.query("how many files are here?")
        result = (await until_result(client))[-1]
    assert result.result == "There are 3 files."
    assert any("can_use_tool" in line for line in lines) and any("hook callbacks" in line for line in lines)


async def test_non_text_content_is_dropped_with_a_warning(caliban: Caliban) -> None:
    async def prompt() -> Any:
        content = [
            {"type": "text", "text": "what is this?"},
            {"type": "image", "source": {"type": "base64", "data": ""}},
        ]
        yield {"type": "user", "message": {"role": "user", "content": content}, "parent_tool_use_id": None}

    lines: list[str] = []
    messages = [
        m
        async for m in queried(
            prompt(), caliban.options({"file": "benign_text.jsonl"}, stderr=lines.append)
        )
    ]
    assert messages[-1].result == "ok"
    assert caliban.calls()[0]["stdin"] == "what is this?"
    assert any("1 non-text content block(s)" in line for line in lines)


def test_stream_json_in_and_out_are_required() -> None:
    import subprocess

    from translator import __version__

    version = subprocess.run([SHIM, "--version"], capture_output=True, timeout=30)
    assert version.stdout.decode() == f"2.1.333 (Claude Code; caliban-claude {__version__})\n"
    assert subprocess.run([SHIM, "--help"], capture_output=True, timeout=30).stdout.startswith(b"usage: caliban-claude")

    done = subprocess.run(
        [SHIM, "--output-format", "text", "--input-format", "stream-json"], capture_output=True, timeout=30
    )
    assert done.returncode == 64 and done.stdout == b""
    assert (
        done.stderr.decode()
        == "caliban-claude: --output-format stream-json is required without -p (the Agent SDK's protocol); "
        "a prompt: caliban-claude -p PROMPT\n"
    )


@pytest.mark.parametrize(
    ("ignores", "ended_by"), [((), None), (("sigint",), "SIGTERM"), (("sigint", "sigterm"), "SIGKILL")],
    ids=["caliban-cancels", "caliban-ignores-sigint", "caliban-ignores-sigint-and-sigterm"],
)
def test_sigterm_stops_caliban_and_the_shim(caliban: Caliban, ignores: tuple[str, ...], ended_by: str | None) -> None:
    """SIGTERM: caliban's group gets SIGINT (its cancelled result reaches the app); one that
    does not stop within the grace gets SIGTERM, then SIGKILL. Either way both are gone, within
    the SDK's 5 s before its own SIGKILL, and the shim exits 143."""
    import subprocess

    script = {"file": "tool_use_two_turns.jsonl", "pause_after": 2, **{f"ignore_{name}": True for name in ignores}}
    options = caliban.options(script)
    shim = subprocess.Popen(
        [SHIM, "--output-format", "stream-json", "--verbose", "--input-format", "stream-json"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, env={**os.environ, **options.env},
    )  # fmt: skip
    assert shim.stdin is not None and shim.stdout is not None
    shim.stdin.write(b'{"type":"user","message":{"role":"user","content":"hi"},"parent_tool_use_id":null}\n')
    shim.stdin.flush()
    assert json.loads(shim.stdout.readline())["subtype"] == "init"  # caliban is running
    started = time.monotonic()
    shim.send_signal(15)
    rest = [json.loads(line) for line in shim.stdout]
    assert shim.wait(timeout=30) == 143
    # The grace is 3 s, then 0.5 s, inside the SDK's 5 s before its SIGKILL; the margin is for a loaded machine.
    assert time.monotonic() - started < 6
    assert not running(caliban.calls()[0]["pid"])
    result = rest[-1]
    assert (result["type"], result["subtype"], result["is_error"]) == ("result", "error_during_execution", True)
    if ended_by:
        assert result["errors"] == [f"caliban was killed by {ended_by} without a result"]
    else:
        assert result["terminal_reason"] == "aborted_streaming"  # caliban's own cancelled result


async def test_the_app_sees_what_the_real_cli_showed_it(caliban: Caliban) -> None:
    """The protocol oracle: the real SDK driving the real Claude Code CLI on the same
    conversation (fixtures/sdk-wire/query_tools.sdk.jsonl). Ids, timings and cost
    differ by nature (caliban's recording has its own); everything else the app sees agrees."""
    from dataclasses import asdict

    recorded = (FIXTURES / "sdk-wire" / "query_tools.sdk.jsonl").read_text().splitlines()
    oracle = [json.loads(line)["obj"] for line in recorded]
    oracle = [o for o in oracle if isinstance(o, dict)]
    messages = await collect("how many files are here?", caliban.options({"file": "tool_use_two_turns.jsonl"}))
    assert [type(m).__name__ for m in messages] == [o["class"] for o in oracle]
    for message, seen in zip(messages, oracle, strict=True):
        if isinstance(message, AssistantMessage | UserMessage) and not isinstance(message.content, str):
            assert [asdict(b) for b in message.content] == seen["content"]
        if isinstance(message, UserMessage):
            assert message.tool_use_result == seen["tool_use_result"]
        if isinstance(message, ResultMessage):
            keys = ("subtype", "is_error", "num_turns", "stop_reason", "result", "terminal_reason", "errors")
            assert {k: getattr(message, k) for k in keys} == {k: seen[k] for k in keys}


def test_the_raw_protocol_survives_bad_stdin_lines(caliban: Caliban) -> None:
    """Without the SDK: bad lines are warned about and skipped, every request is answered, a
    prompt of megabytes reaches caliban whole, and the exit status follows the last result."""
    import subprocess

    options = caliban.options({"file": "benign_text.jsonl"})
    prompt = "y" * (3 << 20)
    lines = [
        b"not json",
        b'{"type":"control_request","request_id":"r1","request":"oops"}',
        b'{"type":"control_request","request_id":"r2","request":{"subtype":"interrupt"}}',
        b'{"type":"mystery"}',
        json.dumps({"type": "user", "message": {"role": "user", "content": prompt}}).encode(),
    ]
    done = subprocess.run(
        [SHIM, "--output-format", "stream-json", "--verbose", "--input-format", "stream-json"],
        input=b"\n".join(lines), capture_output=True, env={**os.environ, **options.env}, timeout=60,
    )  # fmt: skip
    frames = [json.loads(line) for line in done.stdout.splitlines()]
    answers = {f["response"]["request_id"]: f["response"] for f in frames if f["type"] == "control_response"}
    assert answers["r1"] == {"subtype": "error", "request_id": "r1", "error": "caliban shim: None is not supported"}
    assert answers["r2"]["response"] == {"still_queued": []}
    assert frames[-1]["type"] == "result" and frames[-1]["result"] == "ok" and done.returncode == 0
    assert caliban.calls()[0]["stdin"] == prompt  # the last line had no newline: it still counts
    stderr = done.stderr.decode()
    assert "stdin:1: not JSON, ignored: b'not json'" in stderr and "'mystery' ignored" in stderr


USER_LINE = b'{"type":"user","message":{"role":"user","content":"hi"},"parent_tool_use_id":null}\n'
SHIM_ARGV = [SHIM, "--output-format", "stream-json", "--verbose", "--input-format", "stream-json"]


def test_an_app_that_stops_reading_stops_the_run(caliban: Caliban) -> None:
    """The app closes its end of the shim's stdout mid-run: nobody would see what caliban
    does next, so caliban is interrupted (it saves its session) and the shim ends, unsaid,
    with the status of that last, cancelled, result — it does not wait for stdin's end."""
    import subprocess

    options = caliban.options({"file": "tool_use_two_turns.jsonl", "pause_after": 2})
    shim = subprocess.Popen(
        SHIM_ARGV, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env={**os.environ, **options.env},
    )  # fmt: skip
    assert shim.stdin is not None and shim.stdout is not None and shim.stderr is not None
    shim.stdin.write(USER_LINE)
    shim.stdin.flush()
    assert json.loads(shim.stdout.readline())["subtype"] == "init"  # caliban is running, paused
    started = time.monotonic()
    shim.stdout.close()
    assert shim.wait(timeout=30) == 1
    assert time.monotonic() - started < 6  # caliban's pause would have lasted 30 s
    assert not running(caliban.calls()[0]["pid"])
    saved = json.loads((caliban.sessions / f"{flag(caliban.calls()[0]['argv'], '--session')}.json").read_text())
    assert saved["messages"] == ["hi"]  # caliban was interrupted (SIGINT), not killed
    assert shim.stderr.read() == b""
    shim.stdin.close()


@pytest.mark.parametrize(
    ("redirect", "error"), [(">/dev/full", "No space left on device"), (">&-", "Bad file descriptor")],
    ids=["full-disk", "closed-stdout"],
)
def test_a_stdout_that_fails_is_one_line_and_74(caliban: Caliban, redirect: str, error: str) -> None:
    """A write that fails for another reason than a reader gone (a full disk; a stdout the
    shim was started without, which no pipe of caliban's may take over) stops the run and is
    said in one line."""
    import subprocess

    options = caliban.options({"file": "tool_use_two_turns.jsonl", "pause_after": 2})
    done = subprocess.run(
        ["sh", "-c", f'exec "$@" {redirect}', "sh", *SHIM_ARGV], input=USER_LINE, capture_output=True,
        env={**os.environ, **options.env}, timeout=30,
    )  # fmt: skip
    assert (done.returncode, done.stderr.decode()) == (74, f"caliban-claude: write error: {error}\n")
    assert not running(caliban.calls()[0]["pid"])


def test_an_ignored_sighup_stays_ignored(caliban: Caliban, reap: Reap) -> None:
    """Started under nohup (SIGHUP ignored), a hang-up does not stop the shim."""
    import signal
    import subprocess

    options = caliban.options({"file": "benign_text.jsonl"})
    shim = reap(subprocess.Popen(
        SHIM_ARGV, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env={**os.environ, **options.env},
        preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN),
    ))  # fmt: skip
    assert shim.stdin is not None and shim.stdout is not None
    shim.stdin.write(USER_LINE)
    shim.stdin.flush()
    frames = [json.loads(shim.stdout.readline())]
    while frames[-1]["type"] != "result":
        frames.append(json.loads(shim.stdout.readline()))
    shim.send_signal(signal.SIGHUP)
    time.sleep(0.5)
    assert shim.poll() is None
    shim.stdin.close()
    assert shim.wait(timeout=30) == 0 and frames[-1]["result"] == "ok"


def test_a_closed_stderr_is_no_reason_to_fail(caliban: Caliban) -> None:
    """Started without stderr (`2>&-`: Python has no sys.stderr), the shim's warnings are lost,
    not its run (a warning raised AttributeError: the shim ended, silent, with 1), and its usage
    error is not written to stdout, which carries protocol frames only."""
    import subprocess

    closed = ["sh", "-c", 'exec "$@" 2>&-', "sh"]
    options = caliban.options({"file": "benign_text.jsonl"})
    done = subprocess.run([*closed, *SHIM_ARGV], input=b"not json\n" + USER_LINE, capture_output=True,
                          env={**os.environ, **options.env}, timeout=30)
    frames = [json.loads(line) for line in done.stdout.splitlines()]
    assert (done.returncode, frames[-1]["type"], frames[-1]["result"]) == (0, "result", "ok")
    usage = subprocess.run([*closed, SHIM], capture_output=True, timeout=30)
    assert (usage.returncode, usage.stdout, usage.stderr) == (64, b"", b"")
