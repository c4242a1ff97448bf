"""Started with a standard stream closed (`<&-`, `>&-`, `2>&-`), the command keeps its number
from the files it opens (translator/stdio.py): an output file never becomes stdin, a reject
file never becomes stdout. What it says about the closed stream is what it always said: a
closed stdin cannot be read (66, the other inputs are translated), a closed stdout is a write
error (74). Real processes and fds."""

from __future__ import annotations

import subprocess
from pathlib import Path

from support_fixtures import events, frames_of
from support_processes import TRANSLATOR, fixture


def sh(redirects: str, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["sh", "-c", f'exec "$@" {redirects}', "sh", TRANSLATOR, *args], capture_output=True,
                          timeout=60)


def test_an_output_file_is_not_read_as_a_closed_stdin(tmp_path: Path) -> None:
    """`-o FILE <&-`: FILE took fd 0, and reading `-` failed on it (74, `read error`); now the
    named input is translated into FILE and stdin is said as closed."""
    out = tmp_path / "out.jsonl"
    proc = sh("<&-", "--results-only", "-o", str(out), fixture("tool_use_two_turns"), "-")
    assert (proc.returncode, proc.stderr, proc.stdout) == (66, b"translator: <stdin>: Bad file descriptor\n", b"")
    assert [f["result"] for f in frames_of(out.read_bytes())] == ["There are 3 files."]


def test_the_frames_do_not_go_into_the_reject_file_when_stdout_is_closed(tmp_path: Path) -> None:
    """`>&-`: the reject file took fd 1, and every frame went into it, exit 0."""
    source = tmp_path / "in.ndjson"
    source.write_bytes(events("tool_use_two_turns") + b"not json\n")
    rejects = tmp_path / "rejects.ndjson"
    proc = sh(">&-", "--reject-file", str(rejects), str(source))
    assert proc.returncode == 74
    assert proc.stderr.decode().splitlines()[-1] == "translator: write error: Bad file descriptor"
    assert rejects.read_bytes() == b"not json\n"


def test_all_three_closed_is_still_said_as_before() -> None:
    """Nothing can be said (stderr closed), nothing read or written: 66 for the closed stdin
    comes after the output's write error (74), which wins."""
    assert sh("<&- >&- 2>&-", fixture("thinking"), "-").returncode == 74
    assert sh("<&- 2>&-").returncode == 66


def test_a_closed_stdin_named_as_a_path_is_still_not_there() -> None:
    """`/dev/stdin <&-` (or /dev/fd/0, /proc/self/fd/0) would open the stand-in, /dev/null, and
    read as an empty input (exit 0, unsaid); it is what it was before the stand-in: missing."""
    for name in ("/dev/stdin", "/dev/fd/0", "/proc/self/fd/0"):
        proc = sh("<&-", name, fixture("thinking"))
        assert (proc.returncode, proc.stderr.decode()) == (66, f"translator: {name}: No such file or directory\n")
        assert [f["result"] for f in frames_of(proc.stdout) if f["type"] == "result"] == ["17 * 23 = 391."]
    assert sh("</dev/null", "/dev/stdin").returncode == 0  # an open stdin is read as ever


def test_a_closed_stdout_named_as_the_output_file_is_not_there() -> None:
    """`-o /dev/stdout >&-` wrote every frame into the stand-in, /dev/null: exit 0, nothing
    anywhere. It cannot be created, as any output file that is not there (73)."""
    for name in ("/dev/stdout", "/dev/fd/1"):
        proc = sh(">&-", "-o", name, fixture("thinking"))
        assert (proc.returncode, proc.stderr.decode()) == (73, f"translator: --output {name}: No such file or directory\n")


def test_an_output_file_that_is_a_symbolic_link_is_written_through(tmp_path: Path) -> None:
    """`-o LINK` replaced the link itself with a regular file (its target untouched): as root,
    `-o /dev/stdout > FILE` replaced /dev/stdout, and FILE stayed empty. A link is written
    through, in place, as a shell redirection does."""
    target, link = tmp_path / "target.jsonl", tmp_path / "link.jsonl"
    target.write_bytes(b"old\n")
    link.symlink_to(target)
    stdout = tmp_path / "stdout"
    stdout.symlink_to("/proc/self/fd/1")  # as /dev/stdout is
    for name in (link, stdout):
        with open(tmp_path / "redirected.jsonl", "wb") as redirected:
            proc = subprocess.run([TRANSLATOR, "-o", str(name), fixture("thinking")], stdout=redirected,
                                  stderr=subprocess.PIPE, timeout=60)
        assert (proc.returncode, proc.stderr, name.is_symlink()) == (0, b"", True)
    assert frames_of(target.read_bytes())[-1]["result"] == "17 * 23 = 391."
    assert frames_of((tmp_path / "redirected.jsonl").read_bytes())[-1]["result"] == "17 * 23 = 391."
