"""The container's commands, run directly (no Docker engine here): the compose files' own
command lines, with the volume path and port mapped onto this machine."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
from pathlib import Path

from support_fixtures import ROOT, events, frames_of
from support_processes import Follower, Server, exchange, health, poll, port_of

IN_CONTAINER = ["--metrics", "tcp:0.0.0.0:9464"]


def compose_command(name: str) -> list[str]:
    text = (ROOT / "deploy" / f"compose.{name}.yaml").read_text()
    (command,) = re.findall(r"^\s+command: (\[.*\])$", text, re.M)
    return json.loads(command)


def here(args: list[str]) -> list[str]:
    """The container's metrics address as one on this machine's loopback (a free port)."""
    return [arg.replace("tcp:0.0.0.0:9464", "tcp:127.0.0.1:0") for arg in args]


def healthcheck(port: int) -> int:
    """The Dockerfile's HEALTHCHECK command, run here against `port`: its exit status."""
    dockerfile = (ROOT / "Dockerfile").read_text()
    (command,) = re.findall(r"^\s+CMD (\[.*\])$", dockerfile, re.M)
    argv = json.loads(command)
    assert argv[0] == "python" and ":9464/healthz" in argv[-1]
    argv = [sys.executable, *argv[1:-1], argv[-1].replace(":9464/", f":{port}/")]
    return subprocess.run(argv, capture_output=True, timeout=30).returncode


def test_the_dockerfile_runs_the_translator_as_a_non_root_user() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert 'ENTRYPOINT ["translator"]' in dockerfile
    assert re.search(r"^USER translator$", dockerfile, re.M)
    assert "FROM python:3.11-slim" in dockerfile
    assert re.search(r"^HEALTHCHECK .*\\\n\s+CMD \[", dockerfile, re.M)
    for name in ("sidecar", "service"):  # both serve metrics and health, published on the host's loopback
        assert compose_command(name)[-2:] == IN_CONTAINER
        assert '- "127.0.0.1:9464:9464"' in (ROOT / "deploy" / f"compose.{name}.yaml").read_text()


def test_sidecar_command(tmp_path: Path) -> None:
    args = compose_command("sidecar")
    assert args[:2] == ["--follow", "/logs/stdout.ndjson"]
    volume = tmp_path / "logs"
    volume.mkdir()
    log = volume / "stdout.ndjson"
    follower = Follower(log, *here(args[2:]))
    port = port_of(follower.proc)
    log.write_bytes(events("tool_use_two_turns"))
    frames = follower.read_frames(6)
    assert frames[0]["type"] == "system" and frames[-1]["result"] == "There are 3 files."
    assert healthcheck(port) == 0
    volume.rename(tmp_path / "unmounted")
    poll(lambda: health(port)[0] == 503)
    assert healthcheck(port) == 1
    assert follower.stop()[0] == 143


def test_service_command() -> None:
    args = compose_command("service")
    assert args[:2] == ["--listen", "tcp:0.0.0.0:7600"]
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = Server(f"tcp:127.0.0.1:{port}", *here(args[2:]))
    assert frames_of(exchange(server.connect(), events("thinking")))[-1]["result"] == "17 * 23 = 391."
    assert healthcheck(port_of(server.proc)) == 0
    assert server.stop()[0] == 143
