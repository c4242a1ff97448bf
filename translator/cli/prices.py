"""`--rates genai-prices`: list prices from the genai-prices package (pydantic's maintained,
multi-provider price data), an opt-in beside the agent's own card
(the prices extra: `pip install '.[prices]'` in the translator's clone).

Runs stay reproducible: the data is the snapshot bundled with the installed release (never
updated over the network here), the prices are those in force on the day the card is made, and
both are named in a note on stderr. Prices are flat per token: a model's long-context tiers
(a higher price past some prompt size) are taken at their base tier.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import importlib.metadata
from decimal import Decimal
from typing import Any

from translator.core.rates import Rate, RateCard

NAME = "genai-prices"


def _base(price: Any) -> float | None:
    """A price per million tokens: a number, or the base tier of tiered prices."""
    if price is None:
        return None
    return float(price.base if hasattr(price, "base") else Decimal(price))


class GenaiPricesCard(RateCard):
    """A card that prices a model (`provider/model` or a bare name) as genai-prices does."""

    def __init__(self, when: dt.date | None = None) -> None:
        from genai_prices.data_snapshot import get_snapshot

        super().__init__([])
        self.when = when or dt.datetime.now(dt.UTC).date()
        self._snapshot = get_snapshot()
        self.version = importlib.metadata.version(NAME)

    def __reduce__(self) -> tuple[type[GenaiPricesCard], tuple[dt.date]]:
        return GenaiPricesCard, (self.when,)  # batch workers rebuild it from the same data

    @property
    def identity(self) -> str:
        return f"{NAME} {self.version}, prices in force on {self.when.isoformat()}"

    def fingerprint(self) -> str:
        """Batch's up-to-date key: the release's data and the day fix every price."""
        return hashlib.sha256(self.identity.encode()).hexdigest()

    def rate(self, model: str) -> Rate | None:
        try:
            return self._cache[model]
        except KeyError:
            pass
        provider, _, bare = model.rpartition("/")
        found: Rate | None = None
        for provider_id in dict.fromkeys((provider or None, None)):
            try:
                _, info = self._snapshot.find_provider_model(bare, None, provider_id, None)
            except LookupError:
                continue
            price = info.get_prices(dt.datetime.combine(self.when, dt.time(12), dt.UTC))
            inp, out = _base(price.input_mtok) or 0.0, _base(price.output_mtok) or 0.0
            read, write = _base(price.cache_read_mtok), _base(price.cache_write_mtok)
            found = Rate(inp, out, inp if read is None else read, inp if write is None else write,
                         context_window=getattr(info, "context_window", None) or 0)
            break
        self._cache[model] = found
        return found
