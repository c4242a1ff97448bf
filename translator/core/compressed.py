"""Compressed input: gzip or zstd, told by the first bytes (not the name), in every mode.

A `Decoder` stands between what is read and the core: plain input passes through as it is
(after one look at its first bytes), compressed input is inflated as it arrives, member after
member (several gzip members or zstd frames, as `cat a.gz b.gz` makes, are one stream).
Nothing is buffered beyond what the decompressor holds, so a growing .gz can be followed and a
compressed pipe stays live. It is inflated a piece at a time, each no longer than a read of
plain input, so that a small input that expands to gigabytes (a compression bomb) is held a
piece at a time, its reader can act on a signal between pieces, and past a line's budget it is
cut off once it expands more than MAX_RATIO times.
"""

from __future__ import annotations

import importlib
import zlib
from typing import Any, Protocol

GZIP_MAGIC = b"\x1f\x8b"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
MAGICS = (GZIP_MAGIC, ZSTD_MAGIC)
PIECE = 1 << 18  # the most one pull inflates: what a read of plain input takes (feed.CHUNK)
# Past the first --max-line-bytes, how many times its compressed size an input may expand.
# Event logs compress 10 to 30 times (bench/gen.py's stream: 14 with zstd -3, 22 with -19);
# deflate cannot pass 1032; a stream of zeros or newlines packs 30,000 times with zstd.
MAX_RATIO = 1000


class CorruptInput(Exception):
    """The compressed data is damaged or cut short: `<format>: <why>`."""


class Decompressor(Protocol):
    @property
    def eof(self) -> bool: ...
    @property
    def unused_data(self) -> bytes: ...

    def decompress(self, data: bytes, max_length: int = ..., /) -> bytes: ...


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
    """Incremental decompression of one input, across members (gzip) or frames (zstd), a piece
    at a time: `push()` what was read, then `pull()` until it gives b"". No piece is longer
    than PIECE, however much the input expands, and past `floor` bytes the data may not
    expand more than `ratio` times its compressed size (a compression bomb is cut off)."""

    def __init__(self, kind: str, floor: int, ratio: int) -> None:
        self.kind = kind
        self.floor = floor
        self.ratio = ratio  # 0: no limit
        self.taken = 0  # compressed bytes pushed
        self.given = 0  # inflated bytes pulled
        self._d = _decompressor(kind)
        self._error: type[Exception] = zlib.error if kind == "gzip" else _zstd().ZstdError
        self._input = b""  # compressed bytes not yet handed to the decompressor
        self._between = False  # a member ended: what follows must be another (or zero padding)

    def push(self, data: bytes) -> None:
        self.taken += len(data)
        self._input = self._input + data if self._input else data

    def pull(self) -> bytes:
        """The next piece (at most PIECE bytes); b"" once what was pushed is all inflated."""
        try:
            while True:
                if self._between:
                    self._input = self._input.lstrip(b"\0")  # zero padding after a member, as gzip(1) allows
                    if not self._input:
                        return b""
                    self._d, self._between = _decompressor(self.kind), False
                out = self._d.decompress(self._input, PIECE)
                # zlib keeps what it did not take for the next call; zstd keeps it inside
                self._input = getattr(self._d, "unconsumed_tail", b"")
                if self._d.eof:
                    self._input, self._between = self._d.unused_data, True
                if out or not self._between:
                    break
        except self._error as exc:
            raise CorruptInput(f"{self.kind}: {exc}") from None
        self.given += len(out)
        if self.ratio and self.given > self.floor and self.given > self.ratio * self.taken:
            raise CorruptInput(
                f"{self.kind}: the data expands more than {self.ratio} times ({self.given} bytes from "
                f"{self.taken}): a compression bomb? Not read further (--max-inflate-ratio)"
            )
        return out

    def finish(self) -> None:
        """The input ended: it must not end inside a member."""
        if not self._between:
            raise CorruptInput(f"{self.kind}: the compressed data is cut short")


class Decoder:
    """The bytes an input holds, from the bytes read: `push()` each chunk as read, then `pull()`
    pieces until b"", and `finish()` at the end. Plain input costs one look at its first bytes,
    then one test per chunk, and is pulled as the chunk it came in. `floor` and `ratio`: the
    compressed input's limit (see Inflater)."""

    def __init__(self, floor: int = 64 << 20, ratio: int = MAX_RATIO) -> None:
        self.kind: str | None = None  # gzip, zstd or None (plain), once known
        self._floor, self._ratio = floor, ratio
        self._inflater: Inflater | None = None
        self._head: bytes | None = b""  # the first bytes, while they may begin a magic number
        self._plain = b""  # plain bytes pushed, not yet pulled

    def push(self, data: bytes) -> None:
        if self._head is None:
            if self._inflater is None:
                self._plain = self._plain + data if self._plain else data
            else:
                self._inflater.push(data)
            return
        head = self._head + data
        if kind_of(head) is None and any(len(head) < len(m) and m.startswith(head) for m in MAGICS):
            self._head = head  # too short to tell (a pipe written byte by byte)
            return
        self._head = None
        self.kind = kind_of(head)
        if self.kind is None:
            self._plain = head
            return
        self._inflater = Inflater(self.kind, self._floor, self._ratio)
        self._inflater.push(head)

    def pull(self) -> bytes:
        """The next piece of what was pushed (b"": nothing more until the next push); raises
        CorruptInput for damaged data or a bomb."""
        if self._inflater is not None:
            return self._inflater.pull()
        plain, self._plain = self._plain, b""
        return plain

    def finish(self) -> bytes:
        """What is left at the end of the input (after every piece was pulled); raises
        CorruptInput for a cut-short stream."""
        if self._inflater is not None:
            self._inflater.finish()
        head, self._head = self._head or b"", None
        return head
