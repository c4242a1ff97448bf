"""The container's commands, run directly (no Docker engine here): the compose files' own
command lines, with the volume path and port mapped onto this machine."""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import sys
import zipfile
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


def test_the_image_s_build_steps_make_a_whole_package(tmp_path: Path) -> None:
    """The Dockerfile's COPY steps, done here from a clone's files (what .dockerignore leaves),
    then its `pip install .` as a wheel: the build finds every file it is told of (the license
    among them: a missing one is a warning now, an error under a later setuptools) and the
    package ships it."""
    dockerfile = (ROOT / "Dockerfile").read_text()
    src = tmp_path / "src"
    src.mkdir()
    copies = re.findall(r"^COPY (.+) (\S+)$", dockerfile, re.M)
    assert copies
    for sources, dest in copies:
        for name in sources.split():
            target = src / dest / name if dest.endswith("/") else src / dest
            if (ROOT / name).is_dir():
                shutil.copytree(ROOT / name, target, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(ROOT / name, target)
    assert re.search(r"^RUN pip install --no-cache-dir \. ", dockerfile, re.M)
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", str(tmp_path / "wheel"), "."],
                           cwd=src, capture_output=True, timeout=600)
    said = (built.stdout + built.stderr).decode()
    assert built.returncode == 0, said
    assert "did not match any files" not in said
    (wheel,) = (tmp_path / "wheel").glob("*.whl")
    with zipfile.ZipFile(wheel) as zf:
        licenses = [n for n in zf.namelist() if n.endswith("/LICENSE")]
        assert licenses and zf.read(licenses[0]) == (ROOT / "LICENSE").read_bytes()


def test_the_compose_files_restart_say_the_volume_s_user_and_match_the_docs() -> None:
    """Each compose service restarts; the sidecar says whose the log must be readable by (the
    image's user); operations.md's snippets build from where the files are and say the same."""
    uid = re.search(r"useradd .*--uid (\d+) translator", (ROOT / "Dockerfile").read_text())
    assert uid is not None
    ops = (ROOT / "docs" / "operations.md").read_text()
    snippets = re.findall(r"```yaml\n(.*?)```", ops, re.S)
    assert len(snippets) == 2
    for name, snippet in zip(("sidecar", "service"), snippets, strict=True):
        text = (ROOT / "deploy" / f"compose.{name}.yaml").read_text()
        services = re.findall(r"^  (\w+):$", text, re.M)
        assert text.count("    restart: unless-stopped\n") == len(services) == snippet.count("restart: unless-stopped")
        assert re.findall(r"build: (\S+)", snippet) == re.findall(r"build: (\S+)", text) == [".."]
        assert compose_command(name) == json.loads(re.search(r"command: (\[.*\])", snippet).group(1))  # type: ignore[union-attr]
    sidecar = (ROOT / "deploy" / "compose.sidecar.yaml").read_text()
    assert f"uid {uid.group(1)}" in sidecar and f"uid {uid.group(1)}" in ops and "umask" in sidecar


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
