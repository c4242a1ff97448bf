"""JSON Schemas of the output frames, generated from the typed model in `frames.py`, and of the
input the translator reads, generated from the classes it decodes it into (`model.py`).

`python -m translator.schema.generate` (`make schemas`) writes `translator/data/schema/<format>.schema.json`
and `input-raw.schema.json` / `input-headless.schema.json`; the package ships those files, so
using them needs nothing but a JSON Schema validator.
"""

from __future__ import annotations

import json
import sys
import typing
from pathlib import Path
from typing import Any

from translator.schema.frames import MODELS

DIRECTORY = Path(__file__).parent.parent / "data" / "schema"
DIALECT = "https://json-schema.org/draft/2020-12/schema"


def path(fmt: str) -> Path:
    return DIRECTORY / f"{fmt}.schema.json"


def _literal(model: type, key: str) -> list[str]:
    hint = typing.get_type_hints(model).get(key)
    return list(typing.get_args(hint)) if typing.get_origin(hint) is typing.Literal else []


def passthrough(models: tuple[type, ...]) -> dict[str, Any]:
    """Any other event, passed through unchanged: an object whose `type` (with `subtype`, for
    the types that have modelled subtypes) is none of the modelled frames'."""
    whole: list[str] = []
    by_subtype: dict[str, list[str]] = {}
    for model in models:
        (kind,) = _literal(model, "type")
        subtypes = _literal(model, "subtype") if kind == "system" else []  # a system frame's kind is its subtype
        if subtypes:
            by_subtype.setdefault(kind, []).extend(subtypes)
        elif kind not in whole:
            whole.append(kind)
    claimed: list[dict[str, Any]] = [{"required": ["type"], "properties": {"type": {"enum": whole}}}]
    claimed += [
        {"required": ["type", "subtype"], "properties": {"type": {"const": kind}, "subtype": {"enum": subs}}}
        for kind, subs in by_subtype.items()
    ]
    return {
        "title": "Passthrough",
        "description": "An event the translator does not know, passed through unchanged.",
        "type": "object",
        "required": ["type"],
        "properties": {"type": {"type": "string"}},
        "not": {"anyOf": claimed},
    }


def generate(fmt: str) -> dict[str, Any]:
    import msgspec

    models = MODELS[fmt]
    frames, defs = msgspec.json.schema_components(models, ref_template="#/$defs/{name}")
    return {
        "$schema": DIALECT,
        "title": f"translator --format {fmt}: one output frame (one line of stream-json)",
        "description": "Generated from translator/schema/frames.py by `python -m translator.schema.generate`.",
        "anyOf": [*frames, passthrough(models)],
        "$defs": defs,
    }


def generate_input(dialect: str) -> dict[str, Any]:
    """One line of the agent's output in `dialect`, as the translator checks it: the agent's
    fields, types and ranges (fields it does not know are allowed, as the default ignores them)."""
    import msgspec

    from translator import model

    union = {"raw": model.TurnEvent, "headless": model.HeadlessFrame}[dialect]
    events, defs = msgspec.json.schema_components((union,), ref_template="#/$defs/{name}")
    title = {"raw": "one raw event (caliban TurnEvent NDJSON)", "headless": "one frame of caliban's headless stream-json"}
    return {
        "$schema": DIALECT,
        "title": f"translator input: {title[dialect]}",
        "description": "Generated from translator/model.py by `python -m translator.schema.generate`.",
        **events[0],
        "$defs": defs,
    }


INPUTS = ("raw", "headless")


def render(fmt: str) -> str:
    document = generate_input(fmt.removeprefix("input-")) if fmt.startswith("input-") else generate(fmt)
    return json.dumps(document, indent=2) + "\n"


def main() -> None:
    DIRECTORY.mkdir(parents=True, exist_ok=True)
    for fmt in [*MODELS, *(f"input-{dialect}" for dialect in INPUTS)]:
        path(fmt).write_text(render(fmt))
        sys.stdout.write(f"{path(fmt)}\n")


if __name__ == "__main__":
    main()
