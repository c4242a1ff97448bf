"""The `translator` command line: its parser and main (command.py), the argument checks
(checks.py), shell completion and the genai-prices card. The only importer of the shells."""

from translator.cli.command import run as run  # the console script's entry point (pyproject)
