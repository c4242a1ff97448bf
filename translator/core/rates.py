"""The rate card: list prices per model glob, and what a turn's tokens cost.

Loaded once by the shell and handed to the core; pricing itself is pure arithmetic.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Mapping
from fnmatch import fnmatchcase
from typing import Any

import msgspec
import orjson

PER_MILLION = 1_000_000  # rates are quoted per million tokens
BUNDLED = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data", "rates.json")
ENV_CARD = "CALIBAN_RATES_YAML"  # the agent's own override of its card, honoured without --rates


class Rate(msgspec.Struct, frozen=True):
    """USD per million tokens; cache rates default to the input rate when a card omits them.
    (A Struct, not a dataclass: the same, built in C at import, where a dataclass costs 0.7 ms.)"""

    input: float
    output: float
    cache_read: float
    cache_write: float
    context_window: int = 0  # the model's limits, as Claude Code reports them; 0: unknown
    max_output_tokens: int = 0


class RateCard:
    """Ordered (glob, Rate) rules; the first glob matching the model (or its part after a
    `provider/` prefix) wins. Unknown models have no rate. A card in the agent's format adds
    provider-scoped rules (see `from_agent_yaml`), consulted first."""

    def __init__(self, rules: list[tuple[str, Rate]], scoped: dict[str, list[tuple[str, Rate]]] | None = None) -> None:
        self._rules = rules
        self._scoped = scoped or {}
        self._cache: dict[str, Rate | None] = {}

    def fingerprint(self) -> str:
        """The prices in force, hashed: equal for equal cards, whatever file (or date) they came
        from; batch replay redoes an output made under another card."""
        import hashlib  # only the batch replay asks (OpenSSL's hashes cost every start 2 ms)

        return hashlib.sha256(repr((self._rules, sorted(self._scoped.items()))).encode()).hexdigest()

    def rate(self, model: str) -> Rate | None:
        try:
            return self._cache[model]
        except KeyError:
            pass
        bare = model.rsplit("/", 1)[-1]
        found = self._scoped_rate(model, bare) if self._scoped else None
        if found is None:
            found = next(
                (r for glob, r in self._rules if fnmatchcase(model, glob) or fnmatchcase(bare, glob)),
                None,
            )
        self._cache[model] = found
        return found

    def _scoped_rate(self, model: str, bare: str) -> Rate | None:
        """A `provider/model` is priced by that provider's rules only (Ollama's `*` makes all
        its models free). A bare model name does not say its provider: every provider's rules
        are tried, the most specific glob winning, but never a catch-all `*`, which would
        price every unknown model at that provider's rate without a warning."""
        provider = model.rsplit("/", 1)[0] if "/" in model else None
        if provider is not None:
            rules = self._scoped.get(provider, [])
            return next((r for glob, r in rules if agent_glob(glob, bare)), None)
        matches = [(len(glob.replace("*", "")), r) for rules in self._scoped.values()
                   for glob, r in rules if glob != "*" and agent_glob(glob, bare)]
        return max(matches, key=lambda m: m[0])[1] if matches else None

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
    def from_agent_yaml(cls, data: Any, today: dt.date) -> RateCard:
        """Build from the agent's own `rates.yaml` (caliban-telemetry, ADR 0033): `{version,
        providers: {name: [{model_glob, effective_from, input_per_mtok, output_per_mtok,
        cache_read_per_mtok?, cache_creation_per_mtok?}]}}`. As the agent resolves it: per
        provider, among the rules whose glob matches, the latest `effective_from` not after
        `today`; a missing cache rate is the input rate. Raises ValueError when malformed."""
        providers = data.get("providers") if isinstance(data, dict) else None
        if not isinstance(providers, dict):
            raise ValueError("a rates.yaml card needs a 'providers' mapping")
        scoped: dict[str, list[tuple[str, Rate]]] = {}
        for name, rules in providers.items():
            if not isinstance(rules, list):
                raise ValueError(f"provider {name!r}: needs a list of rules")
            dated: list[tuple[dt.date, str, Rate]] = []
            for i, rule in enumerate(rules):
                try:
                    glob, since = rule["model_glob"], rule["effective_from"]
                    inp, outp = float(rule["input_per_mtok"]), float(rule["output_per_mtok"])
                    read, write = rule.get("cache_read_per_mtok"), rule.get("cache_creation_per_mtok")
                    since = since if isinstance(since, dt.date) else dt.date.fromisoformat(str(since))
                    rate = Rate(inp, outp, inp if read is None else float(read), inp if write is None else float(write))
                except (KeyError, TypeError, ValueError, AttributeError):
                    raise ValueError(
                        f"provider {name!r} rule {i}: needs 'model_glob', 'effective_from', "
                        "'input_per_mtok' and 'output_per_mtok'"
                    ) from None
                if not isinstance(glob, str):
                    raise ValueError(f"provider {name!r} rule {i}: 'model_glob' must be a string")
                if since <= today:
                    dated.append((since, glob, rate))
            # latest first: the first matching glob is then the agent's choice
            scoped[str(name)] = [(glob, rate) for _, glob, rate in sorted(dated, key=lambda d: d[0], reverse=True)]
        return cls([], scoped)

    @classmethod
    def load(cls, path: str | os.PathLike[str], today: dt.date | None = None) -> RateCard:
        """Read a card: the agent's `rates.yaml` format (name ending .yaml/.yml), TOML (.toml)
        or JSON. `today` picks the rules in effect (default: the current date)."""
        with open(path, "rb") as f:
            raw = f.read()
        name = os.fspath(path)
        if name.endswith((".yaml", ".yml")):
            import yaml  # only YAML cards pay for it

            try:
                data = yaml.safe_load(raw)
            except yaml.YAMLError as exc:
                raise ValueError(yaml_error(exc)) from None
            return cls.from_agent_yaml(data, today or dt.date.today())
        if name.endswith(".toml"):
            import tomllib  # only TOML cards pay for it

            return cls.from_mapping(tomllib.loads(raw.decode()))
        return cls.from_mapping(orjson.loads(raw))

    @classmethod
    def default(cls, environ: Mapping[str, str]) -> RateCard:
        """The card when none is named: the agent's `CALIBAN_RATES_YAML` override if set (as
        the agent itself honours it), else the bundled card."""
        path = environ.get(ENV_CARD)
        return cls.load(path) if path else cls.bundled()

    def limits(self, model: str) -> tuple[int, int]:
        """(context window, max output tokens) of a model; zeros when the card does not say."""
        rate = self.rate(model)
        return (rate.context_window, rate.max_output_tokens) if rate else (0, 0)

    @classmethod
    def bundled(cls) -> RateCard:
        return cls.load(BUNDLED)


def agent_glob(pattern: str, name: str) -> bool:
    """The agent's glob (`cost.rs` glob_match): `*` alone matches all; otherwise the part before
    the first `*` is a prefix and the rest a suffix; without `*`, equality."""
    if pattern == "*":
        return True
    star = pattern.find("*")
    if star < 0:
        return pattern == name
    prefix, suffix = pattern[:star], pattern[star + 1 :]
    return name.startswith(prefix) and name.endswith(suffix) and len(name) >= len(prefix) + len(suffix)


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


def yaml_error(exc: Exception) -> str:
    """A YAML card's error in one line, where it is: `invalid YAML at line L, column C: <what>
    (<while doing what> from line L)` (PyYAML's marks count from 0)."""
    problem, mark = getattr(exc, "problem", None), getattr(exc, "problem_mark", None)
    if problem is None or mark is None:
        return f"invalid YAML ({str(exc).splitlines()[0]})"
    said = f"invalid YAML at line {mark.line + 1}, column {mark.column + 1}: {problem}"
    context, start = getattr(exc, "context", None), getattr(exc, "context_mark", None)
    if context:
        said += f" ({context}" + (f" from line {start.line + 1})" if start is not None else ")")
    return said
