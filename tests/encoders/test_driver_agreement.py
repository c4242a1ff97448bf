"""The enriched result of raw events agrees, key by key, with what the agent's own headless
driver printed for them (fixtures/samples/headless-derived-from-code/X for
raw-derived-from-code/X), except the deviations docs/output.md lists."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from support_fixtures import FIXTURES, drive

from translator.core.rates import RateCard

SAMPLES = FIXTURES / "samples"
PAIRS = sorted(p.name for p in (SAMPLES / "headless-derived-from-code").glob("*.ndjson")
               if (SAMPLES / "raw-derived-from-code" / p.name).exists())
# Measured by the translator: per run, where the agent's duration_ms is whole-session (#331);
# duration_api_ms and duration_source the agent does not print.
TIMING = ("duration_ms", "duration_api_ms", "duration_source")


def results(frames: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [f for f in frames if f["type"] == "result"]


def test_there_are_pairs() -> None:
    assert len(PAIRS) >= 9


@pytest.mark.parametrize("name", PAIRS)
def test_the_result_agrees_with_the_agents_driver(name: str) -> None:
    run = drive((SAMPLES / "raw-derived-from-code" / name).read_bytes())
    theirs = results([orjson.loads(ln) for ln in (SAMPLES / "headless-derived-from-code" / name).read_bytes().splitlines()])
    ours = results(run.frames)
    assert len(ours) == len(theirs) == 1
    (a, b) = (dict(ours[0]), dict(theirs[0]))
    for key in TIMING:
        a.pop(key, None)
        b.pop(key, None)
    a["session_id"] = b["session_id"]
    # usage: the same two counts; the cache counters are added where the agent reported them
    assert {k: a["usage"][k] for k in ("input_tokens", "output_tokens")} == b["usage"]
    a["usage"] = b["usage"]
    # cost: counted once (the agent's cost.rs counts cache tokens twice)
    assert a["total_cost_usd"] <= b["total_cost_usd"]
    a["total_cost_usd"] = b["total_cost_usd"]
    assert list(a.items()) == list(b.items())  # the same keys, in the same order, same values


def test_cost_is_counted_once_where_the_agent_counts_cache_twice() -> None:
    # Stage-A retry sample: 4200 input tokens of which 4000 cache reads, 1300 output, sonnet
    # (3 / 15 / 0.30 per million). The agent: 4200 * 3 + 4000 * 0.30 + 1300 * 15 → 0.0333.
    # The translator: (4200 - 4000) * 3 + 4000 * 0.30 + 1300 * 15 → 0.0213.
    name = "stage_a_max_tokens_retry.ndjson"
    (ours,) = results(drive((SAMPLES / "raw-derived-from-code" / name).read_bytes(), rates=RateCard.bundled()).frames)
    (theirs,) = results([orjson.loads(ln) for ln in (SAMPLES / "headless-derived-from-code" / name).read_bytes().splitlines()])
    assert (ours["total_cost_usd"], theirs["total_cost_usd"]) == (0.0213, 0.0333)


def frames(path: Any) -> list[dict[str, Any]]:
    return [orjson.loads(ln) for ln in path.read_bytes().splitlines()]


@pytest.mark.parametrize("name", PAIRS)
def test_the_init_differs_from_the_drivers_only_as_the_readme_says(name: str) -> None:
    """The raw events carry no provider, no requested model and none of the driver's setup."""
    (ours,) = [f for f in drive((SAMPLES / "raw-derived-from-code" / name).read_bytes()).frames if f["type"] == "system"]
    theirs = frames(SAMPLES / "headless-derived-from-code" / name)
    (init,) = [f for f in theirs if f["type"] == "system"]
    assert [k for k in ours if k != "model"] == ["type", "subtype", "session_id"]
    assert set(init) - set(ours) >= {"tools", "plugins", "settingSources", "mcp_servers", "bare_mode", "cwd", "permission_mode"}
    mismatch = [f["details"] for f in theirs if f["type"] == "warning" and f["subtype"] == "model_mismatch"]
    if mismatch:  # the driver names the model asked for and warns; the events name the one served
        assert (init["model"].split("/", 1)[1], ours["model"]) == (mismatch[0]["requested"], mismatch[0]["actual"])
    elif "model" in ours:  # the driver's `provider/model`, without its provider
        assert init["model"].split("/", 1)[1] == ours["model"]
    else:  # no TurnStart: the events name no model
        assert name == "before_run_hook_denied.ndjson"


def test_the_driver_prints_one_result_per_process_the_translator_one_per_run_end() -> None:
    raw = (SAMPLES / "raw-derived-from-code" / "run_frames_two_passes.ndjson").read_bytes()
    assert raw.count(b'"type":"RunEnd"') == 2
    ours = results(drive(raw).frames)
    (theirs,) = results(frames(SAMPLES / "headless-derived-from-code" / "run_frames_two_users.ndjson"))
    assert [(r["result"], r["num_turns"]) for r in ours] == [("alpha", 1), ("beta", 1)]
    assert (theirs["result"], theirs["num_turns"]) == ("beta", 2)


def as_the_driver_rebuilds(value: Any) -> Any:
    """A content block as the driver's json! writes it: keys sorted, no thinking signature,
    an image as {"type": "image"}."""
    if isinstance(value, list):
        return [as_the_driver_rebuilds(v) for v in value]
    if not isinstance(value, dict):
        return value
    if value.get("type") == "image":
        return {"type": "image"}
    return {k: as_the_driver_rebuilds(value[k]) for k in sorted(value) if k != "signature"}


@pytest.mark.parametrize("name", PAIRS)
def test_the_other_frames_differ_from_the_drivers_only_in_how_blocks_are_written(name: str) -> None:
    ours = [f for f in drive((SAMPLES / "raw-derived-from-code" / name).read_bytes()).frames
            if f["type"] not in ("system", "result")]
    theirs = [f for f in frames(SAMPLES / "headless-derived-from-code" / name)
              if f["type"] not in ("system", "result", "warning")]
    assert [as_the_driver_rebuilds(f) for f in ours] == theirs
    if name == "plan_mode_denied_image_signature_cache.ndjson":  # the sample that has all three
        assert ours != [as_the_driver_rebuilds(f) for f in ours]
        (mine,) = [f["content"][0] for f in ours if f["type"] == "message" and f["content"][0]["type"] == "thinking"]
        (driver,) = [f["content"][0] for f in theirs if f["type"] == "message" and f["content"][0]["type"] == "thinking"]
        assert (list(mine), list(driver)) == (["type", "thinking", "signature"], ["thinking", "type"])
