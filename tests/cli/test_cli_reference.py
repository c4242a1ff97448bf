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
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cli.md", "translator.1"]
    for name in ("cli.md", "translator.1"):
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
