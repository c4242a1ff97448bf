"""Rate cards in the agent's own rates.yaml format (fixtures/rates/caliban-rates.yaml is the
agent's bundled card, caliban-telemetry at f33a2d0), and CALIBAN_RATES_YAML."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
from pathlib import Path

import pytest
from support_fixtures import FIXTURES, drive, turn
from support_processes import TRANSLATOR

from translator.core.rates import Rate, RateCard

CARD = FIXTURES / "rates" / "caliban-rates.yaml"
TODAY = dt.date(2026, 8, 21)


@pytest.fixture
def card() -> RateCard:
    return RateCard.load(CARD, today=TODAY)


@pytest.mark.parametrize(
    ("model", "rate"),
    [
        ("claude-sonnet-4-6", Rate(3.0, 15.0, 0.3, 3.75)),
        ("anthropic/claude-opus-4-8", Rate(15.0, 75.0, 1.5, 18.75)),
        ("openai/gpt-5-mini", Rate(5.0, 20.0, 5.0, 5.0)),  # no cache rates: the input rate
        ("gpt-4o", Rate(2.5, 10.0, 2.5, 2.5)),
        ("ollama/llama3.1:8b", Rate(0.0, 0.0, 0.0, 0.0)),  # Ollama's `*`: free
        ("anthropic.claude-opus-4-7-v1", Rate(15.0, 75.0, 1.5, 18.75)),  # Bedrock
        ("claude-opus-4-7@20260401", Rate(15.0, 75.0, 15.0, 15.0)),  # Vertex: its own, more specific rule
    ],
)
def test_the_agents_card_prices_like_the_agent(card: RateCard, model: str, rate: Rate) -> None:
    assert card.rate(model) == rate


def test_a_bare_unknown_model_is_not_taken_for_an_ollama_one(card: RateCard) -> None:
    assert card.rate("llama3.1:8b") is None  # unknown: 0 with a warning, not silently free
    assert card.rate("openai/llama3.1:8b") is None  # a provider's rules only


def test_rules_not_yet_in_effect_are_skipped() -> None:
    early = RateCard.load(CARD, today=dt.date(2026, 1, 15))
    assert early.rate("claude-sonnet-4-6") is None  # effective from 2026-04-01
    assert early.rate("claude-haiku-4-5") == Rate(0.8, 4.0, 0.08, 1.0)


def test_the_latest_rule_in_effect_wins(tmp_path: Path) -> None:
    path = tmp_path / "rates.yaml"
    path.write_text(
        "version: 1\nproviders:\n  anthropic:\n"
        "    - {model_glob: 'claude-*', effective_from: 2026-01-01, input_per_mtok: 1, output_per_mtok: 2}\n"
        "    - {model_glob: 'claude-*', effective_from: 2026-06-01, input_per_mtok: 3, output_per_mtok: 4}\n"
    )
    assert RateCard.load(path, today=TODAY).rate("claude-x") == Rate(3.0, 4.0, 3.0, 3.0)
    assert RateCard.load(path, today=dt.date(2026, 3, 1)).rate("claude-x") == Rate(1.0, 2.0, 1.0, 1.0)


def test_a_yaml_card_prices_the_run(card: RateCard) -> None:
    usage = {"input_tokens": 1_000_000, "output_tokens": 0}
    (result,) = drive(turn(0, "hi", model="claude-sonnet-4-6", usage=usage)
                      + b'{"type":"RunEnd","final_messages":[],"total_usage":{"input_tokens":0,"output_tokens":0},'
                        b'"turn_count":1,"stopped_for":"EndOfTurn"}\n', rates=card).results
    assert result["total_cost_usd"] == 3.0


def env_run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[bytes]:
    data = turn(0, "hi", model="gpt-5", usage={"input_tokens": 1_000_000, "output_tokens": 0})
    full = {k: v for k, v in os.environ.items() if k != "CALIBAN_RATES_YAML"} | env
    return subprocess.run([TRANSLATOR, "--results-only", *args], input=data, capture_output=True, env=full, timeout=30)


def test_caliban_rates_yaml_is_honoured_without_rates(tmp_path: Path) -> None:
    import orjson

    proc = env_run({"CALIBAN_RATES_YAML": str(CARD)})
    assert proc.returncode == 0, proc.stderr
    assert orjson.loads(proc.stdout)["total_cost_usd"] == 5.0  # gpt-5: 5 per million input
    own = tmp_path / "card.json"
    own.write_text('{"rates": [{"model": "gpt-5", "input": 7, "output": 7}]}')
    proc = env_run({"CALIBAN_RATES_YAML": str(CARD)}, "--rates", str(own))  # --rates wins
    assert orjson.loads(proc.stdout)["total_cost_usd"] == 7.0


def test_a_bad_caliban_rates_yaml_is_a_one_line_configuration_error(tmp_path: Path) -> None:
    bad = tmp_path / "rates.yaml"
    bad.write_text("version: 1\nproviders: [oops\n")
    proc = env_run({"CALIBAN_RATES_YAML": str(bad)})
    assert proc.returncode == 78
    assert proc.stderr.decode().startswith(f"translator: CALIBAN_RATES_YAML={bad}: invalid YAML")
    assert proc.stderr.count(b"\n") == 1


def test_a_bad_rate_card_says_where_it_is_wrong(tmp_path: Path) -> None:
    """A newcomer's typo is found by its line, in each format a card is read in."""
    cards = {
        "rates.yaml": ("version: 1\nproviders: {openai: 1\n  anthropic: [\n",
                       "invalid YAML at line 3, column 12: expected ',' or '}', but got ':'"
                       " (while parsing a flow mapping from line 2)"),
        "rates.toml": ("a = 1\nb = \n", "Invalid value (at line 2, column 5)"),
        "rates.json": ('{"rates": [],\n "x": }', "line 2 column 7"),
    }
    for name, (text, where) in cards.items():
        (tmp_path / name).write_text(text)
        proc = env_run({}, "--rates", str(tmp_path / name))
        assert proc.returncode == 78
        assert proc.stderr.decode().startswith(f"translator: --rates {tmp_path / name}: ")
        assert where in proc.stderr.decode() and proc.stderr.count(b"\n") == 1, proc.stderr


def test_the_library_reads_no_environment_and_takes_the_commands_card_when_given_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`rates=None` is the bundled card, whatever the environment says (the API reads only what
    it is given); `RateCard.default(os.environ)` is the card the command picks, and with it the
    library prices the run as the command does."""
    import orjson

    from translator import translate

    own = tmp_path / "rates.yaml"
    own.write_text("version: 1\nproviders:\n  openai:\n    - {model_glob: \"gpt-5*\", effective_from: 2026-01-01, "
                   "input_per_mtok: 7, output_per_mtok: 7}\n")
    monkeypatch.setenv("CALIBAN_RATES_YAML", str(own))
    data = turn(0, "hi", model="gpt-5", usage={"input_tokens": 1_000_000, "output_tokens": 0})
    command = orjson.loads(env_run({"CALIBAN_RATES_YAML": str(own)}).stdout)["total_cost_usd"]
    library = list(translate(data, results_only=True))[-1]["total_cost_usd"]
    as_the_command = list(translate(data, results_only=True, rates=RateCard.default(os.environ)))[-1]
    assert (library, as_the_command["total_cost_usd"], command) == (5.0, 7.0, 7.0)  # bundled gpt-5: 5 per million
