"""Collectors that are dead, slow, huge or refusing (set-t5's otel-dead, and the issue's huge
answers), as real processes: stdout and the exit status those of telemetry off, one stderr line
at most, the exit within its bound, and a follower's memory bounded while a collector answers
every export with a gigabyte (over HTTP and over gRPC). A replay, a `--follow` stopped by
SIGTERM and caliban-claude `-p` each meet a collector that never answers and a closed port; a
replay meets one that trickles its answer a byte every 100 ms."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from concurrent import futures
from contextlib import contextmanager
from pathlib import Path

import grpc
import orjson
import pytest
from support_otlp import PROMPT, SHIM, caliban_env, closed_port, receiver, telemetry_env
from support_otlp_grpc import METHODS, grpc_receiver
from support_processes import TRANSLATOR, Follower, append, fixture, peak_rss_kb

FIXTURE = fixture("tool_use_two_turns")
SID = "4f1c2d9e-0000-4000-8000-000000000006"
GIGABYTE = 1 << 30


def masked(stdout: bytes) -> list[dict[str, object]]:
    return [{k: v for k, v in orjson.loads(line).items() if k not in ("uuid", "timestamp")}
            for line in stdout.splitlines()]


def translate(env: dict[str, str]) -> tuple[subprocess.CompletedProcess[bytes], float]:
    began = time.monotonic()
    done = subprocess.run([TRANSLATOR, "--session-id", SID, FIXTURE], env=env, capture_output=True, timeout=60,
                          stdin=subprocess.DEVNULL)
    return done, time.monotonic() - began


@contextmanager
def tcp(serve: Callable[[socket.socket], None]) -> Iterator[str]:
    """A loopback "collector" running `serve` on each connection."""
    listener = socket.create_server(("127.0.0.1", 0))

    def accept() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        listener.close()


def blackhole(conn: socket.socket) -> None:
    """Accepts and reads, never answers (tcp_blackhole.py)."""
    with conn:
        while conn.recv(65536):
            pass


def request_head(conn: socket.socket) -> bytes | None:
    """A request read to the end of its headers (with what came after them), or None if the
    client closed first."""
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        head += chunk
    return head


def huge(conn: socket.socket) -> None:
    """Answers every POST 200 with a gigabyte body."""
    with conn:
        try:
            while True:
                if (head := request_head(conn)) is None:
                    return
                headers, _, body = head.partition(b"\r\n\r\n")
                length = next((int(line.split(b":")[1]) for line in headers.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                while len(body) < length:
                    body += conn.recv(65536)
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf\r\nContent-Length: "
                             + str(GIGABYTE).encode() + b"\r\n\r\n")
                zeros = bytes(1 << 20)
                for _ in range(GIGABYTE >> 20):
                    conn.sendall(zeros)
        except OSError:
            return


@pytest.fixture(scope="module")
def plain() -> list[dict[str, object]]:
    done, _ = translate({k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "CLAUDE_CODE_"))})
    return masked(done.stdout)


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_a_collector_that_never_answers_costs_the_exit_bound_at_most(protocol: str,
                                                                     plain: list[dict[str, object]]) -> None:
    with tcp(blackhole) as endpoint:
        done, took = translate(telemetry_env(endpoint, protocol))
    assert done.returncode == 0 and masked(done.stdout) == plain
    assert took < 4 + 2.5, took  # the 4 s exit bound, and the translation itself
    said = done.stderr.decode().splitlines()
    assert len(said) == 1 and said[0].startswith("translator: telemetry: not exported: "), said


def test_a_refused_grpc_collector_is_one_line(plain: list[dict[str, object]]) -> None:
    done, took = translate(telemetry_env(f"http://127.0.0.1:{closed_port()}", "grpc"))
    assert done.returncode == 0 and masked(done.stdout) == plain
    said = done.stderr.decode().splitlines()
    assert len(said) == 1 and said[0].startswith("translator: telemetry: not exported: "), said
    assert took < 4 + 2.5, took


@contextmanager
def huge_grpc() -> Iterator[str]:
    """A gRPC "collector" answering every Export with a 64 MiB message."""
    big = b"\x0a" + b"\x80\x80\x80\x20" + bytes(64 << 20)  # field 1, length 64 MiB

    class Handler(grpc.GenericRpcHandler):
        def service(self, handler_call_details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler | None:
            if handler_call_details.method not in METHODS:  # type: ignore[attr-defined]
                return None
            return grpc.unary_unary_rpc_method_handler(lambda request, context: big)

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4), handlers=[Handler()],
                         options=[("grpc.max_send_message_length", 128 << 20)])
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop(grace=None)


def follower_peak(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, endpoint: str, protocol: str) -> tuple[int, bytes]:
    """A follower exporting every 200 ms for ~6 s of runs: its peak RSS (KiB) and stderr."""
    for key, value in telemetry_env(endpoint, protocol, OTEL_METRIC_EXPORT_INTERVAL="200",
                                    OTEL_LOGS_EXPORT_INTERVAL="200", OTEL_TRACES_EXPORT_INTERVAL="200").items():
        monkeypatch.setenv(key, value)
    log = tmp_path / f"agent-{protocol.replace('/', '-')}-{len(list(tmp_path.iterdir()))}.ndjson"
    log.touch()
    follower = Follower(log)
    try:
        for _ in range(20):
            append(log, Path(FIXTURE).read_bytes())
            while follower.read_frames(1, timeout=30)[0]["type"] != "result":
                pass
            time.sleep(0.3)
        peak = peak_rss_kb(follower.proc.pid)
    finally:
        _, _, err = follower.stop()
    return peak, err


@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_a_collector_answering_gigabytes_does_not_grow_a_follower(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   protocol: str) -> None:
    """Each answer is read to 64 KiB: the follower's memory stays within 64 MiB of one whose
    collector answers as a collector does (it grew to gigabytes reading the whole bodies)."""
    with (grpc_receiver() if protocol == "grpc" else receiver()) as (_, endpoint):
        calm, _ = follower_peak(tmp_path, monkeypatch, endpoint, protocol)
    with (tcp(huge) if protocol != "grpc" else huge_grpc()) as endpoint:
        peak, err = follower_peak(tmp_path, monkeypatch, endpoint, protocol)
    assert peak < calm + 64 * 1024, (peak, calm)
    assert len(err.splitlines()) <= 1, err


BOUND = 4.0  # deferred.CLOSE_S: the most the exit waits for the export


def quiet() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "CLAUDE_CODE_"))}


@contextmanager
def dead(kind: str) -> Iterator[str]:
    """A collector that accepts and never answers, or a port nothing listens on."""
    if kind == "blackhole":
        with tcp(blackhole) as endpoint:
            yield endpoint
    else:
        yield f"http://127.0.0.1:{closed_port()}"


def follow(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> tuple[int, bytes, bytes, float]:
    """A follower of the fixture, SIGTERM once its run's result is out: status, stdout, stderr,
    and the seconds from the signal to the exit."""
    for key in [k for k in os.environ if k.startswith(("OTEL_", "CLAUDE_CODE_"))]:
        monkeypatch.delenv(key)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    log = tmp_path / f"agent-{len(list(tmp_path.iterdir()))}.ndjson"
    log.touch()
    follower = Follower(log)
    append(log, Path(FIXTURE).read_bytes())
    frames = []
    while not frames or frames[-1]["type"] != "result":
        frames += follower.read_frames(1, timeout=30)
    time.sleep(1.5)  # an export or two goes out (every 1000 ms) and finds the collector dead
    began = time.monotonic()
    status, out, err = follower.stop()
    return status, b"".join(json.dumps(f).encode() + b"\n" for f in frames) + out, err, time.monotonic() - began


@pytest.fixture(scope="module")
def followed_off(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, list[dict[str, object]]]:
    with pytest.MonkeyPatch.context() as monkeypatch:
        status, out, err, _ = follow(tmp_path_factory.mktemp("off"), monkeypatch, quiet())
    assert err == b"", err
    return status, unnamed(out)


def unnamed(stdout: bytes) -> list[dict[str, object]]:
    """A follower's frames without the session id it derives from the path followed, and the
    result's durations, which it measures on the wall clock (`duration_source: wall`)."""
    return [{k: v for k, v in frame.items() if k not in ("session_id", "duration_ms", "duration_api_ms")}
            for frame in masked(stdout)]


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
@pytest.mark.parametrize("kind", ["blackhole", "closed"])
def test_a_follower_beside_a_dead_collector_is_a_follower_beside_none(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str, protocol: str,
        followed_off: tuple[int, list[dict[str, object]]]) -> None:
    with dead(kind) as endpoint:
        status, out, err, took = follow(tmp_path, monkeypatch, telemetry_env(endpoint, protocol))
    assert (status, unnamed(out)) == followed_off
    assert took < BOUND + 2, took  # the bound, and the follower's own stop
    said = err.decode().splitlines()
    assert len(said) == 1 and said[0].startswith("translator: telemetry: not exported: "), said




def shim(tmp_path: Path, env: dict[str, str]) -> tuple[subprocess.CompletedProcess[bytes], float]:
    began = time.monotonic()
    done = subprocess.run([SHIM, "-p", PROMPT, "--output-format", "json"], env=caliban_env(tmp_path) | env,
                          capture_output=True, timeout=60, cwd=tmp_path, stdin=subprocess.DEVNULL)
    return done, time.monotonic() - began


def answer(stdout: bytes) -> dict[str, object]:
    """The json result without what differs from run to run: ids, and the timings (`*_ms`)."""
    return {k: v for k, v in json.loads(stdout).items() if k not in ("session_id", "uuid") and not k.endswith("_ms")}


@pytest.mark.parametrize("kind", ["blackhole", "closed"])
def test_print_mode_beside_a_dead_collector_answers_as_without_telemetry(tmp_path: Path, kind: str) -> None:
    (tmp_path / "off").mkdir()
    (tmp_path / "on").mkdir()
    off, _ = shim(tmp_path / "off", quiet())
    assert off.returncode == 0 and off.stderr == b"", off.stderr
    with dead(kind) as endpoint:
        done, took = shim(tmp_path / "on", telemetry_env(endpoint, "grpc"))
    assert done.returncode == off.returncode and answer(done.stdout) == answer(off.stdout)
    assert took < BOUND + 4, took  # the bound, and the run itself
    said = done.stderr.decode().splitlines()
    assert len(said) == 1 and "telemetry: not exported: " in said[0], said


def trickle(conn: socket.socket) -> None:
    """Reads a request, then answers 200 a byte every 100 ms (a collector on a dying link)."""
    reply = b"HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf\r\nContent-Length: 4096\r\n\r\n" + bytes(4096)
    with conn:
        try:
            if request_head(conn) is None:
                return
            for byte in reply:
                conn.sendall(bytes([byte]))
                time.sleep(0.1)
        except OSError:
            return


def test_a_collector_that_trickles_its_answer_costs_the_exit_bound_at_most() -> None:
    plain, _ = translate(quiet())
    with tcp(trickle) as endpoint:
        done, took = translate(telemetry_env(endpoint, "http/protobuf"))
    assert done.returncode == plain.returncode == 0 and masked(done.stdout) == masked(plain.stdout)
    assert took < BOUND + 2.5, took  # the bound, and the translation itself
    assert len(done.stderr.decode().splitlines()) <= 1, done.stderr
