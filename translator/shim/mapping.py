"""Claude Code's options → caliban's command line, per run (spec §4).

What caliban has an equivalent for is mapped; what it has not is named in `Plan.warnings`,
so the shim can say so on stderr instead of pretending.
"""

from __future__ import annotations

import json
import os
import shlex
from dataclasses import dataclass, field
from typing import Any

from translator.shim.flags import ClaudeArgs

# Claude Code's model aliases; caliban has none. CALIBAN_CLAUDE_MODELS (a JSON object) adds
# or replaces entries, e.g. {"sonnet": "openai/gpt-5"}. "default" drops --model.
MODEL_ALIASES = {
    "sonnet": "claude-sonnet-4-5",
    "opus": "claude-opus-4-1",
    "haiku": "claude-haiku-4-5",
    "default": None,
}
# caliban's built-in tools (crates/caliban-tools*, `fn name`).
CALIBAN_TOOLS = (
    "AgentTool", "Bash", "BashOutput", "Edit", "EnterPlanMode", "ExitPlanMode", "Glob", "Grep",
    "KillShell", "MultiEdit", "NotebookEdit", "Read", "ReadMemoryTopic", "Skill", "TodoWrite",
    "ToolSearch", "WebFetch", "WebSearch", "Write", "WriteMemoryTopic",
)  # fmt: skip
TOOL_NAMES = {"Task": "AgentTool", "Agent": "AgentTool"}  # Claude Code's name → caliban's
# Claude Code's permission modes → caliban's. caliban's dontAsk turns every Ask into Allow,
# Claude Code's denies it, which is caliban's non-interactive default.
PERMISSION_MODES = {
    "default": "default",
    "acceptEdits": "acceptEdits",
    "plan": "plan",
    "auto": "auto",
    "dontAsk": "default",
    "bypassPermissions": "bypassPermissions",
}
# Flags caliban has no equivalent for: warned about, then ignored.
IGNORED = {
    "--append-system-prompt": "caliban has no appended system prompt",
    "--add-dir": "caliban has no extra directories",
    "--betas": "caliban sends no beta headers",
    "--plugin-dir": "caliban loads its own plugins",
    "--thinking": "caliban has no thinking switch",
    "--thinking-display": "caliban has no thinking display option",
    "--max-thinking-tokens": "caliban has no thinking budget flag",
    "--effort": "caliban has no effort level",
    "--task-budget": "caliban has no task budget",
    "--session-mirror": "SDK session stores are not mirrored",
    "--resume-session-at": "caliban resumes whole sessions only",
    "--resume-drops-turn": "caliban resumes whole sessions only",
    "--strict-mcp-config": "caliban always adds its own MCP configuration",
    "--debug-to-stderr": "use caliban's --debug-file instead",
    "--agents": "SDK agents cannot be passed to caliban",
}
SETTINGS_KEPT = ("permissions", "model")
RULE_KINDS = ("allow", "ask", "deny")
MCP_KEYS = ("type", "command", "args", "env", "url", "headers")


@dataclass
class Plan:
    """The per-conversation part of every caliban command line, and what could not be mapped."""

    static: list[str] = field(default_factory=list)
    model: str | None = None  # caliban's model name (aliases resolved)
    fallback_model: str | None = None
    permission_mode: str = "default"  # as Claude Code names it (reported back to the app)
    partial: bool = False
    replay_user: bool = False
    warnings: list[str] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)  # CALIBAN_CLAUDE_ARGS: the operator's own caliban flags


def model_aliases() -> dict[str, str | None]:
    table: dict[str, str | None] = dict(MODEL_ALIASES)
    extra = os.environ.get("CALIBAN_CLAUDE_MODELS")
    if extra:
        try:
            loaded = json.loads(extra)
            if isinstance(loaded, dict):
                table.update({str(k): (str(v) if v is not None else None) for k, v in loaded.items()})
        except ValueError:
            pass
    return table


def resolve_model(name: str | None) -> str | None:
    """caliban's model for a Claude Code model name or alias (None: caliban's default)."""
    if not name:
        return None
    table = model_aliases()
    return table.get(name, name)


def split_rules(csv: str) -> list[str]:
    """Claude Code's comma-separated tool rules, split outside parentheses."""
    rules, depth, start = [], 0, 0
    for i, ch in enumerate(csv):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth = max(0, depth - 1)
        elif ch == "," and depth == 0:
            rules.append(csv[start:i])
            start = i + 1
    rules.append(csv[start:])
    return [r.strip() for r in rules if r.strip()]


def convert_rule(rule: str) -> str:
    """A Claude Code permission rule in caliban's syntax: `Bash(git status:*)` → `Bash(git status*)`;
    `Task`/`Agent` → `AgentTool`."""
    name, paren, rest = rule.partition("(")
    name = TOOL_NAMES.get(name.strip(), name.strip())
    if not paren:
        return name
    pattern = rest[:-1] if rest.endswith(")") else rest
    if pattern.endswith(":*"):
        pattern = pattern[:-2] + "*"
    return f"{name}({pattern})"


def permission_args(mode: str) -> list[str]:
    """caliban's flags for a Claude Code permission mode."""
    caliban = PERMISSION_MODES.get(mode, "default")
    args = ["--permission-mode", caliban]
    if caliban == "bypassPermissions":
        args.append("--allow-dangerously-skip-permissions")  # the app asked for it explicitly
    return args


def _load_json(value: str, what: str, warnings: list[str]) -> Any:
    """A flag value that is JSON or the path of a JSON file."""
    try:
        if value.lstrip().startswith("{"):
            return json.loads(value)
        with open(value, encoding="utf-8") as fh:
            return json.load(fh)
    except (OSError, ValueError) as exc:
        warnings.append(f"{what}: cannot read {value[:80]!r} ({exc}); ignored")
        return None


def _overlay(args: ClaudeArgs, warnings: list[str]) -> dict[str, Any]:
    """`--settings` and external `--mcp-config` servers as one caliban settings overlay."""
    overlay: dict[str, Any] = {}
    raw = args.get("--settings")
    settings = _load_json(raw, "--settings", warnings) if raw is not None else None
    if isinstance(settings, dict):
        dropped = sorted(k for k in settings if k not in SETTINGS_KEPT)
        if dropped:
            warnings.append(f"--settings: {', '.join(dropped)} not supported by caliban; ignored")
        perms = settings.get("permissions")
        if isinstance(perms, dict):
            kept = {
                kind: [convert_rule(r) for r in perms[kind] if isinstance(r, str)]
                for kind in RULE_KINDS
                if isinstance(perms.get(kind), list)
            }
            if kept:
                overlay["permissions"] = kept
        if isinstance(settings.get("model"), str):
            model = resolve_model(settings["model"])
            if model:
                overlay["model"] = model
    servers: dict[str, Any] = {}
    for value in args.lists.get("--mcp-config", []):
        config = _load_json(value, "--mcp-config", warnings)
        found = config.get("mcpServers") if isinstance(config, dict) else None
        for name, server in (found or {}).items() if isinstance(found, dict) else ():
            if not isinstance(server, dict):
                continue
            if server.get("type") == "sdk":
                warnings.append(f"MCP server {name!r}: in-process SDK servers cannot be reached from caliban; skipped")
                continue
            entry = {k: server[k] for k in MCP_KEYS if k in server}
            entry.setdefault("type", "stdio")
            servers[name] = entry
    if servers:
        overlay["mcp_servers"] = servers
    return overlay


def plan(args: ClaudeArgs, keep_system_prompt: bool = False) -> Plan:
    """The caliban flags that stay the same for every run of this conversation."""
    p = Plan()
    static = p.static
    static += ["-p", "-", "--output-format", "stream-json"]
    system = args.get("--system-prompt")
    if args.get("--system-prompt-file") is not None:
        static += ["--system-file", args.values["--system-prompt-file"]]
    elif system:
        static += ["--system", system]
    elif system is not None and not keep_system_prompt:
        static.append("--no-system")  # the SDK's default: Claude Code's almost empty prompt
    tools = args.get("--tools")
    if tools == "":
        static.append("--no-tools")
    elif tools is not None and tools != "default":
        wanted = {TOOL_NAMES.get(t, t) for t in split_rules(tools)}
        static += [a for t in CALIBAN_TOOLS if t not in wanted for a in ("--deny", t)]
    for rule in split_rules(args.get("--allowedTools") or ""):
        static += ["--allow", convert_rule(rule)]
    for rule in split_rules(args.get("--disallowedTools") or ""):
        static += ["--deny", convert_rule(rule)]
    for flag in ("--max-turns", "--max-budget-usd", "--json-schema"):
        if args.get(flag) is not None:
            static += [flag, args.values[flag]]
    if args.get("--setting-sources"):
        static += ["--setting-sources", args.values["--setting-sources"]]
    p.partial = "--include-partial-messages" in args.flags
    if p.partial:
        static.append("--include-partial-messages")
    if "--include-hook-events" in args.flags:
        static.append("--include-hook-events")
    overlay = _overlay(args, p.warnings)
    if overlay:
        static += ["--settings", json.dumps(overlay, separators=(",", ":"))]
    p.model = resolve_model(args.get("--model"))
    p.fallback_model = resolve_model(args.get("--fallback-model"))
    p.permission_mode = args.get("--permission-mode") or "default"
    if p.permission_mode not in PERMISSION_MODES:
        p.warnings.append(f"--permission-mode {p.permission_mode}: unknown; caliban runs in default mode")
    if args.get("--permission-prompt-tool") is not None:
        p.warnings.append(
            "can_use_tool / --permission-prompt-tool cannot be bridged: caliban -p denies tools its rules ask about"
        )
    p.replay_user = "--replay-user-messages" in args.flags
    try:
        p.extra = shlex.split(os.environ.get("CALIBAN_CLAUDE_ARGS", ""))
    except ValueError as exc:
        p.warnings.append(f"CALIBAN_CLAUDE_ARGS: {exc}; ignored")
    p.warnings += [f"{flag}: {why}; ignored" for flag, why in IGNORED.items() if args.has(flag)]
    p.warnings += [f"unknown option {u!r} ignored" for u in args.unknown]
    p.warnings += [f"argument {a!r} ignored: prompts come on stdin, as stream-json" for a in args.positional]
    return p


def run_argv(binary: str, p: Plan, model: str | None, mode: str, session: list[str]) -> list[str]:
    """One run's full caliban command line."""
    argv = [binary, *p.static, *session, *permission_args(mode)]
    if model:
        argv += ["--model", model]
    if p.fallback_model:
        argv += ["--fallback-model", p.fallback_model]
    return argv + p.extra
