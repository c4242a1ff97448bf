"""The examples of the README and of every page of docs/ run as written, and their links resolve.

Convention (for everyone who edits the README or a page in docs/):
- A block fenced ```sh is a runnable example. Each one is run with `bash -e -o pipefail`
  from the root of a fresh copy of the repository (its tracked files), with the package
  installed (this venv's bin first on PATH), HOME a fresh empty directory, and a timeout of
  TIMEOUT_S; it must exit 0. Processes it leaves in the background are killed after it.
  In that copy `.venv` is this venv, so `make run`/`make test` install nothing, and `make test`
  only collects the tests (PYTEST_ADDOPTS=--collect-only) instead of running the suite within
  itself.
- A block fenced ```python is run with this venv's python, the same way; the library examples
  (the first block under the README's "Use it from Python" and the first block of
  docs/library.md) must also pass `mypy --strict`.
- Anything that needs what a developer machine or CI lacks (a real caliban, docker, a cluster,
  a remote service) goes in ```text or ```console blocks, which are not run; the README's
  "Output at a glance" block is the one ```console block checked: its `$ ` command's output is
  the lines under it.
- A relative link, `[text](path)` or `[text](path#anchor)`, names a tracked file, and its
  anchor a heading of that page (as GitHub makes anchors: lower case, punctuation dropped,
  spaces as hyphens).
- A repository path in backticks (`translator/core/fold.py`, `fixtures/caliban/`) is tracked.
- A page has one `# ` title, and each row of a table as many cells as its header (escape a `|`
  in a cell as `\\|`, even inside backticks).
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from support_fixtures import ROOT, tracked_copy

TIMEOUT_S = 120
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BIN = Path(sys.executable).parent
FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```[ \t]*$", re.S | re.M)


@dataclass(frozen=True)
class Block:
    page: str  # relative to the root
    lang: str
    line: int  # where its fence opens
    section: str  # the heading it sits under
    code: str


def prose(text: str) -> str:
    """The page without its fenced blocks (each replaced by as many newlines: line numbers hold)."""
    return FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)


def blocks(page: Path) -> list[Block]:
    text, found = page.read_text(), []
    for m in FENCE.finditer(text):
        headings = re.findall(r"^#+ (.*)$", prose(text[: m.start()]), re.M)
        line = text[: m.start()].count("\n") + 1
        found.append(Block(page.relative_to(ROOT).as_posix(), m.group(1), line, headings[-1] if headings else "", m.group(2)))
    return found


def run_in_copy(tmp_path: Path, argv: list[str], venv_on_path: bool = True) -> subprocess.CompletedProcess[bytes]:
    repo, home = tmp_path / "repo", tmp_path / "home"
    repo.mkdir()
    home.mkdir()
    tracked_copy(repo)
    # The copy shares this venv: were make's marks missing (a venv made by hand), its `make` would
    # reinstall the package into this venv from the copy, a folder deleted after the test, and
    # leave every later test's commands pointing there.
    unmarked = [m for m in (".installed-runtime", ".installed-test") if not (BIN.parent / m).exists()]
    if unmarked:
        pytest.fail(f"{BIN.parent} has no {', '.join(unmarked)}: make it with `make .venv/.installed-test`")
    (repo / ".venv").symlink_to(BIN.parent)
    for name in ("pyproject.toml", "Makefile"):  # older than this venv's install, even when just edited: `make`
        os.utime(repo / name, (0, 0))  # must not reinstall it from the copy, a folder deleted after the test
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MAKE", "MFLAGS", "VIRTUAL_ENV", "PYTEST_"))}
    path = env.get("PATH", "").split(os.pathsep)
    path = [BIN, *path] if venv_on_path else [p for p in path if Path(p) != BIN]  # (a fresh shell's PATH has no venv)
    env |= {"PATH": os.pathsep.join(map(str, path)), "HOME": str(home),
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


ALL = [b for page in PAGES for b in blocks(page)]
RUNNABLE = [b for b in ALL if b.lang in ("sh", "python")]


def test_the_readme_and_the_docs_have_runnable_examples() -> None:
    pages = {b.page for b in RUNNABLE}
    assert "README.md" in pages and len(pages) >= 5, pages


@pytest.mark.parametrize("block", RUNNABLE, ids=[f"{b.page}:{b.line}:{b.lang}" for b in RUNNABLE])
def test_example_block_runs(block: Block, tmp_path: Path) -> None:
    script = tmp_path / ("block.sh" if block.lang == "sh" else "block.py")
    script.write_text(block.code)
    argv = ["bash", "-e", "-o", "pipefail", str(script)] if block.lang == "sh" else [sys.executable, str(script)]
    proc = run_in_copy(tmp_path, argv)
    assert proc.returncode == 0, (
        f"{block.page}:{block.line} ({block.section}) exited {proc.returncode}\n"
        f"--- stdout\n{proc.stdout.decode(errors='replace')[-2000:]}\n--- stderr\n{proc.stderr.decode(errors='replace')[-2000:]}"
    )
    assert left_behind(tmp_path / "repo") == [], f"{block.page}:{block.line}: run in a clone, it leaves untracked files"


def left_behind(repo: Path) -> list[str]:
    """What an example made in the copy that `git status` would show in a clone: files neither
    tracked nor ignored by the clone's .gitignore (the copy's `.venv` link aside)."""
    tracked = set(subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout.decode().split("\0"))
    made = sorted(p.relative_to(repo).as_posix() for p in repo.rglob("*")
                  if (p.is_file() or p.is_symlink()) and p.relative_to(repo).parts[0] != ".venv")
    new = [name for name in made if name not in tracked]
    if not new:
        return []
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    ignored = subprocess.run(["git", "check-ignore", "--no-index", "--stdin"], cwd=repo, input="\n".join(new).encode(),
                             capture_output=True).stdout.decode().splitlines()
    return [name for name in new if name not in ignored]


def library_example(page: str, section: str | None) -> Block:
    return next(b for b in ALL if b.page == page and b.lang == "python" and section in (None, b.section))


def test_the_quick_start_and_the_library_examples_are_there_and_run(tmp_path: Path) -> None:
    quick = next(b for b in ALL if b.page == "README.md" and b.section == "Quick start" and b.lang == "sh")
    assert "make run" in quick.code and "make test" in quick.code
    (tmp_path / "q").mkdir()
    proc = run_in_copy(tmp_path / "q", ["bash", "-e", "-c", quick.code], venv_on_path=False)  # its own PATH step
    assert proc.returncode == 0, proc.stderr
    assert b'{"type":"result","subtype":"success","result":"There are 3 files."' in proc.stdout
    assert b"tests/cli/test_cli.py: " in proc.stdout  # make test reached pytest (which only collected)
    assert b"\ntranslator " in proc.stdout  # `translator --version`, found on the PATH the quick start sets

    for n, (library, last) in enumerate([(library_example("README.md", "Use it from Python"), None),
                                         (library_example("docs/library.md", None), b"[]")]):
        example = tmp_path / f"example{n}.py"
        example.write_text(library.code)
        (tmp_path / f"l{n}").mkdir()
        ran = run_in_copy(tmp_path / f"l{n}", [sys.executable, str(example)])
        assert ran.returncode == 0, ran.stderr
        assert ran.stdout.splitlines()[0] == b"success There are 3 files."
        assert last is None or ran.stdout.splitlines()[-1] == last
        # From the repository's root, where mypy finds the package's source (an editable install's
        # import hook is invisible to it).
        typed = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--cache-dir", os.devnull, str(example)],
                               capture_output=True, timeout=TIMEOUT_S, cwd=ROOT)
        assert typed.returncode == 0, typed.stdout


def test_the_readmes_output_at_a_glance_is_what_the_command_prints(tmp_path: Path) -> None:
    shown = next(b for b in ALL if b.page == "README.md" and b.section == "Output at a glance" and b.lang == "console")
    command, *output = shown.code.splitlines()
    assert command.startswith("$ translator ") and len(output) >= 3
    proc = run_in_copy(tmp_path, shlex.split(command.removeprefix("$ ")))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.decode().splitlines() == output


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    found, seen = set(), dict[str, int]()
    for heading in re.findall(r"^#+ (.*)$", prose(page.read_text()), re.M):
        base = slug(heading)
        n = seen[base] = seen.get(base, -1) + 1
        found.add(f"{base}-{n}" if n else base)  # a repeated heading gets -1, -2, ...
    return found


def links(page: Path) -> list[tuple[int, str]]:
    text = re.sub(r"`[^`\n]*`", "", prose(page.read_text()))  # inline code is not a link
    return [(text[: m.start()].count("\n") + 1, m.group(1)) for m in re.finditer(r"\]\(([^)\s]+)\)", text)]


def test_every_relative_link_resolves() -> None:
    tracked = set(subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split())
    broken, checked = [], 0
    for page in PAGES:
        for line, target in links(page):
            if re.match(r"[a-z]+:", target):
                continue  # a URL
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            where = f"{page.relative_to(ROOT)}:{line}: {target}"
            checked += 1
            if path and (not dest.is_relative_to(ROOT) or dest.relative_to(ROOT).as_posix() not in tracked):
                broken.append(f"{where} (no such tracked file)")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                broken.append(f"{where} (no such heading)")
    assert checked > 20
    assert not broken, "\n".join(broken)


def test_every_path_the_pages_name_is_there() -> None:
    """A file or folder of the repository named in backticks (`translator/core/fold.py`,
    `fixtures/caliban/`) is tracked: a move that leaves a page behind fails here. A last part
    `X` stands for any name in its folder."""
    files = set(subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split())
    folders = {str(Path(f).parents[i]) for f in files for i in range(len(Path(f).parts) - 1)}
    missing, named = [], 0
    for page in PAGES:
        for path in re.findall(r"`((?:translator|tests|bench|fixtures|deploy|docs)/[^`\s]*)`", page.read_text()):
            named += 1
            path = path.removesuffix("/X").rstrip("/")
            if path not in files and path not in folders:
                missing.append(f"{page.relative_to(ROOT)}: {path}")
    assert named > 50
    assert not missing, "\n".join(missing)


def test_every_page_has_one_title_and_its_tables_are_whole() -> None:
    """One `# ` heading a page; each row of a table has as many cells as its header (a `|` in a
    cell must be escaped, `\\|`, even inside backticks, or the row splits)."""
    wrong = []
    for page in PAGES:
        lines = prose(page.read_text()).split("\n")
        if sum(line.startswith("# ") for line in lines) != 1:
            wrong.append(f"{page.relative_to(ROOT)}: not one title")
        cells = 0
        for n, line in enumerate(lines):
            count = len(re.findall(r"(?<!\\)\|", line)) if line.startswith("|") else 0
            if count and n + 1 < len(lines) and re.fullmatch(r"\|(\s*:?-+:?\s*\|)+\s*", lines[n + 1]):
                cells = count  # a header, the delimiter row under it
            elif count and count != cells:
                wrong.append(f"{page.relative_to(ROOT)}:{n + 1}: {count - 1} cells where the header has {cells - 1}")
    assert not wrong, "\n".join(wrong)
