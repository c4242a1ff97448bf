"""A loopback OTLP/gRPC receiver for the telemetry tests, as the recording's (set-t5's
otlp_grpc_receiver.py): a grpcio server with a generic handler that takes any method path,
decodes each `Export*ServiceRequest` with opentelemetry-proto, keeps the method and the
metadata, and answers an empty `Export*ServiceResponse`. With `tls`, it serves on a throwaway
CA's certificate (`ca()`), and with `clients` it asks for a client certificate too (mTLS).
"""

from __future__ import annotations

import datetime
import ipaddress
import time
from collections.abc import Iterator
from concurrent import futures
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceResponse
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from support_otlp import Receiver

# The recorded service paths (set-t5 README, otel-grpc), and the OTLP/HTTP path whose request each takes.
METHODS = {
    "/opentelemetry.proto.collector.metrics.v1.MetricsService/Export": ("/v1/metrics", ExportMetricsServiceResponse),
    "/opentelemetry.proto.collector.logs.v1.LogsService/Export": ("/v1/logs", ExportLogsServiceResponse),
    "/opentelemetry.proto.collector.trace.v1.TraceService/Export": ("/v1/traces", ExportTraceServiceResponse),
}


class GrpcReceiver(Receiver):
    """What came, as the HTTP receiver keeps it; the calls' methods and metadata too."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, list[tuple[str, str]], bool]] = []  # method, metadata, compressed

    def handle(self, method: str, request: bytes, context: grpc.ServicerContext) -> bytes:
        path, response = METHODS[method]
        metadata = [(k, v if isinstance(v, str) else v.decode()) for k, v in context.invocation_metadata()]
        with self.lock:
            self.calls.append((method, metadata, False))
        self.take(path, "application/x-protobuf", request)
        return bytes(response().SerializeToString())


class Handler(grpc.GenericRpcHandler):
    def __init__(self, got: GrpcReceiver) -> None:
        self.got = got

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler | None:
        method = handler_call_details.method  # type: ignore[attr-defined]
        if method not in METHODS:
            return None
        return grpc.unary_unary_rpc_method_handler(lambda request, context: self.got.handle(method, request, context))


@dataclass
class Pki:
    """A throwaway CA, a server certificate for 127.0.0.1 and a client certificate, as PEM files."""

    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _cert(subject: str, key: ec.EllipticCurvePrivateKey, issuer: x509.Name | None,
          issuer_key: ec.EllipticCurvePrivateKey, ca: bool, san: bool = False) -> x509.Certificate:
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    now = datetime.datetime.now(datetime.UTC)
    builder = (x509.CertificateBuilder().subject_name(name).issuer_name(issuer or name).public_key(key.public_key())
               .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
               .not_valid_after(now + datetime.timedelta(days=1))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
               .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
               .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_key.public_key()),
                              critical=False))
    if ca:
        builder = builder.add_extension(x509.KeyUsage(
            digital_signature=True, content_commitment=False, key_encipherment=False, data_encipherment=False,
            key_agreement=False, key_cert_sign=True, crl_sign=True, encipher_only=False, decipher_only=False),
            critical=True)
    if san:
        builder = builder.add_extension(x509.SubjectAlternativeName(
            [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def ca(folder: Path) -> Pki:
    """Make the throwaway CA and its two certificates in `folder`."""
    ca_key, server_key, client_key = _key(), _key(), _key()
    root = _cert("translator test CA", ca_key, None, ca_key, ca=True)
    server = _cert("127.0.0.1", server_key, root.subject, ca_key, ca=False, san=True)
    client = _cert("translator test client", client_key, root.subject, ca_key, ca=False)
    pki = Pki(folder / "ca.pem", folder / "server.pem", folder / "server.key", folder / "client.pem",
              folder / "client.key")
    for path, data in ((pki.ca, root.public_bytes(serialization.Encoding.PEM)),
                       (pki.server_cert, server.public_bytes(serialization.Encoding.PEM)),
                       (pki.server_key, _pem_key(server_key)),
                       (pki.client_cert, client.public_bytes(serialization.Encoding.PEM)),
                       (pki.client_key, _pem_key(client_key))):
        path.write_bytes(data)
    return pki


@contextmanager
def grpc_receiver(tls: Pki | None = None, clients: bool = False) -> Iterator[tuple[GrpcReceiver, str]]:
    """A receiver on a free loopback port, and its endpoint URL (https:// with `tls`)."""
    got = GrpcReceiver()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4), handlers=[Handler(got)])
    if tls is None:
        port = server.add_insecure_port("127.0.0.1:0")
    else:
        credentials = grpc.ssl_server_credentials(
            [(tls.server_key.read_bytes(), tls.server_cert.read_bytes())],
            root_certificates=tls.ca.read_bytes() if clients else None, require_client_auth=clients)
        port = server.add_secure_port("127.0.0.1:0", credentials)
    server.start()
    try:
        yield got, f"{'https' if tls else 'http'}://127.0.0.1:{port}"
    finally:
        server.stop(grace=None)


def wait_calls(got: GrpcReceiver, methods: set[str], timeout: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with got.lock:
            if methods <= {m for m, _, _ in got.calls}:
                return True
        time.sleep(0.05)
    return False


def short(method: str) -> str:
    """`metrics.MetricsService/Export`, as the recording's summary names a call."""
    return method.removeprefix("/opentelemetry.proto.collector.").replace(".v1.", ".")


def metadata_of(got: GrpcReceiver) -> list[list[tuple[str, str]]]:
    with got.lock:
        return [m for _, m, _ in got.calls]


def first(items: Any) -> Any:
    return next(iter(items))
