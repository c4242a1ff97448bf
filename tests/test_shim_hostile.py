"""`caliban-claude` in a hostile world (issue 23): a caliban behind a shell wrapper without
`exec`, one whose tool left a child behind, one that ignores SIGINT (and SIGTERM), floods of
stdout and stderr, over-long and malformed stdin lines. The installed shim as a real process,
driven over its pipes with the raw protocol, the fake caliban (tests/fake_caliban.py) behind
it; after each, no process of caliban's is left running."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import FIXTURES
from support_processes import running

SHIM = str(Path(sys.executable).with_name("caliban-claude"))
FAKE = Path(__file__).with_name("fake_caliban.py")
ARGV = [SHIM, "--output-format", "stream-json", "--verbose", "--input-format", "stream-json"]
PAUSED = {"file": str(FIXTURES / "caliban" / "tool_use_two_turns.jsonl"), "pause_after": 2}
BENIGN = {"file": str(FIXTURES / "caliban" / "benign_text.jsonl")}


def user(text: str) -> bytes:
    return json.dumps({"type": "user", "message": {"role": "user", "content": text}}).encode() + b"\n"


def control(rid: str, **request: Any) -> bytes:
    return json.dumps({"type": "control_request", "request_id": rid, "request": request}).encode() + b"\n"


class Shim:
    """The shim over pipes, with a fake caliban run through `wrapper` (`exec` or not)."""

    def __init__(self, root: Path, *scripts: dict[str, Any], exec_: bool = True) -> None:
        self.root = root
        wrapper = root / "caliban"
        run = f'exec "{sys.executable}" "{FAKE}" "$@"' if exec_ else f'"{sys.executable}" "{FAKE}" "$@"\nexit $?'
        wrapper.write_text(f"#!/bin/sh\n{run}\n")
        wrapper.chmod(0o755)
        env = {
            **os.environ, "CALIBAN_BIN": str(wrapper), "CALIBAN_SESSIONS_DIR": str(root / "sessions"),
            "FAKE_CALIBAN_LOG": str(root / "calls.jsonl"), "FAKE_CALIBAN_SCRIPTS": json.dumps(scripts),
        }  # fmt: skip
        self.proc = subprocess.Popen(ARGV, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        self.buf = b""
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
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        got: list[dict[str, Any]] = []
        deadline = time.monotonic() + timeout
        while True:
            while b"\n" in self.buf:
                line, self.buf = self.buf.split(b"\n", 1)
                got.append(json.loads(line))
                if got[-1]["type"] == until:
                    return got
            left = deadline - time.monotonic()
            assert left > 0, f"no {until} frame within {timeout} s; got {[f['type'] for f in got]}"
            if select.select([fd], [], [], left)[0]:
                chunk = os.read(fd, 1 << 16)
                assert chunk, f"stdout ended before a {until} frame; got {[f['type'] for f in got]}"
                self.buf += chunk

    def wait(self, timeout: float = 15.0) -> int:
        try:
            return self.proc.wait(timeout=timeout)
        finally:
            self.proc.kill()
            self._errors.join(5)

    def said(self) -> str:
        return b"".join(self.stderr).decode("utf-8", "replace")

    def calls(self) -> list[dict[str, Any]]:
        log = self.root / "calls.jsonl"
        return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []

    def left_running(self) -> list[int]:
        """Live processes of every caliban group the shim started, and the children caliban
        left behind (their pids in the `orphan` marker files)."""
        groups = {call["pgid"] for call in self.calls()}
        pids = [int(p.read_text()) for p in self.root.glob("orphan*") if p.read_text()]
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) in groups and fields[0] != "Z":
                pids.append(int(stat.parent.name))
        return sorted({pid for pid in pids if running(pid)})

    def gone(self, timeout: float = 5.0) -> list[int]:
        """What is still running once `timeout` has passed (or at once, when nothing is)."""
        deadline = time.monotonic() + timeout
        while (left := self.left_running()) and time.monotonic() < deadline:
            time.sleep(0.05)
        return left


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
