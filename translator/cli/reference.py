"""The command-line reference written from the parsers themselves, so that it cannot drift:
docs/cli.md (Markdown) and docs/translator.1 (a man page, through argparse-manpage, which only
the test extra installs). `python -m translator.cli.reference [DIR]` (`make docs`) writes both;
a test fails when the files in docs/ differ from what this writes."""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from translator.cli import report
from translator.cli.parser import build_parser
from translator.shim import flags
from translator.shim.main import DOCS, USAGE
from translator.version import __version__

WIDTH = 100  # of the usage lines; a fixed width, so the page is the same on every terminal


@dataclass
class Section:
    title: str
    text: list[str] = field(default_factory=list)
    rows: list[tuple[str, str, str]] = field(default_factory=list)  # invocation, default, help


class Recorder(argparse.RawDescriptionHelpFormatter):
    """A help formatter that notes what `format_help()` hands it (usage, texts, each group and
    its options) instead of laying it out: argparse has no public list of a parser's options,
    but every parser gives its help to a formatter through these public methods."""

    def __init__(self, prog: str) -> None:
        super().__init__(prog, width=WIDTH)
        self.usage = ""
        self.sections = [Section("")]

    def add_usage(self, usage: str | None, actions: Iterable[argparse.Action],
                  groups: Iterable[argparse._MutuallyExclusiveGroup], prefix: str | None = None) -> None:
        self.usage = self._format_usage(usage, actions, groups, prefix).strip()

    def start_section(self, heading: str | None) -> None:
        self.sections.append(Section(heading or ""))

    def end_section(self) -> None:
        self.sections.append(Section(""))  # what follows a group (the epilog) is outside it

    def add_text(self, text: str | None) -> None:
        if text and text != argparse.SUPPRESS:
            self.sections[-1].text.append(text.strip("\n"))

    def add_arguments(self, actions: Iterable[argparse.Action]) -> None:
        for action in actions:
            if action.help == argparse.SUPPRESS:
                continue
            default = action.default
            shown = "" if default in (None, False, argparse.SUPPRESS) or action.nargs == 0 else f"`{default}`"
            self.sections[-1].rows.append((self.invocation(action), shown, self._expand_help(action) if action.help else ""))

    def invocation(self, action: argparse.Action) -> str:
        """`-o, --output FILE`, as Python 3.13's argparse writes it, whichever Python writes the page."""
        if not action.option_strings:
            return self._format_args(action, action.dest)
        names = ", ".join(action.option_strings)
        return names if action.nargs == 0 else f"{names} {self._format_args(action, action.dest.upper())}"


def recorded(parser: argparse.ArgumentParser) -> Recorder:
    recorder = Recorder(parser.prog)
    parser.formatter_class = lambda prog: recorder
    parser.format_help()
    return recorder


def long_options(parser: argparse.ArgumentParser) -> list[str]:
    """Every long option the help shows."""
    return [name for section in recorded(parser).sections for inv, _, _ in section.rows
            for name in inv.replace(",", " ").split() if name.startswith("--")]


def cell(text: str) -> str:
    """Help text as a table cell: one line, Markdown's own characters taken literally."""
    return re.sub(r"([\\`*_<>\[\]|])", r"\\\1", " ".join(text.split()))


def parser_markdown(parser: argparse.ArgumentParser) -> list[str]:
    rec = recorded(parser)
    out = [f"## `{parser.prog}`", "", "```text", rec.usage, "```", ""]
    for section in rec.sections:
        if not (section.text or section.rows):
            continue
        if section.title:
            out += [f"### {section.title[0].upper()}{section.title[1:]}", ""]
        for text in section.text:
            out += (["```text", text, "```"] if "\n" in text else [text]) + [""]
        if section.rows:
            what = "argument" if section.title == "positional arguments" else "option"
            out += [f"| {what} | default | meaning |", "|---|---|---|"]
            out += [f"| `{inv}` | {default} | {cell(help)} |" for inv, default, help in section.rows]
            out.append("")
    return out


def shim_markdown(usage: str, options: Mapping[str, Sequence[str]]) -> list[str]:
    out = ["## `caliban-claude`", "", "```text", usage.strip("\n"), "```", "",
           "It reads Claude Code's command line as the Agent SDKs write it, tolerantly: an option it does",
           "not know is warned about and skipped (with its value when it evidently has one). What each",
           "option does on caliban: [shim.md](shim.md#supported-and-not-supported). The options it reads:", ""]
    for kind, names in options.items():
        out += [f"- {kind}: " + ", ".join(f"`{n}`" for n in sorted(names, key=str.lower)), ""]
    return out


def markdown(parsers: Sequence[argparse.ArgumentParser], shim_usage: str, shim_flags: Mapping[str, Sequence[str]]) -> str:
    head = ["<!-- Written by `make docs` (python -m translator.cli.reference) from the parsers: do not edit. -->",
            "", "# Command-line reference", "",
            "Every option of the commands, written from their own parsers (`tests/cli/test_cli_reference.py`",
            "fails when this page is not what they say). What the options do, in depth: [usage.md](usage.md);",
            "the same as a man page: [translator.1](translator.1) (`man -l docs/translator.1`).", ""]
    body = [line for p in parsers for line in parser_markdown(p)] + shim_markdown(shim_usage, shim_flags)
    return "\n".join(head + body).rstrip("\n") + "\n"


def manpage(parser: argparse.ArgumentParser, version: str) -> str:
    from argparse_manpage.manpage import Manpage  # the test extra's; only `make docs` and its test need it

    page = Manpage(parser)
    page.date = ""  # no day of writing, so that the page is the same whenever it is written
    page.source = f"caliban-stream-translator {version}"
    page.manual = "User Commands"
    page.description = "translate a coding agent's event stream into stream-json"
    if parser.epilog:  # examples and exit statuses, their lines kept (argparse-manpage would fill them)
        lines = [("\\&" if line[:1] in ".'" else "") + line.replace("\\", "\\\\").replace("-", "\\-")
                 for line in parser.epilog.strip("\n").splitlines()]
        page.add_section("comments", "=", "\n".join([".nf", *lines, ".fi"]))
    page.add_section("see also", "=", "\\fBtranslator report \\-\\-help\\fR, \\fBcaliban\\-claude \\-\\-help\\fR; "
                     "docs/usage.md (every option in depth) and the rest of docs/ in the source tree")
    return str(page)


def write(folder: Path) -> None:
    """docs/cli.md and docs/translator.1, into `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    shim_flags = {"options with a value": sorted(flags.VALUE_FLAGS), "switches": sorted(flags.BOOL_FLAGS),
                  "short forms": [f"{short} ({long})" for short, long in flags.SHORT.items()]}
    # the installed docs' folder as its place under any prefix, not this machine's venv
    usage = USAGE.replace(DOCS, "$PREFIX/share/doc/caliban-stream-translator")
    (folder / "cli.md").write_text(markdown([build_parser(), report.build_parser()], usage, shim_flags))
    (folder / "translator.1").write_text(manpage(build_parser(), __version__))


if __name__ == "__main__":
    write(Path(sys.argv[1] if len(sys.argv) > 1 else "docs"))
