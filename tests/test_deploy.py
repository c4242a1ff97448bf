"""The container's commands, run directly (no Docker engine here): the compose files' own
command lines, with the volume path and port mapped onto this machine."""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path

from conftest import ROOT, events, frames_of
from test_follow import Follower
from test_service import Server, exchange


def compose_command(name: str) -> list[str]:
    text = (ROOT / "deploy" / f"compose.{name}.yaml").read_text()
    (command,) = re.findall(r"^\s+command: (\[.*\])$", text, re.M)
    return json.loads(command)


def test_the_dockerfile_runs_the_translator_as_a_non_root_user() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert 'ENTRYPOINT ["translator"]' in dockerfile
    assert re.search(r"^USER translator$", dockerfile, re.M)
    assert "FROM python:3.11-slim" in dockerfile


def test_sidecar_command(tmp_path: Path) -> None:
    args = compose_command("sidecar")
    assert args[:2] == ["--follow", "/logs/stdout.ndjson"]
    log = tmp_path / "stdout.ndjson"
    follower = Follower(log, *args[2:])
    log.write_bytes(events("tool_use_two_turns"))
    frames = follower.read_frames(6)
    assert frames[0]["type"] == "system" and frames[-1]["result"] == "There are 3 files."
    assert follower.stop()[0] == 143


def test_service_command() -> None:
    args = compose_command("service")
    assert args[:2] == ["--listen", "tcp:0.0.0.0:7600"]
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = Server(f"tcp:127.0.0.1:{port}", *args[2:])
    assert frames_of(exchange(server.connect(), events("thinking")))[-1]["result"] == "17 * 23 = 391."
    assert server.stop()[0] == 143
