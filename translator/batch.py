"""`--out-dir DIR`: batch replay of saved logs, one output per input, in parallel.

Inputs are files, or directories searched for `*.ndjson` / `*.jsonl` (optionally `.gz`). Each
is translated by the same core and encoders as a stream, in a pool of worker processes (one per
core by default), into `DIR/<relative path>.<format>.jsonl`, written to a temporary file and
renamed into place, so a crash never leaves half an output. An output newer than its input is
skipped unless forced. The session id (and, for Claude Code, every frame's uuid and timestamp)
derives from the input's relative path and modification time, so a rerun gives the same bytes.
"""

from __future__ import annotations

import gzip
import itertools
import os
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, replace
from pathlib import Path
from typing import BinaryIO

from tqdm import tqdm

from translator.diagnostics import stderr
from translator.encoders import Encoder
from translator.encoders.claude_code import ClaudeCodeEncoder
from translator.encoders.enriched import EnrichedEncoder
from translator.fold import ESTIMATED, Options, Translator
from translator.rates import RateCard

CHUNK = 1 << 20
SUFFIXES = (".ndjson", ".jsonl")
FORMATS = ("enriched", "claude-code")
NAMESPACE = uuid.UUID("7b7c2f0e-49a1-4b5e-9c1d-0c6a1e5d2b49")  # this tool's uuid5 namespace


@dataclass(frozen=True)
class Job:
    """One file to translate, with everything a worker process needs."""

    format: str
    partial: bool
    results_only: bool
    rates: RateCard
    options: Options
    clock: str
    source: Path = Path()
    relative: str = ""
    target: Path = Path()


@dataclass
class Done:
    relative: str
    size: int
    diagnostics: list[str]
    error: str | None = None  # why the file failed
    data_error: bool = False  # it failed on its content, not on I/O


def inputs(paths: list[str]) -> Iterator[tuple[Path, str]]:
    """(file, name relative to what was named) for every log under `paths`."""
    for name in paths:
        path = Path(name)
        if path.is_dir():
            for found in sorted(path.rglob("*")):
                if found.is_file() and is_log(found.name):
                    yield found, found.relative_to(path).as_posix()
        else:
            yield path, path.name


def is_log(name: str) -> bool:
    bare = name.removesuffix(".gz")
    return bare.endswith(SUFFIXES) and not any(bare.endswith(f".{fmt}.jsonl") for fmt in FORMATS)


def target(out_dir: Path, relative: str, fmt: str) -> Path:
    stem = relative.removesuffix(".gz")
    for suffix in SUFFIXES:
        stem = stem.removesuffix(suffix)
    return out_dir / f"{stem}.{fmt}.jsonl"


def session_id(relative: str) -> str:
    return str(uuid.uuid5(NAMESPACE, relative))


def counter_ids(session: str) -> Callable[[], str]:
    """Deterministic frame uuids: the nth of a session is uuid5(session, n)."""
    base = uuid.UUID(session)
    numbers = itertools.count()
    return lambda: str(uuid.uuid5(base, str(next(numbers))))


def make_encoder(job: Job, session: str) -> Encoder:
    if job.format == "claude-code":
        return ClaudeCodeEncoder(
            [], session_id=session, partial=job.partial, results_only=job.results_only,
            limits=job.rates.limits, new_id=counter_ids(session),
        )
    return EnrichedEncoder([], session_id=session, partial=job.partial, results_only=job.results_only)


def open_input(path: Path) -> BinaryIO:
    return gzip.open(path, "rb") if path.name.endswith(".gz") else open(path, "rb")  # type: ignore[return-value]


def translate_file(job: Job) -> Done:
    """Translate one file (in a worker process). Time is the file's own: the estimated clock
    unless its events are stamped, and its modification time for the frames' timestamps."""
    session = session_id(job.relative)
    size = job.source.stat().st_size
    options = replace(job.options, epoch=job.source.stat().st_mtime)
    if job.clock == "auto":
        options = replace(options, clock=ESTIMATED, detect_recorded=True)
    else:
        options = replace(options, clock=job.clock)
    core = Translator(make_encoder(job, session), rates=job.rates, options=options, source=str(job.source))
    job.target.parent.mkdir(parents=True, exist_ok=True)
    tmp = job.target.with_name(f".{job.target.name}.{os.getpid()}.tmp")
    diagnostics: list[str] = []
    try:
        with open_input(job.source) as src, open(tmp, "wb") as out:
            while chunk := src.read(CHUNK):
                core.feed(chunk, 0.0)
                out.write(core.take_output())
                diagnostics += core.take_diagnostics()
                if core.stopped:
                    break
            core.end(0.0)
            out.write(core.take_output())
            diagnostics += core.take_diagnostics()
            out.flush()
            os.fsync(out.fileno())
        if core.bad_lines and job.options.stop_on_invalid:
            tmp.unlink()
            return Done(job.relative, size, diagnostics, "rejected: --on-invalid fail", data_error=True)
        os.replace(tmp, job.target)
        return Done(job.relative, size, diagnostics)
    except (OSError, EOFError) as exc:
        tmp.unlink(missing_ok=True)
        bad_gzip = isinstance(exc, (EOFError, gzip.BadGzipFile))
        return Done(job.relative, size, diagnostics, str(exc) or type(exc).__name__, data_error=bad_gzip)


def run(paths: list[str], out_dir: str, jobs: int, force: bool, template: Job) -> int:
    """Translate everything under `paths` as `template` says (its paths are filled in per
    file); the exit status: 0, 65 a file's content failed, 74 a file could not be read or
    written."""
    out = Path(out_dir)
    todo: list[Job] = []
    skipped = 0
    for source, relative in inputs(paths):
        dest = target(out, relative, template.format)
        if not force and dest.exists() and dest.stat().st_mtime >= source.stat().st_mtime:
            skipped += 1
            continue
        todo.append(replace(template, source=source, relative=relative, target=dest))
    total = sum(job.source.stat().st_size for job in todo)
    failed: list[Done] = []
    started = time.monotonic()
    bar = tqdm(total=total, unit="B", unit_scale=True, unit_divisor=1024, file=sys.stderr,
               disable=not sys.stderr.isatty(), desc=f"0/{len(todo)} files")
    with bar, ProcessPoolExecutor(max_workers=max(1, min(jobs, len(todo) or 1))) as pool:
        futures = [pool.submit(translate_file, job) for job in todo]
        for count, future in enumerate(as_completed(futures), 1):
            done = future.result()
            for line in done.diagnostics:
                bar.write(line, file=sys.stderr)
            if done.error is not None:
                failed.append(done)
            bar.set_description(f"{count}/{len(todo)} files")
            bar.update(done.size)
    elapsed = time.monotonic() - started
    stderr(
        [f"translator: {len(todo) - len(failed)} translated, {skipped} skipped (up to date), "
         f"{len(failed)} failed; {total / 1e6:.1f} MB in {elapsed:.2f} s"]
        + [f"translator: failed: {d.relative}: {d.error}" for d in failed]
    )
    if any(not d.data_error for d in failed):
        return 74
    return 65 if failed else 0
