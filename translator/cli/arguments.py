"""The parser every command line of the package is read with (`translator`, `translator
report`): a refusal is one line, `<prog>: <what>: <why>`, and its sysexits status; help and the
version are written as `stdout_text` writes them."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, NoReturn

from translator.diagnostics import stdout_text
from translator.exits import EX_USAGE

if TYPE_CHECKING:
    from _typeshed import SupportsWrite



class Parser(argparse.ArgumentParser):
    """The command line's parser: a usage error is one line, `<prog>: <what>: <why>`, and 64
    (argparse's own messages have that shape); help and the version are written as
    `stdout_text` writes, so that a full disk is said (74) and a closed pipe is quiet."""

    def error(self, message: str) -> NoReturn:
        self.exit(EX_USAGE, f"{self.prog}: {message}\n")

    def print_help(self, file: SupportsWrite[str] | None = None) -> None:
        if file is not None:
            super().print_help(file)
            return
        self.exit(stdout_text(self.format_help(), self.prog))


class Version(argparse._VersionAction):  # its class, as shtab knows it (an option that ends the line)
    """--version, written as the help is."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: str | None = None) -> NoReturn:
        parser.exit(stdout_text(f"{self.version}\n", parser.prog))
