"""--print-completion: shell completion generated from the parser, checked in a real bash."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from support_processes import TRANSLATOR, run


def complete(script: Path, *words: str) -> list[str]:
    """What bash offers for the last of `words` (the command line so far)."""
    line = " ".join(("translator", *words))
    program = f"""
source {script}
COMP_WORDS=(translator {" ".join(repr(w) if w else '""' for w in words)})
COMP_CWORD={len(words)}
COMP_LINE={line!r}
COMP_POINT={len(line)}
_shtab_translator
printf '%s\\n' "${{COMPREPLY[@]}}"
"""
    proc = subprocess.run(["bash", "-c", program], capture_output=True, timeout=30, check=True)
    return proc.stdout.decode().split()


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_bash_completes_options_and_their_values(tmp_path: Path) -> None:
    proc = run("--print-completion", "bash")
    assert proc.returncode == 0 and proc.stderr == b""
    script = tmp_path / "translator.bash"
    script.write_bytes(proc.stdout)
    assert set(complete(script, "--fo")) == {"--format", "--follow", "--force"}
    assert complete(script, "--format", "") == ["enriched", "claude-code"]
    assert complete(script, "--clock", "re") == ["recorded"]
    assert "--print-completion" in complete(script, "--pr")
    assert complete(script, "rep") == ["report"]  # `translator report RESULTS`, read before the parser
    assert complete(script, "fixtures", "rep") == []  # only as the first word


@pytest.mark.parametrize("shell", ["zsh", "tcsh"])
def test_other_shells_get_a_script_naming_every_option(shell: str) -> None:
    proc = run("--print-completion", shell)
    assert proc.returncode == 0
    for option in (b"--format", b"--follow", b"--out-dir", b"--output", b"claude-code"):
        assert option in proc.stdout


def test_an_unknown_shell_is_a_usage_error() -> None:
    proc = run("--print-completion", "fish")
    assert proc.returncode == 64 and proc.stderr.startswith(b"translator: argument --print-completion: invalid choice")


def test_a_completion_script_that_cannot_be_written_is_a_write_error() -> None:
    """A full disk is said in one line with its sysexits status (74), not an internal error."""
    with open("/dev/full", "wb") as full:
        proc = subprocess.run([TRANSLATOR, "--print-completion", "bash"], stdout=full, stderr=subprocess.PIPE, timeout=30)
    assert proc.returncode == 74
    assert proc.stderr == b"translator: write error: No space left on device\n"
