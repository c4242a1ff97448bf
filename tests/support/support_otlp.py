"""A loopback OTLP/HTTP receiver for the telemetry tests, and one reading of OTLP bodies.

It takes `POST /v1/metrics|logs|traces` in both protocols (`application/x-protobuf` and
`application/json`, gzipped or not, over TLS when given a context), decodes each with
opentelemetry-proto's messages (JSON through
`json_format`, after OTLP's hex ids are turned into proto3 JSON's base64, so a body that is not
OTLP fails here), and keeps them. `flatten()` reads a decoded request, or a recorded Claude Code
body, into plain values to compare key by key.
"""

from __future__ import annotations

import base64
import gzip
import json
import os
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import Message
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from support_fixtures import FIXTURES
from support_processes import fake_caliban

REQUESTS: dict[str, type[Message]] = {
    "/v1/metrics": ExportMetricsServiceRequest,
    "/v1/logs": ExportLogsServiceRequest,
    "/v1/traces": ExportTraceServiceRequest,
}
IDS = {"traceId", "spanId", "parentSpanId"}
RECORDED = Path(__file__).parents[2] / "fixtures" / "cc-2.1.333" / "otel"


def _hex_ids_to_base64(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: base64.b64encode(bytes.fromhex(v)).decode() if k in IDS and isinstance(v, str) else
                _hex_ids_to_base64(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_hex_ids_to_base64(v) for v in node]
    return node


def decode(path: str, content_type: str, body: bytes | dict[str, Any]) -> Message:
    """One OTLP request as its proto message (JSON bodies parsed strictly: no unknown field)."""
    message = REQUESTS[path]()
    if isinstance(body, dict) or content_type.startswith("application/json"):
        data = body if isinstance(body, dict) else json.loads(body)
        json_format.ParseDict(_hex_ids_to_base64(data), message)
    else:
        message.ParseFromString(body)
    return message


def value(v: AnyValue) -> Any:
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [value(x) for x in v.array_value.values]
    return None if kind is None else getattr(v, kind)


def attributes(kvs: Any) -> dict[str, Any]:
    return {kv.key: value(kv.value) for kv in kvs if isinstance(kv, KeyValue)}


def flatten(path: str, message: Message) -> list[dict[str, Any]]:
    """Each metric data point, log record or span of a request as one flat dict."""
    out: list[dict[str, Any]] = []
    if path == "/v1/metrics":
        for rm in message.resource_metrics:  # type: ignore[attr-defined]
            for sm in rm.scope_metrics:
                for m in sm.metrics:
                    kind = m.WhichOneof("data")
                    data = getattr(m, kind)
                    for dp in data.data_points:
                        out.append({"resource": attributes(rm.resource.attributes), "scope": (sm.scope.name, sm.scope.version),
                                    "name": m.name, "unit": m.unit, "description": m.description, "kind": kind,
                                    "temporality": data.aggregation_temporality, "monotonic": data.is_monotonic,
                                    "attributes": attributes(dp.attributes), "start": dp.start_time_unix_nano,
                                    "time": dp.time_unix_nano, "value": getattr(dp, dp.WhichOneof("value"))})
    elif path == "/v1/logs":
        for rl in message.resource_logs:  # type: ignore[attr-defined]
            for sl in rl.scope_logs:
                for r in sl.log_records:
                    out.append({"resource": attributes(rl.resource.attributes), "scope": (sl.scope.name, sl.scope.version),
                                "body": value(r.body), "time": r.time_unix_nano, "observed": r.observed_time_unix_nano,
                                "severity": (r.severity_number, r.severity_text), "trace": r.trace_id.hex(),
                                "span": r.span_id.hex(), "attributes": attributes(r.attributes)})
    else:
        for rs in message.resource_spans:  # type: ignore[attr-defined]
            for ss in rs.scope_spans:
                for s in ss.spans:
                    out.append({"resource": attributes(rs.resource.attributes), "scope": (ss.scope.name, ss.scope.version),
                                "name": s.name, "kind": s.kind, "status": s.status.code, "trace": s.trace_id.hex(),
                                "span": s.span_id.hex(), "parent": s.parent_span_id.hex(),
                                "start": s.start_time_unix_nano, "end": s.end_time_unix_nano,
                                "attributes": attributes(s.attributes),
                                "events": [(e.name, attributes(e.attributes)) for e in s.events]})
    return out


def recorded(name: str) -> dict[str, list[dict[str, Any]]]:
    """A Claude Code recording (`<name>.otlp.jsonl`), read as the receiver reads what it gets."""
    got: dict[str, list[dict[str, Any]]] = {"/v1/metrics": [], "/v1/logs": [], "/v1/traces": []}
    for line in (RECORDED / f"{name}.otlp.jsonl").read_text().splitlines():
        post = json.loads(line)
        got[post["path"]] += flatten(post["path"], decode(post["path"], post["content_type"], post["body"]))
    return got


class Receiver:
    """What came, per path, flattened; the raw posts (path, content type, headers) too."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.posts: list[tuple[str, str, float]] = []
        self.headers: list[list[tuple[str, str]]] = []  # each post's, in order
        self.items: dict[str, list[dict[str, Any]]] = {p: [] for p in REQUESTS}

    def take(self, path: str, content_type: str, body: bytes) -> None:
        items = flatten(path, decode(path, content_type, body))
        with self.lock:
            self.posts.append((path, content_type, time.monotonic()))
            self.items[path] += items

    def wait(self, ready: Callable[[Receiver], bool], timeout: float = 15.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if ready(self):
                    return True
            time.sleep(0.05)
        return False

    @property
    def metrics(self) -> list[dict[str, Any]]:
        return self.items["/v1/metrics"]

    @property
    def logs(self) -> list[dict[str, Any]]:
        return self.items["/v1/logs"]

    @property
    def spans(self) -> list[dict[str, Any]]:
        return self.items["/v1/traces"]


@contextmanager
def receiver(tls: ssl.SSLContext | None = None) -> Iterator[tuple[Receiver, str]]:
    """A receiver on a free loopback port, and its endpoint URL (https:// with a server `tls` context)."""
    got = Receiver()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            with got.lock:
                got.headers.append(list(self.headers.items()))
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            try:
                got.take(self.path, self.headers.get("Content-Type") or "", body)
                status, answer = 200, b"{}"
            except Exception as exc:  # what was not OTLP: the test sees it as missing data
                status, answer = 400, str(exc).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield got, f"{'https' if tls else 'http'}://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then let go)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def telemetry_env(endpoint: str, protocol: str, **more: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "CLAUDE_CODE_"))}
    return env | {
        "CLAUDE_CODE_ENABLE_TELEMETRY": "1", "OTEL_METRICS_EXPORTER": "otlp", "OTEL_LOGS_EXPORTER": "otlp",
        "OTEL_TRACES_EXPORTER": "otlp", "CLAUDE_CODE_ENHANCED_TELEMETRY_BETA": "1",
        "OTEL_EXPORTER_OTLP_PROTOCOL": protocol, "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
        "OTEL_METRIC_EXPORT_INTERVAL": "1000", "OTEL_LOGS_EXPORT_INTERVAL": "1000",
    } | more


def token_sums(points: list[dict[str, Any]]) -> dict[str, float]:
    sums: dict[str, float] = defaultdict(float)
    for p in points:
        if p["name"] == "claude_code.token.usage":
            sums[p["attributes"]["type"]] += p["value"]  # DELTA: the exports add up
    return dict(sums)


def by_name(items: list[dict[str, Any]], key: str) -> dict[str, list[dict[str, Any]]]:
    """Flattened items grouped by a key (`body` of log records, `name` of metrics and spans)."""
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for item in items:
        out[item[key]].append(item)
    return out


# caliban-claude's export, for the shim's telemetry tests (on the fake caliban)
SHIM = str(Path(sys.executable).with_name("caliban-claude"))
PROMPT = "how many files are here?"
# caliban -p's headless output reports the run's tokens once, without the cache split: all input
HEADLESS = {"input": 6376, "output": 57, "cacheRead": 0, "cacheCreation": 0}
NOT_MADE = {"claude_code.managed_settings_resolved", "claude_code.plugin_loaded"}


def caliban_env(root: Path) -> dict[str, str]:
    fake_caliban(root)
    return {"CALIBAN_BIN": str(root / "caliban"), "CALIBAN_SESSIONS_DIR": str(root / "sessions"),
            "CLAUDE_CONFIG_DIR": str(root / "claude"),
            "FAKE_CALIBAN_SCRIPTS": json.dumps([{"file": str(FIXTURES / "caliban" / "tool_use_two_turns.jsonl")}])}


def same_keys_as_claude_code(logs: list[dict[str, Any]], metrics: list[dict[str, Any]]) -> None:
    cc = recorded("otel_one_shot_bash")
    ours, theirs = by_name(logs, "body"), by_name(cc["/v1/logs"], "body")
    assert set(theirs) - set(ours) == NOT_MADE and set(ours) <= set(theirs)
    for body, records in ours.items():
        assert [sorted(r["attributes"]) for r in records] == [sorted(r["attributes"]) for r in theirs[body]], body
    shape = {(p["name"], p["unit"], p["temporality"], tuple(sorted(p["attributes"]))) for p in metrics}
    assert shape == {(p["name"], p["unit"], p["temporality"], tuple(sorted(p["attributes"]))) for p in cc["/v1/metrics"]}


def print_run(tmp_path: Path, got: Receiver, env: dict[str, str]) -> dict[str, Any]:
    """`caliban-claude -p PROMPT --output-format json` on the fake caliban, exporting to `got`
    (`env`: the telemetry's variables): its result, once its metrics are in, checked as every
    one-shot's export is: the fixture's answer, the keys of Claude Code's export, the result's
    session on every point."""
    done = subprocess.run([SHIM, "-p", PROMPT, "--output-format", "json"], env=caliban_env(tmp_path) | env,
                          capture_output=True, timeout=60, cwd=tmp_path, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    assert got.wait(lambda r: any(p["name"] == "claude_code.active_time.total" for p in r.metrics))
    assert result["result"] == "There are 3 files."
    same_keys_as_claude_code(got.logs, got.metrics)
    assert {p["attributes"]["session.id"] for p in got.metrics} == {result["session_id"]}
    return result
