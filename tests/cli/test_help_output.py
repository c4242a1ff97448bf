"""Help, version, completion and `translator report` text follow the data path's rules for
stdout: a full disk (or a closed stdout) is one line and 74, never a silent 0 (nor an internal
error); a reader that has gone ends it quietly (0). Both commands, real processes and fds."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from support_fixtures import events
from support_processes import TRANSLATOR

from translator import __version__

SHIM = str(Path(sys.executable).with_name("caliban-claude"))
COMMANDS = [
    [TRANSLATOR, "--help"], [TRANSLATOR, "-h"], [TRANSLATOR, "--version"], [TRANSLATOR, "--print-completion", "zsh"],
    [TRANSLATOR, "report", "--help"], [SHIM, "--help"], [SHIM, "--version"],
]
IDS = [" ".join(Path(c[0]).name if i == 0 else c[i] for i in range(len(c))) for c in COMMANDS]


def prog(command: list[str]) -> str:
    return "caliban-claude" if command[0] == SHIM else "translator report" if "report" in command else "translator"


@pytest.mark.parametrize("command", COMMANDS, ids=IDS)
def test_into_a_full_disk_is_a_write_error(command: list[str]) -> None:
    with open("/dev/full", "wb") as full:
        proc = subprocess.run(command, stdout=full, stderr=subprocess.PIPE, timeout=30)
    assert (proc.returncode, proc.stderr.decode()) == (74, f"{prog(command)}: write error: No space left on device\n")


@pytest.mark.parametrize("command", COMMANDS, ids=IDS)
def test_into_a_closed_stdout_is_a_write_error(command: list[str]) -> None:
    proc = subprocess.run(["sh", "-c", 'exec "$@" >&-', "sh", *command], capture_output=True, timeout=30)
    assert (proc.returncode, proc.stderr.decode()) == (74, f"{prog(command)}: write error: Bad file descriptor\n")


@pytest.mark.parametrize("command", COMMANDS, ids=IDS)
def test_into_a_pipe_whose_reader_has_gone_ends_quietly(command: list[str]) -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)  # every write is EPIPE
    try:
        proc = subprocess.run(command, stdout=write_end, stderr=subprocess.PIPE, timeout=30)
    finally:
        os.close(write_end)
    assert (proc.returncode, proc.stderr) == (0, b"")


@pytest.mark.parametrize("command", COMMANDS, ids=IDS)
def test_into_a_pipe_it_is_written_whole(command: list[str]) -> None:
    proc = subprocess.run(command, capture_output=True, timeout=30)
    assert (proc.returncode, proc.stderr) == (0, b"")
    if "--version" in command:
        assert proc.stdout.decode().endswith(f"{__version__})\n" if command[0] == SHIM else f"translator {__version__}\n")
    else:
        assert proc.stdout.endswith(b"\n") and len(proc.stdout) > 200


def test_the_report_s_text_follows_the_same_rules(tmp_path: Path) -> None:
    """It was an internal error (70) into a full disk and a closed pipe, and 0, unsaid, into
    a closed stdout."""
    pytest.importorskip("pyarrow")
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "a.ndjson").write_bytes(events("thinking"))
    table = str(tmp_path / "table")
    assert subprocess.run([TRANSLATOR, "--results-table", table, str(tmp_path / "logs")], capture_output=True,
                          timeout=120).returncode == 0
    report = [TRANSLATOR, "report", table]
    test_into_a_full_disk_is_a_write_error(report)
    test_into_a_closed_stdout_is_a_write_error(report)
    test_into_a_pipe_whose_reader_has_gone_ends_quietly(report)
    assert subprocess.run(report, capture_output=True, timeout=60).stdout.startswith(b"1 runs in 1 logs (1 sessions), 0 failed")


def test_the_report_s_errors_never_go_to_stdout(tmp_path: Path) -> None:
    """Started without stderr (`2>&-`: Python has no sys.stderr), its one-line errors were
    printed to stdout (print(file=None)), where its text goes."""
    pytest.importorskip("pyarrow")
    (tmp_path / "empty").mkdir()
    for results in (tmp_path / "missing", tmp_path / "empty"):
        proc = subprocess.run(["sh", "-c", 'exec "$@" 2>&-', "sh", TRANSLATOR, "report", str(results)],
                              capture_output=True, timeout=60)
        assert (proc.returncode, proc.stdout) == (66, b"")
