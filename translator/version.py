"""The versions, kept in one leaf that every module may import (the package face imports the
whole API; nothing below it should import the face for a string).

`CLAUDE_CODE` is the one Claude Code version this package emulates — `caliban-claude --version`,
the init frame's `claude_code_version` (both dialects' shims and `--format claude-code`) and the
telemetry's instrumentation scope — the CLI the newest recordings were made with
(shared reference cc-2.1.333)."""

__version__ = "0.1.0"  # the package's own (pyproject reads it)
CLAUDE_CODE = "2.1.333"
