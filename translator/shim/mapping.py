"""Claude Code's options → caliban's command line, per run (spec §4).

What caliban has an equivalent for is mapped; what it has not is named in `Plan.warnings`,
so the shim can say so on stderr instead of pretending.
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Mapping
from typing import Any

import msgspec

from translator.shim.flags import ClaudeArgs
from translator.shim.place import Place
from translator.shim.restricting import OWN_SETTINGS, RESTRICTED_TOOLS, restricting

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
# Why the SDK's `agents` do not reach caliban (caliban-tools-builtin agent/agent_tool.rs).
AGENTS = ("SDK agents cannot be passed to caliban: its AgentTool has no named sub-agent types (the model "
          "writes each sub-agent's prompt and tools itself), and a sub-agent's turns are not reported")
IGNORED = {
    "--add-dir": "caliban has no extra directories",
    "--betas": "caliban sends no beta headers",
    "--plugin-dir": "caliban loads its own plugins",
    "--plugin-dir-no-mcp": "caliban loads its own plugins",
    "--thinking": "caliban has no thinking switch",
    "--thinking-display": "caliban has no thinking display option",
    "--max-thinking-tokens": "caliban has no thinking budget flag",
    "--effort": "caliban has no effort level",
    "--task-budget": "caliban has no task budget",
    "--session-mirror": "SDK session stores are not mirrored",
    "--resume-session-at": "caliban resumes whole sessions only",
    "--resume-drops-turn": "caliban resumes whole sessions only",
    "--strict-mcp-config": "caliban always adds its own MCP configuration",
    "--debug-to-stderr": "caliban's --debug writes where caliban writes it",
    "--agents": AGENTS,
    "--agent": "caliban has no named agents to run as",
    "--permission-prompts": "caliban -p asks no permission prompts",
    "--channels": "caliban has no channels",
    "--project-config-root": "caliban finds its own project configuration",
    "--name": "caliban-claude keeps no session titles",
    "--autocompact": "caliban compacts by its own window",
    "--system-prompt-snapshot": "caliban composes its system prompt itself",
    "--exclude-dynamic-system-prompt-sections": "caliban composes its system prompt itself",
    "--brief": "caliban has no SendUserMessage tool",
    "--forward-subagent-text": "caliban reports no sub-agent turns",
    "--prompt-suggestions": "caliban makes no prompt suggestions",
    "--file": "caliban-claude downloads no files",
    "--plugin-url": "caliban loads its own plugins",
    **dict.fromkeys(("--chrome", "--no-chrome", "--ide", "--ax-screen-reader"), "a feature of Claude Code's terminal UI"),
}
# Flags the shim maps (onto caliban's command line, the session, or its own behaviour).
MAPPED = frozenset(
    {
        "--output-format", "--input-format", "--verbose", "--print", "--system-prompt", "--system-prompt-file",
        "--append-system-prompt", "--append-system-prompt-file", "--tools", "--allowedTools", "--disallowedTools",
        "--max-turns", "--max-budget-usd", "--json-schema", "--setting-sources", "--include-partial-messages",
        "--include-hook-events", "--debug", "--debug-file", "--settings", "--managed-settings", "--mcp-config",
        "--model", "--fallback-model", "--permission-mode", "--dangerously-skip-permissions",
        "--allow-dangerously-skip-permissions", "--replay-user-messages", "--resume",
        "--session-id", "--continue", "--fork-session", "--no-session-persistence",
        "--bare", "--restricted", "--safe-mode", "--disable-slash-commands",
        # initialize is read before any run whatever these say: they need nothing more
        "--await-initialize", "--initialize-fields", "--managed-settings-in-initialize",
        "--await-claim",  # (the TS SDK's prewarm: claiming.py)
    }
)  # fmt: skip
SETTINGS_KEPT = ("permissions", "model")
RULE_KINDS = ("allow", "ask", "deny")
MCP_KEYS = ("type", "command", "args", "env", "url", "headers")


class Plan(msgspec.Struct, kw_only=True):
    """The per-conversation part of every caliban command line, and what could not be mapped.
    `initialize` (the SDK's first request) can still change it before the first run."""

    static: list[str] = []
    system: list[str] = []  # caliban's system prompt flags (none: its default)
    keep_system_prompt: bool = False  # an empty SDK prompt keeps caliban's default (an operator's choice)
    prefix: str = ""  # an appended system prompt: caliban has none, it goes before the first message
    overlay: dict[str, Any] = {}  # caliban's --settings overlay
    sdk_servers: list[str] = []  # the app's in-process MCP servers (relayed: tools/)
    json_schema: str | None = None
    model: str | None = None  # caliban's model name (aliases resolved)
    fallback_model: str | None = None
    permission_mode: str = "default"  # as Claude Code names it (reported back to the app)
    partial: bool = False
    replay_user: bool = False
    await_claim: bool = False  # a TS SDK spare (prewarm): parked until claim_session names its folder
    warnings: list[str] = []
    extra: list[str] = []  # CALIBAN_CLAUDE_ARGS: the operator's own caliban flags
    aliases: dict[str, str | None] = {}  # the model aliases (MODEL_ALIASES, CALIBAN_CLAUDE_MODELS's)
    folder: str = "/"  # where the options' relative paths are read from: the session's folder at its start


def model_aliases(env: Mapping[str, str]) -> dict[str, str | None]:
    """MODEL_ALIASES, with the entries of the session's CALIBAN_CLAUDE_MODELS (a bad one: none)."""
    table: dict[str, str | None] = dict(MODEL_ALIASES)
    extra = env.get("CALIBAN_CLAUDE_MODELS")
    if extra:
        try:
            loaded = json.loads(extra)
            if isinstance(loaded, dict):
                table.update({str(k): (str(v) if v is not None else None) for k, v in loaded.items()})
        except ValueError:
            pass
    return table


def model_choices(table: dict[str, str | None]) -> list[dict[str, Any]]:
    """The `models` of the initialize answer, as Claude Code lists them (`supportedModels()`,
    Zed's model picker): the default first, then each alias of `table` (the plan's), with caliban's model."""
    default = table.get("default")
    choices = [{"value": "default", "resolvedModel": default or "caliban's default",
                "displayName": "Default (recommended)",
                "description": f"Use caliban's default model{f' ({default})' if default else ''}"}]  # fmt: skip
    for alias, target in table.items():
        if alias != "default":
            shown = target or "caliban's default"
            choices.append({"value": alias, "resolvedModel": shown, "displayName": alias.capitalize(),
                            "description": f"{alias} on caliban: {shown}"})  # fmt: skip
    return choices


def resolve_model(name: str | None, table: dict[str, str | None]) -> str | None:
    """caliban's model for a Claude Code model name or alias of `table` (None: caliban's default)."""
    if not name:
        return None
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
    `Task`/`Agent` → `AgentTool`; `mcp__server` (all the server's tools) → `mcp__server__*`."""
    name, paren, rest = rule.partition("(")
    name = TOOL_NAMES.get(name.strip(), name.strip())
    if not paren:
        return f"{name}__*" if name.startswith("mcp__") and name.count("__") == 1 else name
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


def load_json(value: str, what: str, warnings: list[str], folder: str) -> Any:
    """A flag value that is JSON or the path of a JSON file (relative: to `folder`)."""
    try:
        if value.lstrip().startswith("{"):
            return json.loads(value)
        with open(os.path.join(folder, value), encoding="utf-8") as fh:
            return json.load(fh)
    except (OSError, ValueError) as exc:
        warnings.append(f"{what}: cannot read {value[:80]!r} ({exc}); ignored")
        return None


def settings_overlay(value: dict[str, Any] | str, what: str, warnings: list[str], p: Plan) -> tuple[dict[str, Any], bool]:
    """Claude Code settings (an object, JSON text or a path) as caliban overlay keys, and
    whether all of it was taken (what was not is warned about); `p`: its folder and aliases."""
    settings = load_json(value, what, warnings, p.folder) if isinstance(value, str) else value
    if not isinstance(settings, dict):
        if settings is not None:
            warnings.append(f"{what}: not a JSON object; ignored")
        return {}, False
    overlay: dict[str, Any] = {}
    dropped = sorted(k for k in settings if k not in SETTINGS_KEPT)
    perms = settings.get("permissions")
    if isinstance(perms, dict):
        dropped += [f"permissions.{k}" for k in perms if k not in RULE_KINDS]
        kept = {
            kind: [convert_rule(r) for r in perms[kind] if isinstance(r, str)]
            for kind in RULE_KINDS
            if isinstance(perms.get(kind), list)
        }
        if kept:
            overlay["permissions"] = kept
    if isinstance(settings.get("model"), str):
        model = resolve_model(settings["model"], p.aliases)
        if model:
            overlay["model"] = model
    if dropped:
        warnings.append(f"{what}: {', '.join(dropped)} not supported by caliban; ignored")
    return overlay, not dropped


def mcp_overlay(servers: dict[str, Any], warnings: list[str], sdk: list[str]) -> tuple[dict[str, Any], bool]:
    """External MCP servers as caliban's `mcp_servers`, and whether every one was taken; the
    names of in-process SDK servers (`type: sdk`, relayed: tools/) are added to `sdk`."""
    found: dict[str, Any] = {}
    complete = True
    for name, server in servers.items():
        if not isinstance(server, dict):
            complete = False
            warnings.append(f"MCP server {name!r}: not an object; skipped")
            continue
        if server.get("type") == "sdk":
            if name not in sdk:
                sdk.append(name)
            continue
        entry = {k: server[k] for k in MCP_KEYS if k in server}
        entry.setdefault("type", "stdio")
        found[name] = entry
    return found, complete


def merge(overlay: dict[str, Any], top: dict[str, Any]) -> None:
    """Add `top` to `overlay`: rule lists and servers are joined, `top`'s model wins."""
    for kind, rules in top.get("permissions", {}).items():
        overlay.setdefault("permissions", {}).setdefault(kind, []).extend(rules)
    if "model" in top:
        overlay["model"] = top["model"]
    if top.get("mcp_servers"):
        overlay.setdefault("mcp_servers", {}).update(top["mcp_servers"])


def system_flags(prompt: str | None, keep_default: bool) -> list[str]:
    """caliban's flags for a Claude Code system prompt ("" is the SDKs' almost empty one)."""
    if prompt:
        return ["--system", prompt]
    if prompt is not None and not keep_default:
        return ["--no-system"]
    return []


def _read_text(path: str, what: str, warnings: list[str], folder: str) -> str:
    try:
        with open(os.path.join(folder, path), encoding="utf-8", errors="replace") as fh:  # (as argv: a bad byte is U+FFFD)
            return fh.read()
    except OSError as exc:
        warnings.append(f"{what}: cannot read {path!r} ({exc.strerror or exc}); ignored")
        return ""


def plan(args: ClaudeArgs, place: Place) -> Plan:
    """The caliban flags that stay the same for every run of this conversation, in the
    session's environment and folder (`place`)."""
    keep_system_prompt = place.env.get("CALIBAN_CLAUDE_KEEP_SYSTEM_PROMPT") == "1"
    p = Plan(keep_system_prompt=keep_system_prompt, aliases=model_aliases(place.env), folder=place.cwd)
    static = p.static
    static += ["-p", "-", "--output-format", "stream-json"]
    if args.get("--system-prompt-file") is not None:
        p.system = ["--system-file", args.values["--system-prompt-file"]]
    else:
        p.system = system_flags(args.get("--system-prompt"), keep_system_prompt)
    p.prefix = args.get("--append-system-prompt") or ""
    if args.get("--append-system-prompt-file"):
        p.prefix = _read_text(args.values["--append-system-prompt-file"], "--append-system-prompt-file", p.warnings,
                              p.folder)  # fmt: skip
    if p.prefix:
        p.warnings.append("--append-system-prompt: caliban has no appended system prompt; it goes before the first message")
    tools = args.get("--tools")
    wanted = {TOOL_NAMES.get(t, t) for t in split_rules(tools or "")}
    if tools == "":
        static.append("--no-tools")
    elif tools is not None and tools != "default":
        static += [a for t in CALIBAN_TOOLS if t not in wanted for a in ("--deny", t)]
    elif "--restricted" in args.flags:
        static += [a for t in RESTRICTED_TOOLS if t not in wanted for a in ("--deny", t)]
    restricting(args, static, p.warnings)
    for rule in split_rules(args.get("--allowedTools") or ""):
        static += ["--allow", convert_rule(rule)]
    for rule in split_rules(args.get("--disallowedTools") or ""):
        static += ["--deny", convert_rule(rule)]
    for flag in ("--max-turns", "--max-budget-usd"):
        if args.get(flag) is not None:
            static += [flag, args.values[flag]]
    p.json_schema = args.get("--json-schema")
    if args.has("--restricted") or args.has("--safe-mode"):
        static += ["--setting-sources", OWN_SETTINGS]
    elif args.get("--setting-sources"):
        static += ["--setting-sources", args.values["--setting-sources"]]
    p.partial = "--include-partial-messages" in args.flags
    if p.partial:
        static.append("--include-partial-messages")
    if "--include-hook-events" in args.flags:
        static.append("--include-hook-events")
    if "--debug" in args.flags:
        static.append("--debug")
    if args.get("--debug-file"):
        static += ["--debug-file", args.values["--debug-file"]]
    if args.get("--settings") is not None:
        merge(p.overlay, settings_overlay(args.values["--settings"], "--settings", p.warnings, p)[0])
    if args.get("--managed-settings") is not None:
        merge(p.overlay, settings_overlay(args.values["--managed-settings"], "--managed-settings", p.warnings, p)[0])
    for value in args.lists.get("--mcp-config", []):
        config = load_json(value, "--mcp-config", p.warnings, p.folder)
        found = config.get("mcpServers") if isinstance(config, dict) else None
        if isinstance(found, dict):
            merge(p.overlay, {"mcp_servers": mcp_overlay(found, p.warnings, p.sdk_servers)[0]})
    p.model = resolve_model(args.get("--model"), p.aliases)
    p.fallback_model = resolve_model(args.get("--fallback-model"), p.aliases)
    p.permission_mode = args.get("--permission-mode") or "default"
    if "--dangerously-skip-permissions" in args.flags:  # Claude Code's older spelling of the mode
        p.permission_mode = "bypassPermissions"
    if p.permission_mode not in PERMISSION_MODES:
        p.warnings.append(f"--permission-mode {p.permission_mode}: unknown; caliban runs in default mode")
    if args.get("--permission-prompt-tool") is not None:
        p.warnings.append(
            "can_use_tool / --permission-prompt-tool cannot be bridged: caliban -p denies tools its rules ask about"
        )
    p.replay_user = "--replay-user-messages" in args.flags
    p.await_claim = "--await-claim" in args.flags
    try:
        p.extra = shlex.split(place.env.get("CALIBAN_CLAUDE_ARGS", ""))
    except ValueError as exc:
        p.warnings.append(f"CALIBAN_CLAUDE_ARGS: {exc}; ignored")
    p.warnings += [f"{flag}: {why}; ignored" for flag, why in IGNORED.items() if args.has(flag)]
    p.warnings += [f"unknown option {u!r} ignored" for u in args.unknown]
    if args.get("--input-format") == "stream-json":
        p.warnings += [f"argument {a!r} ignored: prompts come on stdin, as stream-json" for a in args.positional]
    return p


def run_argv(binary: str, p: Plan, model: str | None, mode: str, session: list[str]) -> list[str]:
    """One run's full caliban command line."""
    argv = [binary, *p.static, *p.system]
    if p.json_schema is not None:
        argv += ["--json-schema", p.json_schema]
    if p.overlay:
        argv += ["--settings", json.dumps(p.overlay, separators=(",", ":"))]
    argv += [*session, *permission_args(mode)]
    if model:
        argv += ["--model", model]
    if p.fallback_model:
        argv += ["--fallback-model", p.fallback_model]
    return argv + p.extra
