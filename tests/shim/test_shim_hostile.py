"""`caliban-claude` in a hostile world (issue 23): a caliban behind a shell wrapper without
`exec`, one whose tool left a child behind, one that ignores SIGINT (and SIGTERM), floods of
stdout and stderr, over-long and malformed stdin lines. The installed shim as a real process,
driven over its pipes with the raw protocol, the fake caliban (tests/support/fake_caliban.py) behind
it; after each, no process of caliban's is left running."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from support_fixtures import FIXTURES
from support_processes import Frames, fake_caliban, peak_rss_kb, running

SHIM = str(Path(sys.executable).with_name("caliban-claude"))
ARGV = [SHIM, "--output-format", "stream-json", "--verbose", "--input-format", "stream-json"]
PAUSED = {"file": str(FIXTURES / "caliban" / "tool_use_two_turns.jsonl"), "pause_after": 2}
BENIGN = {"file": str(FIXTURES / "caliban" / "benign_text.jsonl")}


def user(text: str) -> bytes:
    return json.dumps({"type": "user", "message": {"role": "user", "content": text}}).encode() + b"\n"


def control(rid: str, **request: Any) -> bytes:
    return json.dumps({"type": "control_request", "request_id": rid, "request": request}).encode() + b"\n"


def caliban(root: Path, *scripts: dict[str, Any], exec_: bool = True) -> dict[str, str]:
    """The shim's environment for a fake caliban in `root`, run through a wrapper (`exec` or not)."""
    wrapper = fake_caliban(root, exec_=exec_)
    return {
        "CALIBAN_BIN": str(wrapper), "CALIBAN_SESSIONS_DIR": str(root / "sessions"),
        "FAKE_CALIBAN_LOG": str(root / "calls.jsonl"), "FAKE_CALIBAN_SCRIPTS": json.dumps(scripts),
    }  # fmt: skip


def calls(root: Path) -> list[dict[str, Any]]:
    log = root / "calls.jsonl"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def left_running(root: Path) -> list[int]:
    """Live processes of every caliban group started for `root`, and the children caliban left
    behind (their pids in the `orphan` marker files)."""
    groups = {call["pgid"] for call in calls(root)}
    pids = [int(p.read_text()) for p in root.glob("orphan*") if p.read_text()]
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) in groups and fields[0] != "Z":
            pids.append(int(stat.parent.name))
    return sorted({pid for pid in pids if running(pid)})


def gone(root: Path, timeout: float = 5.0) -> list[int]:
    """What is still running once `timeout` has passed (or at once, when nothing is)."""
    deadline = time.monotonic() + timeout
    while (left := left_running(root)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


class Shim:
    """The shim over pipes, with a fake caliban run through `wrapper` (`exec` or not)."""

    def __init__(self, root: Path, *scripts: dict[str, Any], exec_: bool = True) -> None:
        self.root = root
        env = {**os.environ, **caliban(root, *scripts, exec_=exec_)}
        self.proc = subprocess.Popen(ARGV, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        assert self.proc.stdout is not None
        self.stdout = Frames(self.proc.stdout.fileno())
        self.stderr: list[bytes] = []
        self._errors = threading.Thread(target=self._drain_stderr, daemon=True)
        self._errors.start()

    def _drain_stderr(self) -> None:
        assert self.proc.stderr is not None
        while chunk := self.proc.stderr.read1(1 << 16):
            self.stderr.append(chunk)

    def send(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()

    def frames(self, until: str, timeout: float = 15.0) -> list[dict[str, Any]]:
        """Frames up to and including the first of type `until`."""
        return self.stdout.until(lambda frame: frame["type"] == until, timeout)

    def wait(self, timeout: float = 15.0) -> int:
        try:
            return self.proc.wait(timeout=timeout)
        finally:
            self.proc.kill()
            self._errors.join(5)

    def said(self) -> str:
        return b"".join(self.stderr).decode("utf-8", "replace")

    def calls(self) -> list[dict[str, Any]]:
        return calls(self.root)

    def left_running(self) -> list[int]:
        return left_running(self.root)

    def gone(self, timeout: float = 5.0) -> list[int]:
        return gone(self.root, timeout)


@pytest.fixture
def reaped() -> Any:
    """Every process a failing test leaves behind in the fake's groups is killed."""
    shims: list[Shim] = []
    yield shims.append
    for shim in shims:
        shim.proc.kill()
        for pid in shim.left_running():
            os.kill(pid, signal.SIGKILL)


ENDINGS = ["interrupt", "SIGTERM", "SIGINT", "SIGHUP", "stdout-closed", "run-ends"]


@pytest.mark.parametrize("exec_", [True, False], ids=["exec", "wrapper-without-exec"])
@pytest.mark.parametrize("ending", ENDINGS)
def test_nothing_of_calibans_group_outlives_its_run(tmp_path: Path, reaped: Any, ending: str, exec_: bool) -> None:
    """caliban (behind a wrapper that does not `exec` it, or not) has left a child holding its
    stdout and stderr; however the run ends, caliban gets SIGINT (it saves its session and
    prints its cancelled result) and nothing of its process group is left running."""
    script = {**(BENIGN if ending == "run-ends" else PAUSED), "orphan": str(tmp_path / "orphan")}
    shim = Shim(tmp_path, script, exec_=exec_)
    reaped(shim)
    shim.send(user("hi"))
    assert shim.frames("system")[0]["subtype"] == "init"
    for _ in range(100):  # the child is started before caliban's first line
        if (tmp_path / "orphan").exists() and (tmp_path / "orphan").read_text():
            break
        time.sleep(0.05)
    started = time.monotonic()
    if ending == "interrupt":
        shim.send(control("r1", subtype="interrupt"))
    elif ending.startswith("SIG"):
        shim.proc.send_signal(getattr(signal, ending))
    elif ending == "stdout-closed":
        assert shim.proc.stdout is not None
        shim.proc.stdout.close()
    if ending in ("interrupt", "run-ends"):
        frames = shim.frames("result")
        shim.close()
        status = shim.wait()
        assert frames[-1]["subtype"] == ("success" if ending == "run-ends" else "error_during_execution")
        assert status == (0 if ending == "run-ends" else 1)
    else:
        status = shim.wait()
        assert status == (1 if ending == "stdout-closed" else 128 + getattr(signal, ending))
    assert time.monotonic() - started < 5  # inside the SDK's 5 s between its SIGTERM and SIGKILL
    assert shim.gone() == []
    if ending != "run-ends":  # caliban itself was interrupted, not killed: it saved its session
        saved = json.loads(next((tmp_path / "sessions").glob("*.json")).read_text())
        assert saved["messages"] == ["hi"]


@pytest.mark.parametrize("ignores", [("sigint",), ("sigint", "sigterm")], ids=["ignores-sigint", "and-sigterm"])
def test_an_interrupt_of_a_caliban_that_ignores_it_still_ends_the_run(
    tmp_path: Path, reaped: Any, ignores: tuple[str, ...]
) -> None:
    """The app's interrupt: a caliban that does not cancel within the grace (3 s) gets SIGTERM,
    then SIGKILL (one that ignores both too); the app gets its cancelled result, and the shim
    stays usable."""
    script = {**PAUSED, "orphan": str(tmp_path / "orphan"), **{f"ignore_{name}": True for name in ignores}}
    shim = Shim(tmp_path, script, BENIGN)
    reaped(shim)
    shim.send(user("hi"))
    shim.frames("system")
    started = time.monotonic()
    shim.send(control("r1", subtype="interrupt"))
    frames = shim.frames("result", timeout=10)
    waited = time.monotonic() - started
    assert frames[0]["response"] == {"subtype": "success", "request_id": "r1", "response": {"still_queued": []}}
    assert frames[-2]["message"]["content"] == [{"type": "text", "text": "[Request interrupted by user]"}]
    result = frames[-1]
    assert (result["subtype"], result["is_error"]) == ("error_during_execution", True)
    assert result["errors"] == ["the run was cancelled"]
    assert waited < 6  # the 3 s grace, then 0.5 s; the margin is for a loaded machine
    assert shim.gone(0) == []
    shim.send(user("again"))
    assert shim.frames("result")[-1]["result"] == "ok"
    shim.close()
    assert shim.wait() == 0


def test_a_flood_of_stdout_without_a_newline_is_skipped_not_held(tmp_path: Path, reaped: Any) -> None:
    """200 MiB of caliban's stdout with no newline (its init line at the end of it): the line
    is skipped and said, never held (the shim's peak RSS stays near its idle size, where it
    held every byte twice over), and the run's result reaches the app."""
    shim = Shim(tmp_path, {**BENIGN, "flood_stdout": 200 << 20})
    reaped(shim)
    shim.send(user("hi"))
    frames = shim.frames("result", timeout=60)
    peak = peak_rss_kb(shim.proc.pid)
    shim.close()
    assert shim.wait() == 0
    assert peak < 120_000, f"peak RSS {peak} kB"
    assert (frames[-1]["subtype"], frames[-1]["result"]) == ("success", "ok")
    skipped = re.search(rf"caliban:1: line longer than {16 << 20} bytes \((\d+) bytes\)", shim.said())
    assert skipped and int(skipped.group(1)) > 200 << 20  # the flood, and caliban's init line after it


def test_a_flood_of_stderr_is_read_in_chunks_and_its_lines_bounded(tmp_path: Path, reaped: Any) -> None:
    """10 MB of caliban's stderr reaches the app line for line, read in chunks (a few hundred
    read calls, where an unbuffered readline() made one per byte), and one stderr line of
    1 MiB is passed on cut to 64 KiB, said."""
    shim = Shim(tmp_path, {**BENIGN, "flood_stderr": 10_000_000}, {**BENIGN, "long_stderr": 1 << 20})
    reaped(shim)
    shim.send(user("hi"))
    assert shim.frames("result", timeout=60)[-1]["result"] == "ok"
    reads = int(dict(row.split(": ") for row in Path(f"/proc/{shim.proc.pid}/io").read_text().splitlines())["syscr"])
    shim.send(user("again"))
    assert shim.frames("result")[-1]["result"] == "ok"
    shim.close()
    assert shim.wait() == 0
    said = shim.said().splitlines()
    assert said.count("e" * 99) == 100_000
    assert reads < 20_000, f"{reads} read calls"
    cut = [line for line in said if line.startswith("w")]
    assert cut == ["w" * (64 << 10) + f" [... cut by caliban-claude: the line was longer than {64 << 10} bytes]"]


def test_an_over_long_stdin_line_is_not_held_and_still_answered(tmp_path: Path, reaped: Any) -> None:
    """A 100 MiB user message (over the 64 MiB a stdin line may have) is not held: it gets an
    error result saying why, without a caliban run; an over-long control request its error
    answer; the next message runs as usual."""
    shim = Shim(tmp_path, BENIGN)
    reaped(shim)
    huge = user("y" * (100 << 20))
    shim.send(huge)
    shim.send(control("r1", subtype="mcp_status", pad="z" * (65 << 20)))
    frames = shim.frames("result", timeout=60)
    answer = shim.frames("control_response", timeout=60)[-1]["response"]
    peak = peak_rss_kb(shim.proc.pid)
    shim.send(user("hi"))
    last = shim.frames("result")[-1]
    shim.close()
    assert shim.wait() == 0
    result = frames[-1]
    why = f"line longer than {64 << 20} bytes ({len(huge) - 1} bytes)"
    assert (result["subtype"], result["is_error"]) == ("error_during_execution", True)
    assert result["errors"] == [f"caliban-claude: the message was not read: {why} (the most a line may have)"]
    assert (answer["subtype"], answer["request_id"]) == ("error", "r1")
    assert f"stdin:1: {why}, ignored" in shim.said()
    assert last["result"] == "ok" and [call["stdin"] for call in shim.calls()] == ["hi"]
    assert peak < 120_000, f"peak RSS {peak} kB"


def test_every_malformed_control_request_is_answered(tmp_path: Path, reaped: Any) -> None:
    """A `set_permission_mode` with `"mode": []` raised TypeError in the stdin thread, which
    died: no answer, and none for any later request. Each is answered with an error now."""
    shim = Shim(tmp_path, BENIGN)
    reaped(shim)
    bad = [
        control("m1", subtype="set_permission_mode", mode=[]),
        control("m2", subtype="set_permission_mode", mode={"a": 1}),
        control("m3", subtype="set_model", model=["sonnet"]),
        control("m4", subtype="set_permission_mode"),
        json.dumps({"type": "control_request", "request_id": 7, "request": {"subtype": "nope"}}).encode() + b"\n",
        json.dumps({"type": "user", "message": "not an object"}).encode() + b"\n",
        control("ok", subtype="set_permission_mode", mode="plan"),
    ]
    shim.send(b"".join(bad))
    answers = {}
    while "ok" not in answers:
        frame = shim.frames("control_response", timeout=10)[-1]["response"]
        answers[frame["request_id"]] = frame
    shim.close()
    shim.wait()
    assert {rid: a["subtype"] for rid, a in answers.items()} == {
        "m1": "error", "m2": "error", "m3": "error", "m4": "error", "7": "error", "ok": "success",
    }  # fmt: skip
    assert answers["m1"]["error"] == "caliban shim: unknown permission mode []"
    assert answers["m3"]["error"] == "caliban shim: model ['sonnet'] is not a name"
    assert "Traceback" not in shim.said()


def test_a_prompt_with_an_unpaired_surrogate_is_delivered(tmp_path: Path, reaped: Any) -> None:
    """orjson refuses `"\\ud800"`; the line was dropped as not JSON and the app waited for a
    result forever. The escape is replaced by U+FFFD, said, and the prompt runs."""
    shim = Shim(tmp_path, BENIGN)
    reaped(shim)
    shim.send(b'{"type":"user","message":{"role":"user","content":"hi \\ud800 there \\ud83d\\ude00"}}\n')
    assert shim.frames("result", timeout=10)[-1]["result"] == "ok"
    shim.close()
    assert shim.wait() == 0
    assert [call["stdin"] for call in shim.calls()] == ["hi \ufffd there \U0001f600"]
    assert "stdin:1: unpaired surrogate escape(s) replaced by U+FFFD" in shim.said()


async def test_the_sdks_close_leaves_nothing_of_caliban_behind(tmp_path: Path) -> None:
    """The real Agent SDK closes mid-run (stdin's end, 5 s, SIGTERM) a shim whose caliban runs
    behind a wrapper without `exec` and has left a child holding its pipes: nothing is left."""
    from claude_agent_sdk import ClaudeAgentOptions, ClaudeSDKClient, SystemMessage

    env = caliban(tmp_path, {**PAUSED, "orphan": str(tmp_path / "orphan")}, exec_=False)
    client = ClaudeSDKClient(ClaudeAgentOptions(cli_path=SHIM, env=env))
    await client.connect()
    try:
        await client.query("hi")
        async for message in client.receive_messages():
            if isinstance(message, SystemMessage) and message.subtype == "init":
                break
        assert len(left_running(tmp_path)) == 3  # caliban, its wrapper and its child are running
    finally:
        await client.disconnect()
    try:
        assert gone(tmp_path) == []
    finally:
        for pid in left_running(tmp_path):
            os.kill(pid, signal.SIGKILL)
