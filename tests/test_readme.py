"""The README's examples run as written.

Convention (for everyone who edits the README):
- A block fenced ```sh is a runnable example. Each one is run with `bash -e -o pipefail`
  from the root of a fresh copy of the repository (its tracked files), with the package
  installed (this venv's bin first on PATH), HOME a fresh empty directory, and a timeout of
  TIMEOUT_S; it must exit 0. Processes it leaves in the background are killed after it.
  In that copy `.venv` is this venv, so `make run`/`make test` install nothing, and `make test`
  only collects the tests (PYTEST_ADDOPTS=--collect-only) instead of running the suite within
  itself.
- A block fenced ```python is run with this venv's python, the same way; the library example
  (the first block under "## Use it from Python") must also pass `mypy --strict`.
- Anything that needs what a developer machine or CI lacks (a real caliban, docker, a cluster,
  a remote service) goes in ```text or ```console blocks, which are not run.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import ROOT, tracked_copy

TIMEOUT_S = 120
README = ROOT / "README.md"
BIN = Path(sys.executable).parent


@dataclass(frozen=True)
class Block:
    lang: str
    line: int  # where its fence opens
    section: str  # the heading it sits under
    code: str


def blocks() -> list[Block]:
    text = README.read_text()
    found, section = [], ""
    fence = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```[ \t]*$", re.S | re.M)
    for m in fence.finditer(text):
        headings = re.findall(r"^#+ (.*)$", text[: m.start()], re.M)
        section = headings[-1] if headings else ""
        if m.group(1) in ("sh", "python"):
            found.append(Block(m.group(1), text[: m.start()].count("\n") + 1, section, m.group(2)))
    return found


def run_in_copy(tmp_path: Path, argv: list[str]) -> subprocess.CompletedProcess[bytes]:
    repo, home = tmp_path / "repo", tmp_path / "home"
    repo.mkdir()
    home.mkdir()
    tracked_copy(repo)
    (repo / ".venv").symlink_to(BIN.parent)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MAKE", "MFLAGS", "VIRTUAL_ENV", "PYTEST_"))}
    env |= {"PATH": f"{BIN}{os.pathsep}{env.get('PATH', '')}", "HOME": str(home),
            "PYTEST_ADDOPTS": "--collect-only -q -p no:cacheprovider"}
    proc = subprocess.Popen(argv, cwd=repo, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=TIMEOUT_S)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # whatever the block left running
        proc.wait()
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


BLOCKS = blocks()


@pytest.mark.parametrize("block", BLOCKS, ids=[f"README.md:{b.line}:{b.lang}" for b in BLOCKS])
def test_readme_block_runs(block: Block, tmp_path: Path) -> None:
    script = tmp_path / ("block.sh" if block.lang == "sh" else "block.py")
    script.write_text(block.code)
    argv = ["bash", "-e", "-o", "pipefail", str(script)] if block.lang == "sh" else [sys.executable, str(script)]
    proc = run_in_copy(tmp_path, argv)
    assert proc.returncode == 0, (
        f"README.md:{block.line} ({block.section}) exited {proc.returncode}\n"
        f"--- stdout\n{proc.stdout.decode(errors='replace')[-2000:]}\n--- stderr\n{proc.stderr.decode(errors='replace')[-2000:]}"
    )


def test_the_quick_start_and_the_library_example_are_there_and_run(tmp_path: Path) -> None:
    quick = next(b for b in BLOCKS if b.section == "Quick start" and b.lang == "sh")
    assert "make run" in quick.code and "make test" in quick.code
    (tmp_path / "q").mkdir()
    proc = run_in_copy(tmp_path / "q", ["bash", "-e", "-c", quick.code])
    assert proc.returncode == 0, proc.stderr
    assert b'{"type":"result","subtype":"success","result":"There are 3 files."' in proc.stdout
    assert b"tests/test_cli.py: " in proc.stdout  # make test reached pytest (which only collected)

    library = next(b for b in BLOCKS if b.section == "Use it from Python" and b.lang == "python")
    example = tmp_path / "example.py"
    example.write_text(library.code)
    (tmp_path / "l").mkdir()
    ran = run_in_copy(tmp_path / "l", [sys.executable, str(example)])
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.splitlines()[0] == b"success There are 3 files."
    assert ran.stdout.splitlines()[-1] == b"[]"
    # From the repository's root, where mypy finds the package's source (an editable install's
    # import hook is invisible to it).
    typed = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--cache-dir", os.devnull, str(example)],
                           capture_output=True, timeout=TIMEOUT_S, cwd=ROOT)
    assert typed.returncode == 0, typed.stdout
