"""Every user error is one line, `translator: <what>: <why>`, with its sysexits status (64
usage, 66 no input, 74 I/O, 78 config), through the installed command; options that make no
sense together are refused."""

from __future__ import annotations

import select
import subprocess
from pathlib import Path

import pytest
from support_fixtures import frames_of
from support_processes import TRANSLATOR, fixture, run

FIXTURE = fixture("thinking")


def one_line_error(proc: subprocess.CompletedProcess[bytes], status: int, message: str) -> None:
    assert proc.returncode == status, proc.stderr
    lines = proc.stderr.decode().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("translator: ") and message in lines[0], lines[0]
    assert proc.stdout == b""


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--listen", "tcp:99999"], "--listen tcp:99999: the port must be 0-65535"),
        (["--listen", "ftp:example"], "--listen ftp:example: expected unix:PATH or tcp:[HOST:]PORT"),
        (["--jobs", "2", FIXTURE], "--jobs: only with --out-dir"),
        (["--force", FIXTURE], "--force: only with --out-dir"),
        (["--from-end", FIXTURE], "--from-end: only with --follow"),
        (["--grace", "1", FIXTURE], "--grace: only with --listen"),
        (["--idle-timeout", "1", FIXTURE], "--idle-timeout: only with --listen"),
        (["--max-connections", "2", FIXTURE], "--max-connections: only with --listen"),
        (["--line-timeout", "2", FIXTURE], "--line-timeout: only with --listen"),
        (["--socket-mode", "644", FIXTURE], "--socket-mode: only with --listen"),
        (["--listen", "tcp:7", "--line-timeout", "0"], "--line-timeout: must be a positive number of seconds"),
        (["--session-id", "", FIXTURE], "--session-id: must not be empty"),
        (["--session-id", "../x", FIXTURE], "--session-id: must be a plain name (letters, digits, '.', '_', '-'), not a path"),
        (["--session-id", "/tmp/x", FIXTURE], "--session-id: must be a plain name"),
        (["--results-only", "--include-partial-messages", FIXTURE], "--include-partial-messages: does not go with --results-only"),
        (["--listen", "tcp:7", "--follow", "x"], "--follow: does not go with --listen"),
        (["--follow", "x", FIXTURE], "--follow: takes no input files"),
        (["--follow", "x", "--exit-status"], "--exit-status: does not go with --follow"),
        (["--listen", "tcp:7", "--exit-status"], "--exit-status: does not go with --listen"),
        (["--out-dir", "o"], "--out-dir: needs input files or directories"),
        (["--out-dir", "o", "--session-id", "S", FIXTURE], "--session-id: does not go with --out-dir"),
        (["--out-dir", "o", "--exit-status", FIXTURE], "--exit-status: does not go with --out-dir"),
        (["--out-dir", "o", "--reject-file", "r", FIXTURE], "--reject-file: does not go with --out-dir"),
        (["--out-dir", "o", "--jobs", "0", FIXTURE], "--jobs: must be at least 1"),
        (["--out-dir", "o", "--cluster", "bogus", FIXTURE],
         "--cluster bogus: expected tcp://HOST:PORT (a Dask scheduler) or local[:N]"),
        (["--results-table", "t", "--cluster", "local:0", FIXTURE], "--cluster local:0: expected tcp://HOST:PORT"),
        (["--output-format", "json", "--follow", "x"], "--output-format json: does not go with --follow"),
        (["--output-format", "json", "--out-dir", "o", FIXTURE], "--output-format json: does not go with --out-dir"),
        (["--results-table", "t", "--format", "claude-code", FIXTURE],
         "--format claude-code: only with --out-dir (--results-table alone writes no frames)"),
        (["--results-table", "t", "--include-partial-messages", FIXTURE],
         "--include-partial-messages: only with --out-dir (--results-table alone writes no frames)"),
        (["--max-line-bytes", "0", FIXTURE], "--max-line-bytes: must be at least 1"),
        (["--listen", "tcp:7", "--idle-timeout", "0"], "--idle-timeout: must be a positive number of seconds"),
        (["--listen", "tcp:7", "--grace", "-1"], "--grace: must not be negative"),
        (["--clock", "sundial", FIXTURE], "argument --clock: invalid choice: 'sundial'"),
        (["--no-such-option"], "unrecognized arguments: --no-such-option"),
    ],
)
def test_usage_errors_are_one_line_and_64(args: list[str], message: str, tmp_path: Path) -> None:
    proc = subprocess.run([TRANSLATOR, *args], cwd=tmp_path, capture_output=True, timeout=30, stdin=subprocess.DEVNULL)
    one_line_error(proc, 64, message)
    assert not (tmp_path / "o").exists()


def test_a_missing_rate_card_says_why_without_python_errno(tmp_path: Path) -> None:
    proc = run("--rates", str(tmp_path / "nonexistent.json"), FIXTURE)
    one_line_error(proc, 78, f"--rates {tmp_path / 'nonexistent.json'}: No such file or directory")
    assert b"Errno" not in proc.stderr
    one_line_error(run("--rates", str(tmp_path), FIXTURE), 78, f"--rates {tmp_path}: Is a directory")


def test_a_directory_as_input_is_no_input_and_the_rest_is_translated(tmp_path: Path) -> None:
    proc = run(str(tmp_path), FIXTURE)
    assert proc.returncode == 66
    assert proc.stderr.decode() == f"translator: {tmp_path}: Is a directory\n"
    assert frames_of(proc.stdout)[-1]["result"] == "17 * 23 = 391."


def test_following_a_directory_is_no_input(tmp_path: Path) -> None:
    one_line_error(run("--follow", str(tmp_path)), 66, f"--follow {tmp_path}: is a directory, not a file")


def test_a_followed_path_that_turns_out_a_directory_is_an_io_error(tmp_path: Path) -> None:
    path = tmp_path / "later"
    proc = subprocess.Popen([TRANSLATOR, "--follow", str(path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stderr is not None and proc.stdout is not None
    if not select.select([proc.stderr], [], [], 30)[0]:
        proc.kill()  # not left behind by a failing test
        raise AssertionError("the follower did not say it waits")
    waiting = f"translator: --follow {path}: No such file or directory (yet); waiting for it\n"
    assert proc.stderr.readline().decode() == waiting  # waiting for the file
    path.mkdir()
    status = proc.wait(timeout=30)
    err = proc.stderr.read().decode()
    assert (status, err) == (74, f"translator: --follow {path}: Is a directory\n")
    assert "write error" not in err and proc.stdout.read() == b""


def test_a_reject_file_that_cannot_be_created_is_73_as_an_output_is(tmp_path: Path) -> None:
    """EX_CANTCREAT, "a user specified output file cannot be created", for both."""
    one_line_error(run("--reject-file", str(tmp_path), FIXTURE), 73, f"--reject-file {tmp_path}: Is a directory")
    missing = str(tmp_path / "no" / "r.jsonl")
    one_line_error(run("--reject-file", missing, FIXTURE), 73, f"--reject-file {missing}: No such file or directory")
    one_line_error(run("-o", missing, FIXTURE), 73, f"--output {missing}: No such file or directory")


def test_control_characters_in_an_excerpt_are_escaped() -> None:
    bad = b"\x1b[2J\x1b[31mred\x07\xc2\x9b\tx"  # ESC, BEL, U+009B (CSI), TAB
    proc = run(stdin=bad + b"\n")
    assert proc.returncode == 0
    (line,) = proc.stderr.splitlines()
    assert line.startswith(b"translator: <stdin>:1: invalid ")
    assert line.endswith(b": \\x1b[2J\\x1b[31mred\\x07\\x9b\\x09x")
    assert not any(c < 0x20 or c == 0x7F for c in line)


def test_rates_genai_prices_without_its_extra_is_69(tmp_path: Path) -> None:
    """A missing extra is 69 (EX_UNAVAILABLE), as every other one (`translator report`,
    --out-dir s3://); it was 78, a bad --rates file's. The package is hidden by a stand-in
    that fails to import, as a missing one does."""
    import os

    hidden = tmp_path / "genai_prices"
    hidden.mkdir()
    (hidden / "__init__.py").write_text("raise ImportError('No module named genai_prices')\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    proc = subprocess.run([TRANSLATOR, "--rates", "genai-prices", FIXTURE], capture_output=True, env=env, timeout=30)
    one_line_error(proc, 69, "--rates genai-prices: needs the prices extra: pip install '.[prices]' "
                             "in the translator's clone")
