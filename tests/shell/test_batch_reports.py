"""What a batch (--out-dir, --results-table) says on stderr, through the installed command:
errors only with -q; a stderr that goes away costs no file its translation; a warning about no
line once per command, not once per file; progress lines off a terminal for a long batch."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from support_fixtures import run_end, turn
from support_processes import TRANSLATOR, run

FILES = 20


def logs(root: Path, files: int = FILES) -> Path:
    """`files` logs, each a run of a model without a rate with a bad line in it."""
    root.mkdir()
    for n in range(files):
        data = turn(0, f"answer {n}", model="mystery-1") + b"{not json\n" + run_end(turns=1)
        (root / f"s{n:02}.ndjson").write_bytes(data)
    return root


def test_quiet_says_only_errors_in_a_batch(tmp_path: Path) -> None:
    source = logs(tmp_path / "logs", 3)
    loud = run("--out-dir", str(tmp_path / "a"), str(source))
    said = loud.stderr.decode()
    assert loud.returncode == 0 and "invalid JSON" in said and "no rate for model" in said, said
    for mode in (["--out-dir", str(tmp_path / "b")], ["--results-table", str(tmp_path / "t")]):
        quiet = run("-q", *mode, str(source))
        assert (quiet.returncode, quiet.stderr) == (0, b""), (mode, quiet.stderr)
    assert len(list((tmp_path / "b").glob("*.jsonl"))) == 3


def test_a_warning_about_no_line_is_said_once_per_command(tmp_path: Path) -> None:
    """Not once per file (each file's fold warns of its models once)."""
    done = run("--out-dir", str(tmp_path / "out"), "--jobs", "2", str(logs(tmp_path / "logs", 5)))
    said = done.stderr.decode()
    assert said.count("no rate for model 'mystery-1'") == 1, said
    assert said.count("invalid JSON") == 5  # each bad line is its own
    inputs = sorted(str(p) for p in (tmp_path / "logs").iterdir())
    streamed = run(*inputs).stderr.decode()  # one stream after another: each its own fold, one warning
    assert streamed.count("no rate for model 'mystery-1'") == 1 and streamed.count("invalid JSON") == 5, streamed


def test_a_closed_stderr_costs_no_file_its_translation(tmp_path: Path) -> None:
    """`translator --out-dir o logs 2>&1 | head -1`: the reader of stderr goes at once. Every
    file is still translated and the status is the batch's (it was 70, 8 of 20 files done)."""
    out = tmp_path / "out"
    read, write = os.pipe()
    os.close(read)  # nobody will ever read what the batch says
    try:
        proc = subprocess.run([TRANSLATOR, "--out-dir", str(out), "--jobs", "2", str(logs(tmp_path / "logs"))],
                              stdout=subprocess.DEVNULL, stderr=write, timeout=60)
    finally:
        os.close(write)
    assert proc.returncode == 0
    assert len(list(out.glob("*.jsonl"))) == FILES


PROGRESS = re.compile(r"translator: \d+/20 files, \d+\.\d of \d+\.\d MB \(\d+%\) in \d+ s")


@pytest.mark.parametrize("quiet", [False, True])
def test_progress_lines_off_a_terminal(tmp_path: Path, quiet: bool) -> None:
    """A CI job's log sees a long batch move (TRANSLATOR_PROGRESS_SECONDS: how often); -q: none."""
    env = {**os.environ, "TRANSLATOR_PROGRESS_SECONDS": "0.01"}
    proc = subprocess.run([TRANSLATOR, *(["-q"] if quiet else []), "--out-dir", str(tmp_path / "out"), "--jobs", "2",
                           str(logs(tmp_path / "logs"))], env=env, capture_output=True, timeout=60)
    assert proc.returncode == 0
    lines = [x for x in proc.stderr.decode().splitlines() if PROGRESS.fullmatch(x)]
    assert (lines == []) if quiet else len(lines) >= 1, proc.stderr


@pytest.mark.slow
def test_a_cluster_that_cannot_be_reached_leaves_no_folder_behind(tmp_path: Path) -> None:
    """A failed --cluster start (69) makes nothing: not the --out-dir, nor the folders above it."""
    out = tmp_path / "new" / "out"
    proc = run("--out-dir", str(out), "--cluster", "tcp://127.0.0.1:9", str(logs(tmp_path / "logs", 1)), timeout=120)
    assert proc.returncode == 69 and b"cannot connect" in proc.stderr, proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["logs"]
