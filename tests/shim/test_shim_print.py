"""`caliban-claude -p`: Claude Code's print mode, run as a shell runs it (pipelines into `jq` and
`cat`, PIPESTATUS), against what the real CLI 2.1.333 printed (fixtures/cc-2.1.333/print/): the
same command line and stdin, the fake caliban (tests/support/fake_caliban.py) replaying caliban's
output for the same conversation."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from support_fixtures import FIXTURES
from support_processes import fake_caliban

SHIM = str(Path(sys.executable).with_name("caliban-claude"))
PRINT = FIXTURES / "cc-2.1.333" / "print"
SCRIPTS = FIXTURES / "caliban"
JQ = shutil.which("jq")

# The caliban run that answers each recorded conversation the same way.
SCRIPT = {
    "api_error_400": "api_error_400.jsonl", "api_error_500": "api_error.jsonl",
    "api_error_overloaded": "api_error_overloaded.jsonl", "hi": "hi.jsonl", "max_turns": "max_turns.jsonl",
    "multiline": "multiline_text.jsonl",
}  # fmt: skip
# What the shim cannot give as Claude Code did, and why (the README's table says it too).
UNREACHED = {
    "text_permission_denied": "caliban reports no permission denials (no system/permission_denied frames)",
    "json_permission_denied": "caliban reports no permission denials (permission_denials is [])",
    "stream_json_permission_denied": "caliban reports no permission denials",
}


@dataclass
class Recorded:
    """One print-mode scenario as the real CLI ran it."""

    name: str
    argv: list[str]
    stdin: bytes | None  # None: /dev/null; b"": an open pipe that stays silent
    status: int
    stdout: bytes
    stderr: bytes

    @property
    def script(self) -> str:
        return next((file for key, file in SCRIPT.items() if self.name.startswith(key)), "tool_use_two_turns.jsonl")


def recorded(name: str) -> Recorded:
    cmd = (PRINT / f"{name}.cmd.txt").read_text().splitlines()
    argv = shlex.split(cmd[cmd.index("# command:") + 1])[1:]
    stdin_line = next(line for line in cmd if line.startswith("# stdin: "))[len("# stdin: ") :]
    written = re.search(r"were written, then it was closed: (\".*\")$", stdin_line)
    stdin = None if stdin_line == "/dev/null" else json.loads(written.group(1)).encode() if written else b""
    status = int(next(line for line in cmd if line.startswith("# exit status: ")).split(": ")[1])
    return Recorded(name, argv, stdin, status, (PRINT / f"{name}.stdout").read_bytes(), (PRINT / f"{name}.stderr").read_bytes())


NAMES = sorted(p.name.removesuffix(".cmd.txt") for p in PRINT.glob("*.cmd.txt"))


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    wrapper = fake_caliban(tmp_path)
    return {**os.environ, "CALIBAN_BIN": str(wrapper), "CALIBAN_SESSIONS_DIR": str(tmp_path / "sessions"),
            "FAKE_CALIBAN_LOG": str(tmp_path / "calls.jsonl"), "CALIBAN_CLAUDE_ARGS": ""}  # fmt: skip


def script(env: dict[str, str], file: str) -> dict[str, str]:
    return {**env, "FAKE_CALIBAN_SCRIPTS": json.dumps([{"file": str(SCRIPTS / file)}])}


def run(rec: Recorded, env: dict[str, str]) -> subprocess.CompletedProcess[bytes]:
    """The recorded command, the shim in place of `claude`, fed stdin as the recording was."""
    argv = [SHIM, *rec.argv]
    if rec.stdin == b"":  # an open pipe that never gets data: the shim must not wait on it
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        out, err = proc.communicate(timeout=30)  # (communicate(None) leaves stdin open)
        return subprocess.CompletedProcess(argv, proc.returncode, out, err)
    stdin = subprocess.DEVNULL if rec.stdin is None else None
    return subprocess.run(argv, input=rec.stdin, stdin=stdin, capture_output=True, env=env, timeout=30)


def frames(out: bytes) -> list[dict[str, object]]:
    return [json.loads(line) for line in out.splitlines()]


def kinds(frames: list[dict[str, object]]) -> list[tuple[object, object]]:
    return [(f["type"], f.get("subtype")) for f in frames]


@pytest.mark.parametrize("name", [n for n in NAMES if n not in UNREACHED])
def test_as_the_recording(name: str, env: dict[str, str]) -> None:
    rec = recorded(name)
    got = run(rec, script(env, rec.script))
    assert got.returncode == rec.status, got.stderr
    if rec.stderr and not rec.stdout:  # a refusal: Claude Code's own line, nothing run
        assert got.stderr == rec.stderr and got.stdout == b""
        assert not Path(env["FAKE_CALIBAN_LOG"]).exists()
        return
    fmt = rec.argv[rec.argv.index("--output-format") + 1] if "--output-format" in rec.argv else "text"
    if fmt == "text" and not name.startswith("api_error"):
        assert got.stdout == rec.stdout  # byte for byte
    elif fmt == "text":  # caliban's provider error texts are its own: the form is Claude Code's
        assert got.stdout.startswith(rec.stdout.split(b":")[0] + b": ") and got.stdout.endswith(b"\n")
        assert got.stdout.count(b"\n") == 1
    elif fmt == "json" and "--verbose" in rec.argv:
        want, have = json.loads(rec.stdout), json.loads(got.stdout)
        assert kinds(have) == kinds(want) and [list(f) for f in have][-1] == list(want[-1])
    elif fmt == "json":
        want, have = json.loads(rec.stdout), json.loads(got.stdout)
        assert list(have) == list(want)  # Claude Code's keys in its order
        for key in ("type", "subtype", "is_error", "num_turns", "terminal_reason", "stop_reason", "api_error_status"):
            assert have.get(key) == want.get(key), key
        if want.get("result") and not want.get("is_error"):
            assert have["result"] == want["result"]
    else:  # stream-json: the same frames, but caliban has no retry frames to give
        want = [f for f in frames(rec.stdout) if f.get("subtype") != "api_retry"]
        have = frames(got.stdout)
        assert kinds(have) == kinds(want)
        assert [list(f) for f in have][-1] == [k for k in want[-1] if k != "written_at"]  # (2.1.333 only)
    if b"retired" not in rec.stderr:  # (a warning about Claude's own model: caliban's are others)
        assert got.stderr == rec.stderr


def bash(command: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", command], capture_output=True, text=True, env=env, timeout=60)


@pytest.mark.skipif(JQ is None, reason="jq is not installed")
def test_json_into_jq(env: dict[str, str]) -> None:
    got = bash(f'{SHIM} -p "how many files are here?" --output-format json </dev/null | jq -r .result;'
               ' echo "${PIPESTATUS[@]}"', script(env, "tool_use_two_turns.jsonl"))  # fmt: skip
    assert got.stdout == "There are 3 files.\n0 0\n" and got.stderr == ""


@pytest.mark.skipif(JQ is None, reason="jq is not installed")
def test_an_error_result_through_jq_keeps_its_status(env: dict[str, str]) -> None:
    got = bash(f"{SHIM} -p hi --max-turns 1 --output-format json </dev/null | jq -r .subtype,.errors[0];"
               ' echo "${PIPESTATUS[@]}"', script(env, "max_turns.jsonl"))  # fmt: skip
    assert got.stdout == "error_max_turns\nReached maximum number of turns (1)\n1 0\n"


@pytest.mark.skipif(JQ is None, reason="jq is not installed")
def test_stream_json_into_jq_frame_by_frame(env: dict[str, str]) -> None:
    got = bash(f"{SHIM} -p hi --output-format stream-json --verbose </dev/null | jq -c '[.type, .subtype]';"
               ' echo "${PIPESTATUS[@]}"', script(env, "tool_use_two_turns.jsonl"))  # fmt: skip
    assert got.stdout.splitlines() == [
        '["system","init"]', '["assistant",null]', '["assistant",null]', '["user",null]', '["assistant",null]',
        '["result","success"]', "0 0",
    ]  # fmt: skip


def test_stdin_piped_in_and_the_text_through_cat(env: dict[str, str]) -> None:
    got = bash(f"printf 'a.txt\\nb.txt\\n' | {SHIM} -p 'count them' | cat; echo \"${{PIPESTATUS[@]}}\"",
               script(env, "tool_use_two_turns.jsonl"))  # fmt: skip
    assert got.stdout == "There are 3 files.\n0 0 0\n"
    (call,) = [json.loads(line) for line in Path(env["FAKE_CALIBAN_LOG"]).read_text().splitlines()]
    assert call["stdin"] == "count them\na.txt\nb.txt\n"  # Claude Code's `ARG\nSTDIN`, verbatim


def test_an_error_text_through_cat(env: dict[str, str]) -> None:
    got = bash(f"{SHIM} -p hi --max-turns 1 </dev/null | cat; echo \" ${{PIPESTATUS[@]}}\"",
               script(env, "max_turns.jsonl"))  # fmt: skip
    assert got.stdout == "Error: Reached max turns (1) 1 0\n"


def test_a_closed_reader_ends_quietly(env: dict[str, str]) -> None:
    got = bash(f"{SHIM} -p hi --output-format stream-json --verbose </dev/null | head -c1; echo \" ${{PIPESTATUS[0]}}\"",
               script(env, "tool_use_two_turns.jsonl"))  # fmt: skip
    assert got.stdout in ("{ 0\n", "{ 141\n") and got.stderr == ""


def test_caliban_gets_the_flags_of_the_command_line(env: dict[str, str]) -> None:
    got = bash(f"{SHIM} -p hi --model sonnet --max-turns 3 --allowedTools 'Bash(ls:*)' --no-session-persistence"
               " --append-system-prompt 'Be terse.' </dev/null", script(env, "tool_use_two_turns.jsonl"))  # fmt: skip
    assert got.returncode == 0 and got.stdout == "There are 3 files.\n"
    assert "--append-system-prompt: caliban has no appended system prompt" in got.stderr
    (call,) = [json.loads(line) for line in Path(env["FAKE_CALIBAN_LOG"]).read_text().splitlines()]
    argv = call["argv"]
    assert call["stdin"] == "Be terse.\n\nhi"
    for run_ in (["--model", "claude-sonnet-4-5"], ["--max-turns", "3"], ["--allow", "Bash(ls*)"]):
        assert any(argv[i : i + 2] == run_ for i in range(len(argv))), (run_, argv)
    scratch = Path(argv[argv.index("--sessions-dir") + 1])
    assert scratch != Path(env["CALIBAN_SESSIONS_DIR"]) and not scratch.exists()  # nothing kept
    assert not Path(env["CALIBAN_SESSIONS_DIR"]).exists()


def test_a_session_is_kept_and_resumed(env: dict[str, str]) -> None:
    first = bash(f"{SHIM} -p hi --output-format json </dev/null", script(env, "hi.jsonl"))
    session = json.loads(first.stdout)["session_id"]
    assert (Path(env["CALIBAN_SESSIONS_DIR"]) / f"{session}.json").exists()
    again = bash(f"{SHIM} -p more --resume {session} --output-format json </dev/null", script(env, "hi.jsonl"))
    assert json.loads(again.stdout)["session_id"] == session and again.returncode == 0


def test_arguments_after_the_prompt_are_said_to_be_ignored(env: dict[str, str]) -> None:
    got = bash(f"{SHIM} -p hi there </dev/null", script(env, "hi.jsonl"))
    assert got.stdout == "Hello! How can I help?\n"
    assert got.stderr == "caliban-claude: warning: arguments after the prompt ignored: 'there'\n"


def test_a_prompt_over_calibans_limit_is_refused_unread(env: dict[str, str]) -> None:
    got = bash(f"head -c 11000000 /dev/zero | tr '\\0' x | {SHIM} -p; echo \" ${{PIPESTATUS[2]}}\"", script(env, "hi.jsonl"))
    assert got.stdout == " 1\n" and got.stderr == "Error: the prompt on stdin is over 10 MiB, more than caliban takes\n"
    assert not Path(env["FAKE_CALIBAN_LOG"]).exists()


def test_a_caliban_that_cannot_be_run_is_said_in_one_line(env: dict[str, str], tmp_path: Path) -> None:
    """A wrong CALIBAN_BIN (issue 33): Claude Code's `Execution error` and 1, as ever, and one
    line on stderr saying what was run and why it could not be, with --verbose too."""
    not_executable = tmp_path / "caliban.sh"
    not_executable.write_text("#!/bin/sh\n")
    no_format = tmp_path / "caliban.bin"
    no_format.write_bytes(b"\x7fELF?")
    no_format.chmod(0o755)
    cases = {
        str(tmp_path / "nowhere" / "caliban"): "No such file or directory",
        str(not_executable): "Permission denied (not executable)",
        str(tmp_path): "Is a directory",
        "no-such-caliban": "not found on PATH",
    }
    for binary, why in cases.items():
        for verbose in ([], ["--verbose", "--output-format", "stream-json"]):
            proc = subprocess.run([SHIM, "-p", "hi", *verbose], env={**env, "CALIBAN_BIN": binary},
                                  capture_output=True, timeout=60)
            assert proc.returncode == 1
            assert proc.stderr.decode() == (f"caliban-claude: cannot run CALIBAN_BIN={binary}: {why}; "
                                            "every message will get an error result\n")
            if not verbose:
                assert proc.stdout == b"Execution error"
    # one that starts to run and cannot (no format the system knows): said when it is run
    proc = subprocess.run([SHIM, "-p", "hi"], env={**env, "CALIBAN_BIN": str(no_format)}, capture_output=True, timeout=60)
    assert (proc.returncode, proc.stdout) == (1, b"Execution error")
    assert proc.stderr.decode() == f"caliban-claude: cannot run {no_format}: Exec format error\n"
    unset = {k: v for k, v in env.items() if k != "CALIBAN_BIN"} | {"PATH": "/nonexistent"}
    proc = subprocess.run([SHIM, "-p", "hi"], env=unset, capture_output=True, timeout=60)
    assert proc.stderr.decode() == ("caliban-claude: cannot run caliban (CALIBAN_BIN is not set): not found on PATH; "
                                    "every message will get an error result\n")
