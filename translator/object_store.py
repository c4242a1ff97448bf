"""Object storage through fsspec: filesystems opened with the user's timeout, and every fault of
a store one kind of error, an OSError that names the object (I/O: 74).

A store's client fails in its own words, most of them no OSError (botocore's
EndpointConnectionError, aiohttp's ClientPayloadError, asyncio's TimeoutError, an IndexError
from deep inside a retry), and each layer retries on its own (botocore 5 tries, s3fs 5 more, each
waiting up to 15-60 s): a stalled read ended in IndexError after 77 s, an unanswered PUT held the
batch 5 minutes and more. Here an s3 client waits at most `timeout` seconds for a connection and
for each answer or next bytes, tries a request at most TRIES times (a refused connection, a
timeout, a 5xx), and a body that breaks off fails its object at once (a batch reruns cheaply:
what was done is up to date). Other stores take their timeouts from their own fsspec settings.
"""

from __future__ import annotations

import errno
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from typing import Any

from translator.extras import need

TIMEOUT = 30.0  # seconds, the default of --store-timeout (and TRANSLATOR_STORE_TIMEOUT)
TRIES = 3  # attempts at one request before its object fails
ENV = "TRANSLATOR_STORE_TIMEOUT"
# Every filesystem made here, held for the life of the process and of its forked children (the
# pool's workers), which must never free the ones they inherit: freeing one runs its finalizer,
# which closes its connections through the event loop the child shares with its parent (epoll),
# so the parent's next request on them hung (the results table, after the pool) and the child
# printed "Task exception was never retrieved".
_made: list[Any] = []


class StoreError(OSError):
    """A store's fault on one object: `strerror` is `<url>: <what happened>`."""

    def __init__(self, url: str, why: str) -> None:
        super().__init__(errno.EIO, f"{url}: {why}")


def filesystem(url: str, timeout: float) -> tuple[Any, str]:
    """The fsspec filesystem of `url` and the path on it, configured as fsspec is told (FSSPEC_S3
    and the like: credentials, endpoint) but for the timeouts and tries, which are ours."""
    fsspec = need("fsspec")
    if url.split("://", 1)[0] in ("s3", "s3a"):
        config = dict(fsspec.config.conf.get("s3", {}).get("config_kwargs") or {})
        config.update(connect_timeout=timeout, read_timeout=timeout,
                      connector_args={**config.get("connector_args", {}), "socket_factory": partial(_socket, timeout)})
        config.setdefault("retries", {"total_max_attempts": TRIES, "mode": "standard"})
        fs, path = fsspec.core.url_to_fs(url, config_kwargs=config)
        fs.retries = 1  # s3fs's own tries, around botocore's: none more (a body that breaks off fails)
    else:
        fs, path = fsspec.core.url_to_fs(url)
    if not any(fs is made for made in _made):
        _made.append(fs)
    return fs, path


def _socket(timeout: float, address: tuple[Any, ...]) -> socket.socket:
    """A connection's socket whose sent bytes may go unacknowledged (a peer that stopped reading
    a body, or is gone) `timeout` seconds at most before the kernel fails the write: the one
    timeout aiohttp has none for (TCP_USER_TIMEOUT, Linux)."""
    sock = socket.socket(*address[:3])
    if hasattr(socket, "TCP_USER_TIMEOUT"):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT, int(timeout * 1000))
    return sock


def why(exc: BaseException, timeout: float) -> str:
    """What a store's fault comes to, in a few words, from the exception and those it came of
    (an HTTP error's status and code; a timeout, however deep; else the first words said)."""
    chain: list[BaseException] = []
    cause: BaseException | None = exc
    while cause is not None and cause not in chain:
        chain.append(cause)
        cause = cause.__cause__ or cause.__context__
    for e in chain:
        response = getattr(e, "response", None)
        if isinstance(response, dict) and "Error" in response:
            status = response.get("ResponseMetadata", {}).get("HTTPStatusCode", "")
            error = response["Error"]
            return f"the store answered {status} {error.get('Code', '')}: {error.get('Message', '')}".strip(": ")
    timeouts = [e for e in chain if isinstance(e, TimeoutError) or "Timeout" in type(e).__name__
                or (isinstance(e, OSError) and e.errno == errno.ETIMEDOUT)]
    if timeouts:
        said = next((str(e) for e in timeouts if str(e)), "")
        return f"no answer in {timeout:g} s" + (f" ({said})" if said else "")
    for e in chain:
        if isinstance(e, OSError) and e.strerror:
            return e.strerror
        if str(e):
            return f"{type(e).__name__}: {e}"
    return type(exc).__name__


@contextmanager
def faults(url: str, timeout: float) -> Iterator[None]:
    """Whatever the store raises in the block is a StoreError naming `url`; a missing object
    stays a FileNotFoundError (a caller may expect it), and interrupts pass."""
    try:
        yield
    except (StoreError, FileNotFoundError):
        raise
    except Exception as exc:
        raise StoreError(url, why(exc, timeout)) from exc


def configured_timeout(given: float | None = None) -> float:
    """--store-timeout if given, else $TRANSLATOR_STORE_TIMEOUT, else TIMEOUT; ValueError unless
    a positive number of seconds."""
    try:
        value = float(given if given is not None else os.environ.get(ENV) or TIMEOUT)
    except ValueError:
        value = 0.0
    if not 0 < value < float("inf"):
        raise ValueError("must be a positive number of seconds")
    return value
