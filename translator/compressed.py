"""Compressed input: gzip or zstd, told by the first bytes (not the name), in every mode.

A `Decoder` stands between what is read and the core: plain input passes through as it is
(after one look at its first bytes), compressed input is inflated as it arrives, member after
member (several gzip members or zstd frames, as `cat a.gz b.gz` makes, are one stream).
Nothing is buffered beyond what the decompressor holds, so a growing .gz can be followed and a
compressed pipe stays live.
"""

from __future__ import annotations

import importlib
import zlib
from typing import Any, Protocol

GZIP_MAGIC = b"\x1f\x8b"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
MAGICS = (GZIP_MAGIC, ZSTD_MAGIC)


class CorruptInput(Exception):
    """The compressed data is damaged or cut short: `<format>: <why>`."""


class Decompressor(Protocol):
    @property
    def eof(self) -> bool: ...
    @property
    def unused_data(self) -> bytes: ...

    def decompress(self, data: bytes, /) -> bytes: ...


def _zstd() -> Any:
    """The zstd module: the standard library's from Python 3.14, else its backport (the same
    code, a runtime dependency of 1.4 MB on older Pythons), imported only for zstd input."""
    try:
        return importlib.import_module("compression.zstd")
    except ImportError:
        return importlib.import_module("backports.zstd")


def _decompressor(kind: str) -> Decompressor:
    if kind == "gzip":
        return zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    d: Decompressor = _zstd().ZstdDecompressor()
    return d


def kind_of(head: bytes) -> str | None:
    """gzip, zstd, or None (plain) for data starting with `head`."""
    if head.startswith(GZIP_MAGIC):
        return "gzip"
    if head.startswith(ZSTD_MAGIC):
        return "zstd"
    return None


class Inflater:
    """Incremental decompression of one input, across members (gzip) or frames (zstd)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._d = _decompressor(kind)
        self._error: type[Exception] = zlib.error if kind == "gzip" else _zstd().ZstdError
        self._between = False  # a member ended: what follows must be another (or zero padding)

    def feed(self, data: bytes) -> bytes:
        out: list[bytes] = []
        try:
            while data:
                if self._between:
                    data = data.lstrip(b"\0")  # zero padding after a member, as gzip(1) allows
                    if not data:
                        break
                    self._d, self._between = _decompressor(self.kind), False
                out.append(self._d.decompress(data))
                data = b""
                if self._d.eof:
                    data, self._between = self._d.unused_data, True
        except self._error as exc:
            raise CorruptInput(f"{self.kind}: {exc}") from None
        return b"".join(out)

    def finish(self) -> None:
        """The input ended: it must not end inside a member."""
        if not self._between:
            raise CorruptInput(f"{self.kind}: the compressed data is cut short")


class Decoder:
    """The bytes an input holds, from the bytes read: `feed()` each chunk as read, `finish()`
    at the end. Plain input costs one look at its first bytes, then one test per chunk."""

    def __init__(self) -> None:
        self.kind: str | None = None  # gzip, zstd or None (plain), once known
        self._inflater: Inflater | None = None
        self._head: bytes | None = b""  # the first bytes, while they may begin a magic number

    def feed(self, data: bytes) -> bytes:
        if self._head is None:
            return data if self._inflater is None else self._inflater.feed(data)
        head = self._head + data
        if kind_of(head) is None and any(len(head) < len(m) and m.startswith(head) for m in MAGICS):
            self._head = head  # too short to tell (a pipe written byte by byte)
            return b""
        self._head = None
        self.kind = kind_of(head)
        if self.kind is None:
            return head
        self._inflater = Inflater(self.kind)
        return self._inflater.feed(head)

    def finish(self) -> bytes:
        """What is left at the end of the input; raises CorruptInput for a cut-short stream."""
        if self._inflater is not None:
            self._inflater.finish()
        head, self._head = self._head or b"", None
        return head
