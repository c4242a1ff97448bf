"""The installed command as a real process in each of its modes (a pipe, --follow, --listen,
--metrics), and waiting on processes: shared by the end-to-end tests, which import it rather
than each other (pytest does not collect this module: it holds no tests)."""

from __future__ import annotations

import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
from support_fixtures import FIXTURES, SUPPORT

TRANSLATOR = shutil.which("translator", path=str(Path(sys.executable).parent)) or "translator"
FAKE_CALIBAN = SUPPORT / "fake_caliban.py"


def fake_caliban(root: Path, *, exec_: bool = True) -> Path:
    """`root/caliban`, what CALIBAN_BIN names in the shim's tests: the fake caliban behind a
    shell wrapper, as an install puts one; `exec_=False`, a wrapper that runs it as its child
    and waits (the signals reach the shell, not caliban)."""
    run = f'exec "{sys.executable}" "{FAKE_CALIBAN}" "$@"' if exec_ else f'"{sys.executable}" "{FAKE_CALIBAN}" "$@"\nexit $?'
    wrapper = root / "caliban"
    wrapper.write_text(f"#!/bin/sh\n{run}\n")
    wrapper.chmod(0o755)
    return wrapper


class Frames:
    """A process's stdout read as NDJSON frames, as far as a test waits for; what came after
    the frame waited for is kept for the next wait (`rest`)."""

    def __init__(self, fd: int) -> None:
        self.fd, self.rest = fd, b""

    def until(self, done: Callable[[dict[str, Any]], bool], timeout: float) -> list[dict[str, Any]]:
        """Frames up to and including the first for which `done(frame)`."""
        got: list[dict[str, Any]] = []
        deadline = time.monotonic() + timeout
        while True:
            while b"\n" in self.rest:
                line, self.rest = self.rest.split(b"\n", 1)
                got.append(orjson.loads(line))
                if done(got[-1]):
                    return got
            left = deadline - time.monotonic()
            assert left > 0, f"not within {timeout} s; got {[f['type'] for f in got]}"
            if select.select([self.fd], [], [], left)[0]:
                chunk = os.read(self.fd, 1 << 16)
                assert chunk, f"stdout ended first; got {[f['type'] for f in got]}"
                self.rest += chunk


def run(*args: str, stdin: bytes | None = None, timeout: float = 30) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [TRANSLATOR, *args], input=stdin, capture_output=True, timeout=timeout,
        stdin=None if stdin is not None else subprocess.DEVNULL,
    )


def fixture(name: str) -> str:
    return str(FIXTURES / f"{name}.events.jsonl")


class Live:
    """The command in a live pipe: we write its stdin and read its stdout as it goes."""

    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen(
            [TRANSLATOR, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        self.buf = b""

    def send(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def read_frames(self, count: int, timeout: float = 10.0) -> list[dict]:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        while self.buf.count(b"\n") < count:
            left = deadline - time.monotonic()
            assert left > 0, f"timed out waiting for {count} frames, have {self.buf!r}"
            if select.select([fd], [], [], left)[0]:
                chunk = os.read(fd, 65536)
                assert chunk, f"output ended early: {self.buf!r}"
                self.buf += chunk
        *lines, self.buf = self.buf.split(b"\n", count)
        return [orjson.loads(ln) for ln in lines] if count else []

    def finish(self, timeout: float = 10.0) -> tuple[int, bytes, bytes]:
        """Wait for the exit with stdin still open (closing it would end the input)."""
        assert self.proc.stdout is not None and self.proc.stderr is not None
        status = self.proc.wait(timeout=timeout)
        out, err = self.proc.stdout.read(), self.proc.stderr.read()
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        return status, self.buf + out, err


class Follower(Live):
    def __init__(self, path: Path, *args: str, prefix: tuple[str, ...] = ()) -> None:
        self.proc = subprocess.Popen(
            [*prefix, TRANSLATOR, "--follow", str(path), *args],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )
        self.buf = b""

    def stop(self) -> tuple[int, bytes, bytes]:
        self.proc.send_signal(signal.SIGTERM)
        status = self.proc.wait(timeout=10)
        assert self.proc.stdout is not None and self.proc.stderr is not None
        return status, self.buf + self.proc.stdout.read(), self.proc.stderr.read()


def append(path: Path, data: bytes) -> None:
    with open(path, "ab") as f:
        f.write(data)


class Server:
    def __init__(self, address: str, *args: str) -> None:
        self.address = address
        self.proc = subprocess.Popen(
            [TRANSLATOR, "--listen", address, "--session-id", "SESSION", *args],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + 10
        while True:
            try:
                self.connect().close()
                return
            except OSError:
                assert time.monotonic() < deadline, "the service did not come up"
                time.sleep(0.05)

    def connect(self) -> socket.socket:
        kind, _, where = self.address.partition(":")
        if kind == "unix":
            sock = socket.socket(socket.AF_UNIX)
            sock.connect(where)
        else:
            sock = socket.create_connection(("127.0.0.1", int(where.rpartition(":")[2])))
        sock.settimeout(20)
        return sock

    def stop(self, signum: int = signal.SIGTERM) -> tuple[int, bytes]:
        self.proc.send_signal(signum)
        status = self.proc.wait(timeout=20)
        assert self.proc.stderr is not None
        return status, self.proc.stderr.read()


def exchange(sock: socket.socket, data: bytes) -> bytes:
    """Send a whole stream, close our side, read the translation to the end."""
    sock.sendall(data)
    sock.shutdown(socket.SHUT_WR)
    return read_all(sock)


def sessions_over(address: Path, data: bytes, connections: int = 2) -> list[str]:
    """`connections` streams of `data`, one after another, to a `--listen unix:ADDRESS` server
    that is starting: the session id of each one's last frame (its result)."""
    poll(address.exists)
    sessions = []
    for _ in range(connections):
        with socket.socket(socket.AF_UNIX) as sock:
            poll(lambda s=sock: s.connect_ex(str(address)) == 0)
            sock.settimeout(20)
            sessions.append(orjson.loads(exchange(sock, data).splitlines()[-1])["session_id"])
    return sessions


def read_all(sock: socket.socket) -> bytes:
    out = b""
    while chunk := sock.recv(65536):
        out += chunk
    sock.close()
    return out


def port_of(proc: subprocess.Popen[bytes]) -> int:
    """The port the command says it serves metrics on (its first stderr line)."""
    assert proc.stderr is not None
    line = proc.stderr.readline().decode()
    assert line.startswith("translator: metrics on http://127.0.0.1:"), line
    return int(line.split("127.0.0.1:")[1].split("/")[0])


def health(port: int) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def poll(condition: Callable[[], Any], timeout: float = 20.0) -> Any:
    """Wait for `condition()` to be truthy (the command works at its own pace on a busy machine)."""
    deadline = time.monotonic() + timeout
    while not (result := condition()):
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)
    return result


def catches(pid: int, signum: int) -> bool:
    """Whether the process has a handler for the signal (Linux: /proc/PID/status, SigCgt)."""
    with open(f"/proc/{pid}/status") as f:
        caught = next(line for line in f if line.startswith("SigCgt:")).split()[1]
    return bool(int(caught, 16) >> (signum - 1) & 1)


def children(pid: int) -> set[int]:
    found = set()
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                found.add(int(entry.name))
        except (OSError, IndexError, ValueError):
            continue
    return found


def running(pid: int) -> bool:
    """Alive and not a zombie waiting to be reaped."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def peak_rss_kb(pid: int) -> int:
    for row in Path(f"/proc/{pid}/status").read_text().splitlines():
        if row.startswith("VmHWM:"):
            return int(row.split()[1])
    raise AssertionError("no VmHWM")
