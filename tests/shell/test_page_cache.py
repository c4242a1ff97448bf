"""A batch that streams more than the page cache would keep lets go of what it read and wrote
once (local_disk.streamed, _forget), as fincore(1) counts the pages cached: a store told to
forget leaves no page of a log it read or of an output it committed (staged in a chunk, or
alone); a batch smaller than half the memory, through the installed command, keeps them for
the next run. The logs are synced first: only a clean page can be let go of."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from support_fixtures import fleet
from support_processes import run

from translator.shell.local_disk import LocalStore, streamed

FINCORE = shutil.which("fincore")
needs_fincore = pytest.mark.skipif(FINCORE is None, reason="fincore(1) (util-linux) is not installed")
MEMORY = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def cached(paths: list[Path]) -> dict[str, int]:
    """The pages of each file in the page cache, by fincore(1) (mincore(2))."""
    said = subprocess.run([str(FINCORE), "--raw", "--noheadings", "--output", "PAGES,FILE", *map(str, paths)],
                          capture_output=True, check=True, text=True).stdout
    return {file: int(pages) for pages, file in (line.split(maxsplit=1) for line in said.splitlines())}


def logs_in_cache(root: Path, files: int) -> list[Path]:
    """`files` logs on disk and read back in: their pages clean, and cached."""
    sources = sorted(fleet(root, files).rglob("stdout.ndjson"))
    os.sync()
    for source in sources:
        source.read_bytes()
    assert all(pages > 0 for pages in cached(sources).values())
    return sources


def test_a_batch_streams_past_half_the_memory() -> None:
    assert not streamed(0) and not streamed(MEMORY // 2) and streamed(MEMORY // 2 + 1)


@needs_fincore
@pytest.mark.parametrize("forget", [True, False])
def test_a_store_told_to_forget_leaves_no_page_of_what_it_read_or_wrote(tmp_path: Path, forget: bool) -> None:
    sources = logs_in_cache(tmp_path / "logs", 3)
    store, outputs = LocalStore(forget=forget), [tmp_path / "out" / f"{n}.jsonl" for n in range(3)]
    with store.together() as failed:
        for source, output in zip(sources[:2], outputs, strict=False):
            with store.open_input(str(source)) as raw, store.writer(str(output)) as out:
                out.write(raw.read())
    with store.open_input(str(sources[2])) as raw, store.writer(str(outputs[2])) as out:  # alone: synced itself
        out.write(raw.read())
    pages = cached(sources + outputs)
    if forget:
        assert pages == dict.fromkeys(map(str, sources + outputs), 0)
    else:
        assert all(n > 0 for n in pages.values()), pages
    assert failed == {} and [path.read_bytes() for path in outputs] == [path.read_bytes() for path in sources]


@needs_fincore
def test_a_batch_smaller_than_half_the_memory_keeps_its_pages(tmp_path: Path) -> None:
    sources, out = logs_in_cache(tmp_path / "logs", 6), tmp_path / "out"
    proc = run("--out-dir", str(out), str(tmp_path / "logs"), timeout=120)
    assert proc.returncode == 0 and b"6 translated" in proc.stderr, proc.stderr
    assert all(pages > 0 for pages in cached(sources).values())
