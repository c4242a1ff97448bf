"""Optional dependencies, imported only by the features that use them, with a one-line error
that names the extra to install when one is missing."""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType

from translator.exits import EX_UNAVAILABLE

EXTRA = {  # module -> the extra that brings it
    "pyarrow": "table",
    "deltalake": "table",
    "fsspec": "fleet",
    "dask": "fleet",
    "distributed": "fleet",
    "s3fs": "s3",
    "gcsfs": "gcs",
    "adlfs": "azure",
    "matplotlib": "report",
    "duckdb": "report",
}


SCARCE = "failed to map segment from shared object"  # the dynamic loader's words when mmap fails


class MissingExtra(Exception):
    """An optional dependency is not installed; str() is the user's one-line message."""

    status = EX_UNAVAILABLE


def need(module: str, extra: str | None = None) -> ModuleType:
    """`import module`, or MissingExtra saying which extra provides it: `extra` when the
    feature has its own (pyarrow for `translator report` comes with `[report]`)."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        if SCARCE in str(exc):  # installed, but its library could not be mapped: no memory (ulimit -v)
            raise MemoryError(f"{module} could not be loaded ({SCARCE})") from exc
        extra = extra or EXTRA.get(module.split(".")[0], "fleet")
        raise MissingExtra(f"{module} is not installed: {install(extra)}") from exc


def available(module: str, extra: str | None = None) -> None:
    """MissingExtra as need() says it, unless `module` is installed; nothing imported (an
    up-to-date rerun that writes no table never pays pyarrow's import: ~1 s, ~40 MB)."""
    try:
        found = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        found = None
    if found is None:
        extra = extra or EXTRA.get(module.split(".")[0], "fleet")
        raise MissingExtra(f"{module} is not installed: {install(extra)}")


def install(extra: str) -> str:
    """How an extra is installed: from the translator's clone (the package is not on PyPI)."""
    return f"pip install '.[{extra}]' in the translator's clone"
