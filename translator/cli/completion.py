"""`--print-completion SHELL`: a shell completion script generated from the parser itself
(shtab), so it never lags behind the options. Imported only when asked for: shtab takes
~35 ms to import."""

from __future__ import annotations

import argparse

SHELLS = ("bash", "zsh", "tcsh")
FILES = ("follow", "rates", "reject_file", "output", "results_table")
DIRECTORIES = ("out_dir",)


def script(parser: argparse.ArgumentParser, shell: str) -> str:
    import shtab

    for action in parser._actions:  # reach-in: argparse lists its actions nowhere public
        if action.dest == "files":  # or `report`, a first word the parser never sees (bash)
            setattr(action, "complete", {**shtab.FILE, "bash": "_translator_files_or_report"})  # noqa: B010
        elif action.dest in FILES:
            setattr(action, "complete", shtab.FILE)  # noqa: B010 (shtab reads this attribute)
        elif action.dest in DIRECTORIES:
            setattr(action, "complete", shtab.DIRECTORY)  # noqa: B010
    return shtab.complete(parser, shell, preamble=REPORT_BASH if shell == "bash" else "")


# `report` as the first word, else files (called with the word typed so far)
REPORT_BASH = """_translator_files_or_report() {
  [ "$COMP_CWORD" = 1 ] && compgen -W report -- "$1"
  compgen -f -- "$1"
}"""
