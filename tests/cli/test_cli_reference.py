"""docs/cli.md and docs/translator.1 are what the parsers say (`make docs` writes them), and the
hand-written option table of docs/usage.md names every option the parser has."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from support_fixtures import ROOT

from translator.cli import reference
from translator.cli.parser import build_parser

DOCS = ROOT / "docs"


def test_the_reference_and_the_man_page_are_what_the_parsers_say(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "translator.cli.reference", str(tmp_path)],
                          capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["caliban-claude.1", "cli.md", "translator.1"]
    for name in ("cli.md", "translator.1", "caliban-claude.1"):
        assert (tmp_path / name).read_text() == (DOCS / name).read_text(), f"docs/{name} is stale: run `make docs`"


def test_the_reference_holds_every_option_of_every_command() -> None:
    page = (DOCS / "cli.md").read_text()
    assert re.findall(r"^## (.*)$", page, re.M) == ["`translator`", "`translator report`", "`caliban-claude`"]
    options = reference.long_options(build_parser())
    assert {"--format", "--follow", "--listen", "--out-dir", "--cluster", "--print-completion"} <= set(options)
    for option in options:  # in the option column of a table
        assert re.search(rf"^\| `(-\w, )?{option}[ `]", page, re.M), option
    assert "| `--html FILE` |" in page  # translator report's
    assert "`--permission-mode`" in page and "`--replay-user-messages`" in page  # the shim's
    assert "examples:\n  live, in a pipe" in page  # the help's epilog, as it is


def test_a_hidden_option_is_left_out() -> None:
    assert build_parser().parse_args(["--trust-input"]).trust_input  # accepted (and ignored), never shown
    assert "--trust-input" not in (DOCS / "cli.md").read_text()
    assert "--trust-input" not in reference.long_options(build_parser())


def test_the_usage_page_explains_every_option() -> None:
    """The option table of docs/usage.md is written by hand: each option the parser has is in it."""
    usage = (DOCS / "usage.md").read_text()
    table = usage[usage.index("## Options\n"):usage.index("## Exit statuses\n")]
    missing = [option for option in reference.long_options(build_parser()) if f"`{option}" not in table]
    assert missing == []


def sections(page: str) -> dict[str, str]:
    """A man page's sections by their headings."""
    parts = re.split(r"^\.SH (.+)$", page, flags=re.M)
    return {heading.strip('"'): body for heading, body in zip(parts[1::2], parts[2::2], strict=True)}


# An environment variable named in the code: a quoted upper-case name of one of these families.
VARIABLE = re.compile(r'"((?:CALIBAN|TRANSLATOR|CLAUDE|OTEL|ANTHROPIC)_[A-Z0-9_]*[A-Z0-9])"')


def read_by(paths: list[Path]) -> set[str]:
    return {name for path in paths for name in VARIABLE.findall(path.read_text())}


def test_both_man_pages_have_examples_exit_statuses_and_every_variable_their_command_reads() -> None:
    package = ROOT / "translator"
    shim = sorted((package / "shim").rglob("*.py"))
    telemetry = sorted((package / "telemetry").rglob("*.py"))
    command = [p for p in sorted(package.rglob("*.py")) if p not in shim and p.name != "reference.py"]
    for page, reads in (("translator.1", read_by(command)), ("caliban-claude.1", read_by(shim + telemetry))):
        found = sections((DOCS / page).read_text())
        assert {"NAME", "SYNOPSIS", "OPTIONS", "EXAMPLES", "EXIT STATUS", "ENVIRONMENT", "SEE ALSO"} <= set(found), page
        named = set(re.findall(r"[A-Z][A-Z0-9_]{3,}", re.sub(r"\\f[BIRP]", " ", found["ENVIRONMENT"])))
        assert reads and reads - named == set(), page
        assert "COMMENTS" not in found
    assert "translator \\-\\-out\\-dir translated/ logs/" in sections((DOCS / "translator.1").read_text())["EXAMPLES"]
    assert "$CLAUDE_CONFIG_DIR/projects/" in sections((DOCS / "caliban-claude.1").read_text())["FILES"]
