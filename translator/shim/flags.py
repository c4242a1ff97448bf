"""The Claude Code command line as the Agent SDKs write it, read tolerantly.

The SDK builds argv from its options (`SubprocessCLITransport._build_command`); newer SDKs add
flags, and `extra_args` passes anything through. So nothing here is fatal: an unknown flag is
noted (the caller warns) and skipped, with its value when it evidently has one.

An argument that is no UTF-8 (Python hands its bytes on as surrogate escapes, which no caliban
pipe or JSON can carry) is read as Claude Code's node reads its argv: each bad byte U+FFFD.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

# Flags that take a value (`--flag value` or `--flag=value`).
VALUE_FLAGS = frozenset(
    {
        "--output-format", "--input-format", "--system-prompt", "--system-prompt-file",
        "--append-system-prompt", "--tools", "--allowedTools", "--allowed-tools", "--max-turns",
        "--max-budget-usd", "--disallowedTools", "--disallowed-tools", "--task-budget", "--model",
        "--fallback-model", "--betas", "--permission-prompt-tool", "--permission-mode", "--resume",
        "--session-id", "--settings", "--add-dir", "--mcp-config", "--resume-session-at",
        "--resume-drops-turn", "--setting-sources", "--plugin-dir", "--thinking",
        "--thinking-display", "--max-thinking-tokens", "--effort", "--json-schema", "--agents",
        "--agent", "--append-system-prompt-file", "--debug-file", "--managed-settings", "--initialize-fields",
        "--permission-prompts", "--channels", "--project-config-root", "--plugin-dir-no-mcp",
        "--name", "--autocompact", "--system-prompt-snapshot", "--file", "--plugin-url", "--environment",
        "--remote-control-session-name-prefix",
    }
)  # fmt: skip
# Flags that may be given more than once (every value kept).
REPEATED = frozenset({"--add-dir", "--plugin-dir", "--plugin-dir-no-mcp", "--mcp-config", "--channels"})
# Flags without a value.
BOOL_FLAGS = frozenset(
    {
        "--verbose", "--continue", "--include-partial-messages", "--include-hook-events",
        "--strict-mcp-config", "--fork-session", "--session-mirror", "--replay-user-messages",
        "--debug-to-stderr", "--print", "--debug", "--dangerously-skip-permissions",
        "--allow-dangerously-skip-permissions", "--no-session-persistence", "--await-initialize",
        "--managed-settings-in-initialize", "--await-claim", "--bare", "--restricted", "--safe-mode", "--disable-slash-commands",
        "--exclude-dynamic-system-prompt-sections", "--brief", "--forward-subagent-text", "--prompt-suggestions",
        # Claude Code's interactive and cloud features (some take an optional value: `--flag=value`)
        "--chrome", "--no-chrome", "--ide", "--ax-screen-reader", "--background", "--desktop", "--tmux",
        "--worktree", "--teleport", "--remote-control", "--cloud", "--from-pr",
    }
)  # fmt: skip
SHORT = {"-p": "--print", "-c": "--continue", "-r": "--resume", "-d": "--debug", "-n": "--name", "-w": "--worktree"}
# Spellings Claude Code accepts for the same option.
CANONICAL = {"--allowed-tools": "--allowedTools", "--disallowed-tools": "--disallowedTools", "--bg": "--background"}


@dataclass
class ClaudeArgs:
    """What the SDK asked for. `values` holds the last value of each value flag; `lists` every
    value of a repeated flag; `flags` the boolean flags given."""

    values: dict[str, str] = field(default_factory=dict)
    lists: dict[str, list[str]] = field(default_factory=dict)
    flags: set[str] = field(default_factory=set)
    unknown: list[str] = field(default_factory=list)  # as given, with their values
    positional: list[str] = field(default_factory=list)

    def get(self, flag: str) -> str | None:
        return self.values.get(flag)

    def has(self, flag: str) -> bool:
        return flag in self.flags or flag in self.values


def parse(argv: list[str]) -> ClaudeArgs:
    """Read `argv` (without the program name). Never raises."""
    argv = [_text(token) for token in argv]
    args = ClaudeArgs()
    i = 0
    while i < len(argv):
        token = argv[i]
        i += 1
        if token == "--":  # the rest are arguments (`--print -- PROMPT`)
            args.positional += argv[i:]
            break
        if not token.startswith("-") or token == "-":
            args.positional.append(token)
            continue
        name, eq, inline = token.partition("=")
        name = CANONICAL.get(SHORT.get(name, name), SHORT.get(name, name))
        if name in VALUE_FLAGS:
            if eq:
                value = inline
            elif i < len(argv):
                value = argv[i]
                i += 1
            else:
                args.unknown.append(token)  # a value flag at the very end: nothing to take
                continue
            args.values[name] = value
            if name in REPEATED:
                args.lists.setdefault(name, []).append(value)
        elif name in BOOL_FLAGS:
            if not eq or inline.lower() not in ("false", "0", "no"):
                args.flags.add(name)
        else:
            # Unknown: `--k=v`, `--k v` (a value does not start with a dash) or `--k`.
            if not eq and i < len(argv) and not argv[i].startswith("-"):
                token = f"{token} {argv[i]}"
                i += 1
            args.unknown.append(token)
    return args


def _text(token: str) -> str:
    """The argument as text: its bytes decoded as UTF-8, a byte that is none U+FFFD."""
    try:
        token.encode()
    except UnicodeEncodeError:
        return os.fsencode(token).decode("utf-8", "replace")
    return token
