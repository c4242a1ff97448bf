"""The session's permission mode and tool rules, applied by the shim before the app is asked:
the drive path runs every run under caliban's default rules and ignores both (spec §4), so a
prompt caliban raises is first settled here, as Claude Code would settle it.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable
from typing import Any, Literal

from translator.shim.mapping import TOOL_NAMES, split_rules

Decision = Literal["allow", "deny", "ask"]
EDITS = frozenset({"Write", "Edit", "MultiEdit", "NotebookEdit"})  # what acceptEdits lets through
# Where a rule's pattern looks in a tool's input (`Bash(git status:*)`, `Write(src/**)`, `WebFetch(domain:x)`).
PATTERN_KEYS = ("command", "file_path", "path", "notebook_path", "url")


class Policy:
    def __init__(self, allowed: str | None, disallowed: str | None) -> None:
        self.allow = [_rule(r) for r in split_rules(allowed or "")]
        self.deny = [_rule(r) for r in split_rules(disallowed or "")]

    def also_deny(self, rules: Iterable[str]) -> None:
        """Rules the SDK sent in `initialize` (the TypeScript SDK's `disallowedTools`)."""
        self.deny += [_rule(r) for r in rules]

    def denies(self, tool: str, tool_input: Any) -> bool:
        """A deny rule takes the call: it wins over every mode and over a hook's allow."""
        return any(_matches(r, tool, tool_input) for r in self.deny)

    def decide(self, mode: str, tool: str, tool_input: Any) -> Decision:
        """Claude Code's order: a deny rule, then the mode, then an allow rule; else ask."""
        if self.denies(tool, tool_input):
            return "deny"
        if mode == "bypassPermissions":
            return "allow"
        if any(_matches(r, tool, tool_input) for r in self.allow):
            return "allow"
        if mode == "acceptEdits" and tool in EDITS:
            return "allow"
        if mode in ("plan", "dontAsk"):
            return "deny"  # plan: nothing that changes anything; dontAsk: what would ask is denied
        return "ask"


def _rule(text: str) -> tuple[str, str | None]:
    name, paren, rest = text.partition("(")
    name = name.strip()
    if not paren:
        return name, None
    pattern = rest[:-1] if rest.endswith(")") else rest
    return name, pattern[:-2] + "*" if pattern.endswith(":*") else pattern


def _matches(rule: tuple[str, str | None], tool: str, tool_input: Any) -> bool:
    name, pattern = rule
    if name.startswith("mcp__") and name != tool:  # Claude Code's `mcp__server` (all its tools), `mcp__server__*`
        return pattern is None and (tool.startswith(f"{name}__") or fnmatch.fnmatchcase(tool, name))
    if TOOL_NAMES.get(name, name) != TOOL_NAMES.get(tool, tool):
        return False
    if pattern is None or pattern in ("", "*"):
        return True
    if not isinstance(tool_input, dict):
        return False
    if pattern.startswith("domain:") and isinstance(tool_input.get("url"), str):
        host = tool_input["url"].split("://", 1)[-1].split("/", 1)[0]
        return fnmatch.fnmatchcase(host, pattern.removeprefix("domain:"))
    values = [tool_input[k] for k in PATTERN_KEYS if isinstance(tool_input.get(k), str)]
    return any(fnmatch.fnmatchcase(v, pattern) for v in values)
