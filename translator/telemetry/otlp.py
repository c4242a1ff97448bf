"""One signal's OTLP connection, read from the standard variables as Claude Code reads them, and
its SDK exporter made from what was read (the SDK imported only then).

Read here rather than by the SDK: the endpoint (a signal's own, else the base one with its
/v1/ path over HTTP, the base as it is over gRPC), the headers (split on `,`, then on the first
`=`, both sides trimmed: gRPC lower-cases the names into metadata), the compression (gzip or
none, on every protocol), the timeout in milliseconds (the SDK's Python exporters would read
seconds), and the certificates of TLS and mTLS, each looked for before anything is made. Every
answer a collector gives is read to RESPONSE_MAX bytes at most: a collector answering with huge
bodies costs that much, not the body.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec

DEFAULT_ENDPOINT = {"grpc": "http://localhost:4317", "http": "http://localhost:4318"}
DEFAULT_TIMEOUT_MS = 10_000
COMPRESSIONS = ("gzip", "none")
RESPONSE_MAX = 64 * 1024  # bytes of a collector's answer read, at most (an OTLP answer is a few bytes)
GRPC = {"metrics": ("metric_exporter", "OTLPMetricExporter"), "logs": ("_log_exporter", "OTLPLogExporter"),
        "traces": ("trace_exporter", "OTLPSpanExporter")}


class Otlp(msgspec.Struct, frozen=True):
    """Where and how one signal's exports go."""

    endpoint: str
    headers: tuple[tuple[str, str], ...] = ()
    gzip: bool = False
    timeout_ms: int = DEFAULT_TIMEOUT_MS
    certificate: str | None = None  # the CA to trust (else the system's)
    client_key: str | None = None  # mTLS: the client's key and certificate
    client_certificate: str | None = None
    insecure: bool = False  # gRPC: cleartext (an http:// endpoint)
    notes: tuple[str, ...] = ()


def _get(environ: Mapping[str, str], signal: str, name: str) -> tuple[str, str]:
    """A signal's own variable, else the base one: (the variable's name, its value)."""
    own = f"OTEL_EXPORTER_OTLP_{signal.upper()}_{name}"
    if value := environ.get(own, "").strip():
        return own, value
    return f"OTEL_EXPORTER_OTLP_{name}", environ.get(f"OTEL_EXPORTER_OTLP_{name}", "").strip()


def pairs(raw: str) -> Iterator[tuple[int, str, tuple[str, str] | None]]:
    """The entries of a `k=v,k2=v 2` variable (OTEL_EXPORTER_OTLP_HEADERS, OTEL_RESOURCE_ATTRIBUTES),
    split as Claude Code splits them: on `,`, then on the first `=`, both sides trimmed, empty
    entries skipped. Each as (its position from 1, its text, its (key, value) or None when it is
    no key=value), so a caller can name a bad one without echoing it. Not the SDK's
    parse_env_headers (opentelemetry.util.re: no documented API): it lower-cases names,
    percent-decodes header values (Claude Code sends them as written), drops a bad entry
    without its position and logs its text, a token often."""
    for n, entry in enumerate(filter(None, (e.strip() for e in raw.split(","))), 1):
        key, sep, value = entry.partition("=")
        yield n, entry, (key.strip(), value.strip()) if sep and key.strip() else None


def headers(raw: str, notes: list[str], key: str) -> tuple[tuple[str, str], ...]:
    """Claude Code's reading of OTEL_EXPORTER_OTLP_HEADERS: `k=v,k2=v 2`, values kept as they are."""
    found: list[tuple[str, str]] = []
    for n, _, pair in pairs(raw):
        if pair is None:  # (its text not said: a header's value is often a token)
            notes.append(f"{key}'s entry {n} is not name=value; left out")
            continue
        found.append(pair)
    return tuple(found)


def read_otlp(environ: Mapping[str, str], signal: str, protocol: str) -> Otlp:
    """The signal's connection; a value that cannot be used raises ValueError naming it."""
    notes: list[str] = []
    own = environ.get(f"OTEL_EXPORTER_OTLP_{signal.upper()}_ENDPOINT", "").strip()
    base = environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
    kind = "grpc" if protocol == "grpc" else "http"
    if own:
        endpoint = own
    elif base and kind == "http":
        endpoint = base.rstrip("/") + f"/v1/{signal}"
    else:
        endpoint = base or (DEFAULT_ENDPOINT[kind] + ("" if kind == "grpc" else f"/v1/{signal}"))
    if "://" not in endpoint and kind == "http":
        raise ValueError(f"{signal}: endpoint {endpoint} is not a URL (http:// or https://)")
    key, raw = _get(environ, signal, "HEADERS")
    found = headers(raw, notes, key)
    key, compression = _get(environ, signal, "COMPRESSION")
    if compression.lower() not in (*COMPRESSIONS, ""):
        notes.append(f"{key}={compression} is not supported (gzip, none); not compressed")
    key, raw = _get(environ, signal, "TIMEOUT")
    timeout = DEFAULT_TIMEOUT_MS
    if raw:
        if not raw.isdigit() or not 0 < int(raw) <= 2**31 - 1:
            raise ValueError(f"{key}={raw} is not a positive number of milliseconds")
        timeout = int(raw)
    files: dict[str, str | None] = {}
    for name in ("CERTIFICATE", "CLIENT_KEY", "CLIENT_CERTIFICATE"):
        key, path = _get(environ, signal, name)
        if path and not os.access(path, os.R_OK):
            raise ValueError(f"{key}={path} cannot be read")
        files[name] = path or None
    if (files["CLIENT_KEY"] is None) != (files["CLIENT_CERTIFICATE"] is None):
        raise ValueError(f"{signal}: mTLS takes both OTEL_EXPORTER_OTLP_CLIENT_KEY and _CLIENT_CERTIFICATE")
    _, insecure = _get(environ, signal, "INSECURE")
    cleartext = endpoint.startswith("http://") or ("://" not in endpoint and insecure.lower() == "true")
    return Otlp(endpoint, found, compression.lower() == "gzip", timeout, files["CERTIFICATE"], files["CLIENT_KEY"],
                files["CLIENT_CERTIFICATE"], cleartext, tuple(notes))


def _bounded_transport(otlp: Otlp) -> Any:
    """The HTTP exporters' client (their own transport interface): each answer read to
    RESPONSE_MAX bytes at most, and the CA it was given trusted (requests would take
    REQUESTS_CA_BUNDLE or CURL_CA_BUNDLE over a session's)."""
    import requests
    from opentelemetry.exporter.http.transport._base import BaseHTTPResult, BaseHTTPTransport

    @dataclass(frozen=True, slots=True)
    class Answer(BaseHTTPResult):
        body: bytes = b""
        found: Mapping[str, str] = field(default_factory=dict)

        def content(self) -> bytes:
            return self.body

        def headers(self) -> Mapping[str, str]:
            return self.found

    class Bounded(BaseHTTPTransport):
        def __init__(self) -> None:
            self.session = requests.Session()
            key, cert = otlp.client_key, otlp.client_certificate
            self.cert = (cert, key) if key and cert else None

        def request(self, method: str, url: str, *, headers: dict[str, str] | None = None,
                    timeout: float | None = None, data: bytes | None = None) -> BaseHTTPResult:
            try:
                with self.session.request(method, url, headers=headers, data=data, timeout=timeout, stream=True,
                                          allow_redirects=False, verify=otlp.certificate, cert=self.cert) as got:
                    body = got.raw.read(RESPONSE_MAX, decode_content=True) or b""
            except Exception as error:  # the exporter's to judge (is_connection_error), as with its own client
                return Answer(error=error)
            return Answer(status_code=got.status_code, reason=got.reason, body=body, found=got.headers)

        def is_connection_error(self, exception: Exception | None) -> bool:
            return isinstance(exception, (requests.ConnectionError, requests.Timeout))

        def close(self) -> None:
            self.session.close()

    return Bounded()


def exporter(signal: str, protocol: str, otlp: Otlp) -> Any:
    """The SDK's OTLP exporter of a signal, made from `otlp` (nothing of it read from the environment)."""
    from translator.extras import need

    timeout = otlp.timeout_ms / 1000
    if protocol == "grpc":
        module, name = GRPC[signal]
        os.environ.setdefault("GRPC_VERBOSITY", "NONE")  # gRPC's core logs to stderr unless told, before its import
        grpc = need("grpc", "otel")
        made = getattr(need(f"opentelemetry.exporter.otlp.proto.grpc.{module}", "otel"), name)
        credentials = None
        if not otlp.insecure:
            read = [None if p is None else open(p, "rb").read()  # noqa: SIM115 (small PEM files)
                    for p in (otlp.certificate, otlp.client_key, otlp.client_certificate)]
            credentials = grpc.ssl_channel_credentials(*read)
        return made(endpoint=otlp.endpoint, insecure=otlp.insecure, credentials=credentials,
                    headers=tuple((k.lower(), v) for k, v in otlp.headers), timeout=timeout,
                    compression=grpc.Compression.Gzip if otlp.gzip else grpc.Compression.NoCompression,
                    channel_options=(("grpc.max_receive_message_length", RESPONSE_MAX), ("grpc.http2.bdp_probe", 0),
                                     ("grpc.max_metadata_size", RESPONSE_MAX)))
    module, name = {"metrics": ("metric_exporter", "OTLPMetricExporter"), "logs": ("_log_exporter", "OTLPLogExporter"),
                    "traces": ("trace_exporter", "OTLPSpanExporter")}[signal]
    base = "opentelemetry.exporter.otlp." + ("json.http" if protocol == "http/json" else "proto.http")
    made = getattr(need(f"{base}.{module}", "otel"), name)
    common = need("opentelemetry.exporter.otlp.common.http", "otel")
    transport = _bounded_transport(otlp)
    compression = common.Compression.GZIP if otlp.gzip else common.Compression.NONE
    # (`_transport`: the exporters' own hook for the HTTP client, the one way to bound what it reads)
    return made(endpoint=otlp.endpoint, headers=dict(otlp.headers), timeout=timeout, compression=compression,
                _transport=transport)
