"""The rate card: list prices per model glob, and what a turn's tokens cost.

Loaded once by the shell and handed to the core; pricing itself is pure arithmetic.
"""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

import orjson

PER_MILLION = 1_000_000  # rates are quoted per million tokens
BUNDLED = Path(__file__).parent / "data" / "rates.json"


@dataclass(frozen=True, slots=True)
class Rate:
    """USD per million tokens; cache rates default to the input rate when a card omits them."""

    input: float
    output: float
    cache_read: float
    cache_write: float
    context_window: int = 0  # the model's limits, as Claude Code reports them; 0: unknown
    max_output_tokens: int = 0


class RateCard:
    """Ordered (glob, Rate) rules; the first glob matching the model (or its part after a
    `provider/` prefix) wins. Unknown models have no rate."""

    def __init__(self, rules: list[tuple[str, Rate]]) -> None:
        self._rules = rules
        self._cache: dict[str, Rate | None] = {}

    def rate(self, model: str) -> Rate | None:
        try:
            return self._cache[model]
        except KeyError:
            pass
        bare = model.rsplit("/", 1)[-1]
        found = next(
            (r for glob, r in self._rules if fnmatchcase(model, glob) or fnmatchcase(bare, glob)),
            None,
        )
        self._cache[model] = found
        return found

    @classmethod
    def from_mapping(cls, data: dict[str, Any]) -> RateCard:
        """Build from `{"rates": [{"model": glob, "input": .., "output": .., "cache_read"?: ..,
        "cache_write"?: .., "context_window"?: .., "max_output_tokens"?: ..}, ...]}`; raises
        ValueError on a malformed card."""
        rules = data.get("rates") if isinstance(data, dict) else None
        if not isinstance(rules, list):
            raise ValueError("a rate card needs a 'rates' list")
        out: list[tuple[str, Rate]] = []
        for i, rule in enumerate(rules):
            try:
                glob = rule["model"]
                inp = float(rule["input"])
                outp = float(rule["output"])
                rate = Rate(
                    inp,
                    outp,
                    float(rule.get("cache_read", inp)),
                    float(rule.get("cache_write", inp)),
                    int(rule.get("context_window", 0)),
                    int(rule.get("max_output_tokens", 0)),
                )
            except (KeyError, TypeError, ValueError, AttributeError):
                raise ValueError(f"rate {i}: needs 'model', 'input' and 'output'") from None
            if not isinstance(glob, str):
                raise ValueError(f"rate {i}: 'model' must be a string")
            out.append((glob, rate))
        return cls(out)

    @classmethod
    def load(cls, path: str | Path) -> RateCard:
        """Read a JSON or TOML card (TOML when the name ends in .toml)."""
        raw = Path(path).read_bytes()
        if str(path).endswith(".toml"):
            import tomllib  # only TOML cards pay for it

            return cls.from_mapping(tomllib.loads(raw.decode()))
        return cls.from_mapping(orjson.loads(raw))

    def limits(self, model: str) -> tuple[int, int]:
        """(context window, max output tokens) of a model; zeros when the card does not say."""
        rate = self.rate(model)
        return (rate.context_window, rate.max_output_tokens) if rate else (0, 0)

    @classmethod
    def bundled(cls) -> RateCard:
        return cls.load(BUNDLED)


def turn_cost(rate: Rate, usage: dict[str, int]) -> float:
    """USD for one turn. The agent's `input_tokens` includes both cache counters, so they are
    taken out of it before the input rate applies. Summed in Claude Code's order, so that the
    same tokens give the same float to the last bit."""
    read = usage.get("cache_read_input_tokens", 0)
    write = usage.get("cache_creation_input_tokens", 0)
    uncached = max(usage["input_tokens"] - read - write, 0)
    return (
        uncached / PER_MILLION * rate.input
        + usage["output_tokens"] / PER_MILLION * rate.output
        + read / PER_MILLION * rate.cache_read
        + write / PER_MILLION * rate.cache_write
    )
