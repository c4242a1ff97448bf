"""`bench/fold.jq`, the jq program the benchmark races, does the same fold: on generated streams
of the benchmark's shape it gives exactly the frames of `translator --clock estimated`. Run with
libjq (the `jq` package) in process, so the check needs no jq installed."""

from __future__ import annotations

import random

import jq  # type: ignore[import-not-found]
import orjson
import pytest
from support_fixtures import ROOT, translate_bytes

from bench.gen import run_events

FOLD = ROOT / "bench" / "fold.jq"
# `jq -n -f fold.jq` reads the events with `inputs`; in process they come as one array.
PEER = jq.compile("def inputs: .[];\n" + FOLD.read_text(), args={"sid": "S"})


@pytest.mark.parametrize("seed", [0, 1, 8])
def test_the_jq_peer_gives_the_translators_frames(seed: int) -> None:
    rng = random.Random(seed)
    data = b"".join(line + b"\n" for run in range(4 + seed) for line in run_events(rng, run))
    ours = [orjson.loads(frame) for frame in translate_bytes(data, "enriched").output.splitlines()]
    theirs = PEER.input_text(data.decode(), slurp=True).all()
    assert len(ours) > 10 * (4 + seed) // 4
    assert theirs == ours
