"""The async pump every shell runs and the sync loops of the library API are one loop (feed.py):
for the same input, split anywhere, they give the same frames, the same diagnostics in the same
order, and the same rejected lines — bad lines, a last line without newline, and compressed
input cut short included."""

from __future__ import annotations

import functools
import gzip
import os
import random
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from support_fixtures import events

import translator
from translator.core.rates import RateCard
from translator.encoders.formats import make_encoder
from translator.shell.pump import Pump, Shell
from translator.shell.sink import Config

BAD = b'{"type":"TurnStart","turn_index":\n' + b"not json at all\n"
# Two runs with two bad lines between them, and a last line cut off without its newline.
PLAIN = events("tool_use_two_turns") + BAD + events("thinking") + b'{"type":"TurnStart"'
CUT_GZIP = gzip.compress(events("thinking") + events("tool_use_two_turns"))[:-40]
# What differs from one translation to the next: Claude Code's fresh uuids, and its timestamps
# (the epoch is read from the wall clock when a stream begins).
FRESH = re.compile(rb'[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|"timestamp":"[^"]*"')
FORMATS = ("enriched", "claude-code")


def splits(data: bytes, seed: int) -> list[bytes]:
    """`data` in pieces of 1 byte to 4 KiB, cut where the seed says."""
    rng, pieces, at = random.Random(seed), [], 0
    while at < len(data):
        size = rng.choice((1, 2, 7, 100, 1000, 4096))
        pieces.append(data[at : at + size])
        at += size
    return pieces


def same_ids(data: bytes) -> bytes:
    """The fresh values made equal: the rest compares byte for byte."""
    return FRESH.sub(b"<fresh>", data)


def through_stream(pieces: list[bytes], fmt: str) -> tuple[bytes, list[str], bytes]:
    stream = translator.Stream(fmt, session_id="S", clock="estimated", live=False)  # type: ignore[arg-type]
    out, diags, rejects = [], [], []
    for piece in pieces:
        out += stream.feed(piece)
        diags += stream.take_diagnostics()
        rejects.append(stream.take_rejects())
    out += stream.end()
    return b"".join(out), diags + stream.take_diagnostics(), b"".join(rejects) + stream.take_rejects()


def through_pump(pieces: list[bytes], fmt: str, tmp_path: Path, capfd: Any) -> tuple[bytes, list[str], bytes]:
    """The shells' pump, reading `pieces` one by one, writing to a list; its diagnostics are
    what it wrote to stderr."""
    rates = RateCard.bundled()
    rejects = tmp_path / f"rejects-{len(pieces)}-{fmt}"
    cfg = Config(sources=[], make_encoder=functools.partial(make_encoder, fmt, rates=rates), rates=rates,
                 clock="estimated", session_id="S", reject_file=str(rejects))
    out: list[bytes] = []
    capfd.readouterr()

    async def pump() -> None:
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            shell = Shell(cfg, devnull)
            feed = Pump(shell, shell.new_core("<stream>", live=False), write)
            source: Iterator[bytes] = iter([*pieces, b""])

            async def read() -> bytes:
                await anyio.lowlevel.checkpoint()
                return next(source)

            assert await feed.run(read)
            await feed.close()
            assert shell.rejects is not None
            shell.rejects.close()
        finally:
            os.close(devnull)

    async def write(data: bytes) -> None:
        out.append(data)

    anyio.run(pump)
    return b"".join(out), capfd.readouterr().err.splitlines(), rejects.read_bytes()


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("data", [PLAIN, CUT_GZIP], ids=["bad-lines", "gzip-cut-short"])
def test_sync_and_async_give_the_same_bytes_and_diagnostics(fmt: str, data: bytes, tmp_path: Path,
                                                             capfd: Any) -> None:
    whole: list[str] = []
    want = same_ids(b"".join(translator.translate_bytes(data, fmt, session_id="S", clock="estimated",  # type: ignore[arg-type]
                                                        on_diagnostic=whole.append)))
    assert len(whole) >= 2 and want.count(b'"type":"result"') >= 2  # the test is about something
    if data is CUT_GZIP:
        assert whole[0] == "translator: <stream>: gzip: the compressed data is cut short"  # the cause first
    rejects = translator.Stream(fmt, session_id="S", clock="estimated", live=False)  # type: ignore[arg-type]
    rejects.feed(data)
    rejects.end()
    whole_rejects = rejects.take_rejects()
    for seed in range(3):
        pieces = splits(data, seed)
        seen: list[str] = []
        sync = b"".join(translator.translate_bytes(pieces, fmt, session_id="S", clock="estimated",  # type: ignore[arg-type]
                                                   on_diagnostic=seen.append))
        assert (same_ids(sync), seen) == (want, whole)
        out, diags, rejected = through_stream(pieces, fmt)
        assert (same_ids(out), diags, rejected) == (want, whole, whole_rejects)
        out, diags, rejected = through_pump(pieces, fmt, tmp_path, capfd)
        assert (same_ids(out), diags, rejected) == (want, whole, whole_rejects)
