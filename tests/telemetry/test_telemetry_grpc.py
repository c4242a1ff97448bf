"""Claude Code's monitoring quick start over OTLP/gRPC (set-t5's otel-grpc), as real processes
against a loopback grpcio receiver decoding with opentelemetry-proto: the headers as lower-cased
metadata, gzip, one protocol per signal, a --follow and caliban-claude on both of its backends
exporting what the http/protobuf path exports; TLS and mTLS to a receiver whose certificates a
throwaway CA signed (and a client without its certificate refused, the run untouched)."""

from __future__ import annotations

import os
import socket
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson
import pytest
from support_otlp import (
    HEADLESS,
    by_name,
    print_run,
    receiver,
    telemetry_env,
    token_sums,
)
from support_otlp_grpc import GrpcReceiver, ca, grpc_receiver, metadata_of
from support_processes import TRANSLATOR, Follower, append, fixture

FIXTURE = fixture("tool_use_two_turns")
TWO_TURNS = {"input": 64, "output": 57, "cacheRead": 5144, "cacheCreation": 1168}
SID = "4f1c2d9e-0000-4000-8000-000000000002"
METRICS = "/opentelemetry.proto.collector.metrics.v1.MetricsService/Export"
LOGS = "/opentelemetry.proto.collector.logs.v1.LogsService/Export"


def quick_start(endpoint: str, **more: str) -> dict[str, str]:
    """Claude Code's monitoring quick start, copied as it is (no traces, no intervals)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "CLAUDE_CODE_"))}
    return env | {"CLAUDE_CODE_ENABLE_TELEMETRY": "1", "OTEL_METRICS_EXPORTER": "otlp", "OTEL_LOGS_EXPORTER": "otlp",
                  "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint} | more


def translate(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([TRANSLATOR, "--session-id", SID, *args, FIXTURE], env=env, capture_output=True,
                          timeout=60, stdin=subprocess.DEVNULL)


def plain() -> bytes:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "CLAUDE_CODE_"))}
    return masked(translate(base).stdout)


def masked(stdout: bytes) -> bytes:
    return b"\n".join(orjson.dumps({k: v for k, v in orjson.loads(line).items() if k not in ("uuid", "timestamp")})
                      for line in stdout.splitlines())


def test_the_quick_start_as_it_is_delivers_metrics_and_events_at_exit() -> None:
    with grpc_receiver() as (got, endpoint):
        done = translate(quick_start(endpoint))
    assert (done.returncode, done.stderr) == (0, b"")
    assert masked(done.stdout) == plain()
    assert token_sums(got.metrics) == TWO_TURNS
    assert {METRICS, LOGS} == {m for m, _, _ in got.calls}  # no traces without the beta flag
    assert {"claude_code.api_request", "claude_code.tool_result", "claude_code.user_prompt"} <= set(
        by_name(got.logs, "body"))


def test_headers_are_lower_cased_metadata_their_values_kept() -> None:
    with grpc_receiver() as (got, endpoint):
        done = translate(quick_start(endpoint, OTEL_EXPORTER_OTLP_HEADERS="Authorization=Bearer t1,X-Team=a b"))
        assert done.returncode == 0, done.stderr
    for metadata in metadata_of(got):  # as the recording's grpcio saw the CLI's
        assert [(k, v) for k, v in metadata if k in ("authorization", "x-team")] == [("authorization", "Bearer t1"),
                                                                                   ("x-team", "a b")]


@contextmanager
def relay(to: str) -> Iterator[tuple[str, list[int]]]:
    """A TCP relay in front of the receiver, counting the bytes the client sends."""
    host, port = to.removeprefix("http://").split(":")
    listener = socket.create_server(("127.0.0.1", 0))
    sent = [0]

    def pipe(a: socket.socket, b: socket.socket, count: bool) -> None:
        try:
            while data := a.recv(65536):
                sent[0] += len(data) if count else 0
                b.sendall(data)
            b.shutdown(socket.SHUT_WR)
        except OSError:
            pass  # (the other side gone)

    def serve() -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            upstream = socket.create_connection((host, int(port)))
            threading.Thread(target=pipe, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=pipe, args=(upstream, client, False), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}", sent
    finally:
        listener.close()


def test_gzip_compresses_every_grpc_export() -> None:
    sizes = {}
    for compression in ("none", "gzip"):
        with grpc_receiver() as (got, endpoint), relay(endpoint) as (front, sent):
            done = translate(telemetry_env(front, "grpc", OTEL_EXPORTER_OTLP_COMPRESSION=compression,
                                           OTEL_LOG_USER_PROMPTS="1"))
            assert done.returncode == 0, done.stderr
        assert token_sums(got.metrics) == TWO_TURNS and len(by_name(got.spans, "name")["claude_code.interaction"]) == 1
        sizes[compression] = sent[0]
    assert sizes["gzip"] < sizes["none"] * 0.7, sizes  # the same data, gzipped


def test_gzip_over_http_too() -> None:
    with receiver() as (got, endpoint):
        done = translate(telemetry_env(endpoint, "http/json", OTEL_EXPORTER_OTLP_COMPRESSION="gzip"))
        assert done.returncode == 0, done.stderr
    assert token_sums(got.metrics) == TWO_TURNS
    assert {dict(h).get("Content-Encoding") for h in got.headers} == {"gzip"}


def test_a_protocol_per_signal() -> None:
    """Metrics over gRPC, logs over http/protobuf (OTEL_EXPORTER_OTLP_LOGS_PROTOCOL)."""
    with grpc_receiver() as (grpc_got, grpc_endpoint), receiver() as (http_got, http_endpoint):
        done = translate(quick_start(grpc_endpoint, OTEL_EXPORTER_OTLP_LOGS_PROTOCOL="http/protobuf",
                                     OTEL_EXPORTER_OTLP_LOGS_ENDPOINT=http_endpoint + "/v1/logs"))
        assert (done.returncode, done.stderr) == (0, b"")
    assert {m for m, _, _ in grpc_got.calls} == {METRICS}
    assert {p for p, _, _ in http_got.posts} == {"/v1/logs"}
    assert token_sums(grpc_got.metrics) == TWO_TURNS and by_name(http_got.logs, "body")["claude_code.api_request"]


def test_follow_exports_over_grpc_while_it_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = tmp_path / "agent.ndjson"
    with grpc_receiver() as (got, endpoint):
        for key, value in telemetry_env(endpoint, "grpc", OTEL_METRIC_EXPORT_INTERVAL="200",
                                        OTEL_LOGS_EXPORT_INTERVAL="200", OTEL_TRACES_EXPORT_INTERVAL="200").items():
            monkeypatch.setenv(key, value)
        follower = Follower(log)
        try:
            append(log, Path(FIXTURE).read_bytes())
            while follower.read_frames(1)[0]["type"] != "result":
                pass
            assert got.wait(lambda r: len(by_name(r.logs, "body").get("claude_code.api_request", [])) == 2
                            and bool(by_name(r.spans, "name").get("claude_code.interaction")))
            assert follower.proc.poll() is None
        finally:
            _, _, err = follower.stop()
    assert err == b""
    assert token_sums(got.metrics) == TWO_TURNS


@pytest.mark.parametrize("backend", ["print", "drive"])
def test_caliban_claude_exports_over_grpc_on_both_backends(tmp_path: Path, backend: str) -> None:
    with grpc_receiver() as (got, endpoint):
        serve = {"FAKE_SERVE_SCRIPT": orjson.dumps({"messages": [{"turns": [  # (on the drive: the fixture's run)
            {"text": "Listing.", "tools": [{"name": "Bash", "input": {"command": "ls"}, "result": "a\nb\nc"}]},
            {"text": "There are 3 files."}]}]}).decode()}  # fmt: skip
        print_run(tmp_path, got, telemetry_env(endpoint, "grpc") | {"CALIBAN_CLAUDE_BACKEND": backend} | serve)
    if backend == "print":
        assert token_sums(got.metrics) == HEADLESS


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return ca(tmp_path_factory.mktemp("pki"))


def test_tls_to_a_receiver_of_a_private_ca(pki: Any) -> None:
    with grpc_receiver(tls=pki) as (got, endpoint):
        done = translate(quick_start(endpoint, OTEL_EXPORTER_OTLP_CERTIFICATE=str(pki.ca)))
        assert (done.returncode, done.stderr) == (0, b"")
    assert token_sums(got.metrics) == TWO_TURNS


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_mtls_with_the_client_certificate_and_refused_without(pki: Any, protocol: str) -> None:
    tls = {"OTEL_EXPORTER_OTLP_CERTIFICATE": str(pki.ca)}
    client = {"OTEL_EXPORTER_OTLP_CLIENT_KEY": str(pki.client_key),
              "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE": str(pki.client_cert)}
    for given, delivered in ((client, True), ({}, False)):
        with server(pki, protocol) as (got, endpoint):
            done = translate(quick_start(endpoint, OTEL_EXPORTER_OTLP_PROTOCOL=protocol, **tls, **given))
        assert done.returncode == 0 and masked(done.stdout) == plain()
        assert bool(got.metrics) is delivered
        said = done.stderr.decode().splitlines()
        if delivered:
            assert said == []
        else:
            assert len(said) == 1 and said[0].startswith("translator: telemetry: not exported"), said


@contextmanager
def server(pki: Any, protocol: str) -> Iterator[tuple[GrpcReceiver | Any, str]]:
    if protocol == "grpc":
        with grpc_receiver(tls=pki, clients=True) as found:
            yield found
        return
    import ssl

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(pki.server_cert, pki.server_key)
    context.load_verify_locations(pki.ca)
    context.verify_mode = ssl.CERT_REQUIRED
    with receiver(tls=context) as found:
        yield found
