"""--rates genai-prices: the maintained price data as an opt-in card, named in a note."""

from __future__ import annotations

import datetime as dt
import pickle
from pathlib import Path

import pytest
from support_fixtures import frames_of
from support_processes import TRANSLATOR, fixture, run

pytest.importorskip("genai_prices")
from translator.cli.prices import GenaiPricesCard


def test_the_card_prices_the_run_and_is_named_on_stderr() -> None:
    proc = run("--rates", "genai-prices", fixture("tool_use_two_turns"))
    assert proc.returncode == 0
    (note,) = proc.stderr.decode().splitlines()
    assert note.startswith("translator: rates: genai-prices 0.") and "prices in force on" in note
    ours = frames_of(run(fixture("tool_use_two_turns")).stdout)[-1]["total_cost_usd"]
    # claude-sonnet-4-5 at $3 / $15 / $0.30 / $3.75 per million in both cards
    assert frames_of(proc.stdout)[-1]["total_cost_usd"] == ours == 0.0069702


def test_models_with_and_without_a_provider_and_unknown_ones() -> None:
    card = GenaiPricesCard(dt.date(2026, 1, 1))
    sonnet = card.rate("claude-sonnet-4-5")
    assert sonnet is not None and (sonnet.input, sonnet.output, sonnet.cache_read, sonnet.cache_write) == (3, 15, 0.3, 3.75)
    assert card.rate("anthropic/claude-sonnet-4-5") == sonnet
    gpt = card.rate("openai/gpt-4o")
    assert gpt is not None and gpt.input > 0
    assert card.rate("no-such-model-anywhere") is None
    assert pickle.loads(pickle.dumps(card)).identity == card.identity


def test_batch_replay_with_the_card(tmp_path: Path) -> None:
    import subprocess

    proc = subprocess.run([TRANSLATOR, "--rates", "genai-prices", "--out-dir", str(tmp_path / "o"),
                           fixture("thinking")], capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    (out,) = (tmp_path / "o").rglob("*.jsonl")
    assert frames_of(out.read_bytes())[-1]["total_cost_usd"] > 0
