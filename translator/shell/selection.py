"""Which files a batch translates, and the relative path each one's output mirrors.

Every argument has a base: a directory is its own base, a file's base is its folder, a glob's
is its folder before the first wildcard. The relative path of an input is taken from the
common parent of all the bases, so `a/run.jsonl b/run.jsonl` write `a/run…` and `b/run…`,
while one directory (or one file) keeps its names as they are under it. Two inputs that would
still write the same output are refused before anything is written; a file reached by more
than one name (a link to it) is translated once.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from typing import Protocol

from translator.encoders.formats import FORMATS
from translator.exits import EX_NOINPUT, EX_USAGE

SUFFIXES = (".ndjson", ".jsonl")
WILDCARD = re.compile(r"[*?[]")


class SelectionError(Exception):
    """A one-line user error and its exit status."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True, slots=True)  # (slots: a listing holds one a file, ~0.1 KB less each)
class Found:
    path: str  # the store's own path (absolute, no protocol)
    size: int
    mtime: float
    identity: tuple[int, int] | None = None  # the real file (st_dev, st_ino), where the store knows it
    link: bool = False  # found through a symbolic link


@dataclass(frozen=True, slots=True)
class Input:
    path: str
    relative: str
    size: int
    mtime: float


class Lister(Protocol):
    """What selection needs of a store: local disk or fsspec."""

    def absolute(self, name: str) -> str: ...
    def kind(self, path: str) -> str | None:
        """"dir", "file" or None (nothing there)."""
        ...
    def files_under(self, path: str) -> list[Found]: ...
    def glob(self, pattern: str) -> list[Found]: ...
    def stat(self, path: str) -> Found: ...


def is_log(name: str) -> bool:
    bare = name.removesuffix(".gz")
    return bare.endswith(SUFFIXES) and not any(bare.endswith(f".{fmt}.jsonl") for fmt in FORMATS)


def target_name(relative: str, fmt: str) -> str:
    stem = relative.removesuffix(".gz")
    for suffix in SUFFIXES:
        stem = stem.removesuffix(suffix)
    return f"{stem}.{fmt}.jsonl"


def select(names: list[str], lister: Lister) -> list[Input]:
    """The inputs under `names`, in a stable order, each with its relative path."""
    picked: list[tuple[str, list[Found]]] = []
    for name in names:
        if name == "-":
            raise SelectionError("-: standard input cannot be batch-translated; name files or directories", EX_USAGE)
        path = lister.absolute(name)
        kind = lister.kind(path)
        if kind == "dir":
            found = [f for f in lister.files_under(path) if is_log(posixpath.basename(f.path))]
            picked.append((path, found))
        elif kind == "file":
            picked.append((posixpath.dirname(path), [lister.stat(path)]))
        elif WILDCARD.search(name):
            base = WILDCARD.split(path, maxsplit=1)[0].rpartition("/")[0] or "/"
            picked.append((base, [f for f in lister.glob(path) if is_log(posixpath.basename(f.path))]))
        else:
            raise SelectionError(f"{name}: No such file or directory", EX_NOINPUT)
    if not picked:
        return []
    root = posixpath.commonpath([base for base, _ in picked])
    every = [f for _, found in picked for f in sorted(found, key=lambda f: f.path)]
    real: dict[tuple[int, int], Found] = {}  # each real file once: by a name that is no link, if it has one
    for f in every:
        if f.identity is not None and (f.identity not in real or (real[f.identity].link and not f.link)):
            real[f.identity] = f
    seen: dict[str, Input] = {}
    for f in every:
        if f.identity is None or real[f.identity] is f:
            seen.setdefault(f.path, Input(f.path, posixpath.relpath(f.path, root), f.size, f.mtime))
    return list(seen.values())


def check_distinct(inputs: list[Input], fmt: str) -> None:
    """Never two inputs to one output (`x.jsonl` and `x.ndjson.gz` side by side would be)."""
    owners: dict[str, str] = {}
    for item in inputs:
        out = target_name(item.relative, fmt)
        if out in owners:
            raise SelectionError(f"{owners[out]} and {item.path} would both be written to {out}", EX_USAGE)
        owners[out] = item.path
