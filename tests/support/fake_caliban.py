#!/usr/bin/env python3
"""A fake `caliban` for the shim's tests: caliban's real headless command line, stdin rules,
output, signals and exit codes (caliban-ai/caliban f33a2d0: `caliban/src/args.rs`,
`startup/drivers.rs`, `headless/mod.rs`), replaying recorded headless stream-json.

Environment:
- FAKE_CALIBAN_LOG: a file; each invocation appends `{"argv": [...], "stdin": "...", "pid": n,
  "system": text, "cwd": its working directory}` (`system`: `--system`'s text or `--system-file`'s contents, read as caliban reads
  it at start: one that cannot be read is exit 1).
- FAKE_CALIBAN_SCRIPTS: a JSON list, used in turn per invocation (round robin): each
  `{"file": path, "pause_after": n?, "exit_after": n?, "exit": status?, "stderr": text?,
  "ignore_sigint": bool?}` — replay `file`; after `pause_after` lines wait for a signal (up to
  30 s); after `exit_after` lines exit with `exit` without a result (a crash); write `stderr`
  first; a stuck caliban ignores SIGINT.
- Hostile ones (issue 23), in the same script: `"ignore_sigterm": true` (only SIGKILL ends it);
  `"orphan": path` — start a child in caliban's process group that holds its stdout and stderr
  and sleeps 60 s (a tool's subprocess, an MCP server), its pid written to `path`, and leave it
  behind; `"flood_stdout": n` — n bytes of stdout with no newline, first; `"flood_stderr": n` —
  n bytes of stderr in 100-byte lines, first; `"long_stderr": n` — one stderr line of n bytes.

`{"mcp_calls": [...], "text": ...}` in place of `file`: a run that calls the MCP servers of its
`--settings` (tests/support/fake_caliban_mcp.py, caliban's MCP client); with `"parallel": true`,
the turn's calls side by side.

`caliban [GLOBAL FLAGS] mcp serve` is tests/support/fake_caliban_serve.py's (ADR 0055); with
FAKE_CALIBAN_NO_SERVE set it is a caliban from before the drive surface (clap: exit 2).

Run as a program: `python fake_caliban.py ARGS...`. `check(argv)` is the strict parser alone.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

# clap's table for the headless flags (`Args` in args.rs). Value flags:
VALUE = {
    "--prompt", "--output-format", "--input-format", "--max-budget-usd", "--json-schema",
    "--resume", "--fallback-model", "--permission-prompt-tool", "--provider", "--model",
    "--max-tokens", "--max-turns", "--temperature", "--workspace", "--sandbox-network",
    "--session", "--sessions-dir", "--system", "--system-file", "--debug-file",
    "--max-attach-bytes", "--attach-budget-bytes", "--parallel-tool-limit", "--mcp-oauth-port",
    "--permission-mode", "--config", "--bg", "--settings", "--setting-sources",
}  # fmt: skip
REPEATABLE = {"--allow", "--deny", "--ask"}
# Booleans: `--x` or `--x=true|false` (require_equals: `--x true` is not the flag's value).
BOOL = {
    "--no-auto-print", "--bare", "--include-partial-messages", "--include-hook-events",
    "--include-tool-dispatch-events", "--replay-user-messages", "--continue",
    "--max-tokens-recovery", "--no-tools", "--restrict-paths", "--no-restrict-paths", "--quiet",
    "--no-save", "--no-system", "--debug", "--verbose", "--no-prompt-cache", "--no-parallel-tools",
    "--no-skills", "--no-mcp", "--no-plugins", "--no-permissions", "--auto-allow",
    "--allow-dangerously-skip-permissions", "--disable-auto-mode", "--no-sub-agent", "--no-hooks",
}  # fmt: skip
SHORT = {"-p": "--print", "-c": "--continue", "-r": "--resume"}
ENUMS = {
    "--output-format": {"text", "json", "stream-json"},
    "--input-format": {"text", "stream-json"},
    "--provider": {"anthropic", "openai", "ollama", "google"},
    "--sandbox-network": {"deny", "allow"},
    "--permission-mode": {"default", "acceptEdits", "plan", "auto", "dontAsk", "bypassPermissions"},
}
NUMBERS = {"--max-turns": int, "--max-tokens": int, "--max-budget-usd": float}
CONFLICTS = [
    ("--system", "--system-file"), ("--system", "--no-system"), ("--system-file", "--no-system"),
    ("--restrict-paths", "--no-restrict-paths"), ("--no-permissions", "--allow"),
    ("--no-permissions", "--deny"), ("--no-permissions", "--ask"), ("--no-permissions", "--auto-allow"),
]  # fmt: skip
EXIT = {"success": 0, "error": 1, "max_tokens": 1, "max_turns": 75, "budget_exceeded": 137, "cancelled": 124}


class Usage(Exception):
    """A command line clap rejects (caliban exits 2)."""


def check(argv: list[str]) -> dict[str, Any]:
    """caliban's command line, parsed the way clap would; raises Usage where clap fails."""
    got: dict[str, Any] = {}
    positional: list[str] = []
    i = 0
    while i < len(argv):
        token = argv[i]
        i += 1
        if token == "-" or not token.startswith("-"):
            positional.append(token)
            continue
        name, eq, inline = token.partition("=")
        name = SHORT.get(name, name)
        if name == "--print":  # an optional value: `-p`, `-p -`, `-p TEXT`
            if eq:
                value = inline
            elif i < len(argv) and (argv[i] == "-" or not argv[i].startswith("-")):
                value, i = argv[i], i + 1
            else:
                value = ""
        elif name in VALUE or name in REPEATABLE:
            if eq:
                value = inline
            elif i < len(argv) and (argv[i] == "" or argv[i] == "-" or not argv[i].startswith("-")):
                value, i = argv[i], i + 1
            else:
                raise Usage(f"a value is required for '{name}' but none was supplied")
        elif name in BOOL:
            if eq and inline not in ("true", "false"):
                raise Usage(f"invalid value '{inline}' for '{name}'")
            value = inline != "false" if eq else True
        else:
            raise Usage(f"unexpected argument '{token}' found")
        if name in REPEATABLE:
            got.setdefault(name, []).append(value)
            continue
        if name in got:
            raise Usage(f"the argument '{name}' cannot be used multiple times")
        if name in ENUMS and value not in ENUMS[name]:
            raise Usage(f"invalid value '{value}' for '{name}'")
        if name in NUMBERS:
            try:
                NUMBERS[name](value)
            except ValueError:
                raise Usage(f"invalid value '{value}' for '{name}'") from None
        got[name] = value
    if len(positional) > 1:
        raise Usage(f"unexpected argument '{positional[1]}' found")
    for a, b in CONFLICTS:
        if got.get(a) and got.get(b):
            raise Usage(f"the argument '{a}' cannot be used with '{b}'")
    got["positional"] = positional
    return got


def overlay(arg: str | None) -> dict[str, Any] | None:
    """The `--settings FILE_OR_JSON` value as caliban reads it (caliban-settings loader.rs
    `parse_cli_overlay`): inline JSON when it starts with `{`, else a file's path (TOML when it
    ends in `.toml`, else JSON)."""
    if arg is None:
        return None
    if arg.strip().startswith("{"):
        value = json.loads(arg.strip())
    elif arg.lower().endswith(".toml"):
        import tomllib

        value = tomllib.loads(Path(arg).read_text())
    else:
        if not Path(arg).exists():
            raise ValueError(f"{arg}: file not found and not inline JSON")
        value = json.loads(Path(arg).read_text())
    if not isinstance(value, dict):
        raise ValueError("not a settings object")
    return value


def sessions_dir(args: dict[str, Any]) -> Path:
    if "--sessions-dir" in args:
        return Path(args["--sessions-dir"])
    data = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(data) / "caliban" / "sessions"


def save(path: Path | None, name: str, prompt: str) -> None:
    """Record the prompt in the session file (caliban keeps the whole history there)."""
    if path is None:
        return
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        data = {"name": name, "messages": []}
    data["messages"].append(prompt)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


def emit(line: str) -> None:
    os.write(1, (line.rstrip("\n") + "\n").encode())


def hostile(script: dict[str, Any]) -> None:
    """What a hostile or careless caliban does before its output (see the module's doc)."""
    if script.get("orphan"):
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        Path(script["orphan"]).write_text(str(child.pid))
    if script.get("flood_stdout"):
        block = b"x" * (1 << 20)
        for left in range(script["flood_stdout"], 0, -len(block)):
            os.write(1, block[:left])
    if script.get("long_stderr"):
        os.write(2, b"w" * script["long_stderr"] + b"\n")
    if script.get("flood_stderr"):
        lines = (b"e" * 99 + b"\n") * 10_000
        for left in range(script["flood_stderr"], 0, -len(lines)):
            os.write(2, lines[:left])


def mcp_run(args: dict[str, Any], script: dict[str, Any], session_id: str) -> int:
    """A run that calls MCP tools (fake_caliban_mcp.py): `{"mcp_calls": [{"tool", "input", "id"?}],
    "text": final answer}` — turn 1 calls each tool in turn, turn 2 answers."""
    import fake_caliban_mcp as mcp

    servers = mcp.start(overlay(args.get("--settings")))
    try:
        model = args.get("--model") or "claude-sonnet-4-5"
        emit(json.dumps({"type": "system", "subtype": "init", "session_id": session_id,
                         "model": model if "/" in model else f"anthropic/{model}",
                         "tools": sorted(["Bash", "Read", *mcp.tool_names(servers)]), "plugins": [],
                         "settingSources": [], "mcp_servers": [], "bare_mode": False, "cwd": os.getcwd(),
                         "permission_mode": args.get("--permission-mode", "default")}))  # fmt: skip
        blocks: list[dict[str, Any]] = [{"text": "Calling.", "type": "text"}]
        wanted_calls = script["mcp_calls"]
        allowed = [n for n, w in enumerate(wanted_calls) if not mcp.permitted(w["tool"], args.get("--allow", []), args.get("--deny", []))]
        # `"parallel": true`: the turn's (permitted) calls side by side, as caliban runs them (--parallel-tool-limit)
        pairs = [(wanted_calls[n]["tool"], wanted_calls[n]["input"]) for n in allowed]
        together = mcp.call_all(servers, pairs) if script.get("parallel") else []
        for n, wanted in enumerate(wanted_calls):
            tid, tool, tool_input = wanted.get("id", f"toolu_{n:02d}"), wanted["tool"], wanted["input"]
            why = mcp.permitted(tool, args.get("--allow", []), args.get("--deny", []))
            if together and not why:
                is_error, content = together[allowed.index(n)]
            else:
                is_error, content = (True, [{"text": f"Tool call denied: {why}", "type": "text"}]) if why else mcp.call(
                    servers, tool, tool_input)  # fmt: skip
            # caliban's stream-json encoder writes a call's `tool_use` once the call has returned, with
            # its `tool_result` (headless/encoder.rs `StreamJsonEncoder::tool_call`, at ToolCallEnd)
            emit(json.dumps({"type": "tool_use", "id": tid, "name": tool, "input": tool_input}))
            emit(json.dumps({"type": "tool_result", "tool_use_id": tid, "is_error": is_error, "content": content}))
            blocks.append({"id": tid, "input": tool_input, "name": tool, "type": "tool_use"})
        text = script.get("text", "Done.")
        emit(json.dumps({"type": "message", "role": "assistant", "content": blocks}))
        emit(json.dumps({"type": "message", "role": "assistant", "content": [{"text": text, "type": "text"}]}))
        emit(json.dumps({"type": "result", "subtype": "success", "result": text, "session_id": session_id,
                         "total_cost_usd": 0.0, "turns": 2, "total_input_tokens": 10, "total_output_tokens": 5,
                         "num_turns": 2, "is_error": False, "duration_ms": 3,
                         "usage": {"input_tokens": 10, "output_tokens": 5}, "turns_without_edit": 2,
                         "no_edit_nudge_emitted": False}))  # fmt: skip
    finally:
        for server in servers.values():
            server.close()
    return 0


def main(argv: list[str]) -> int:
    if argv[-2:] == ["mcp", "serve"] and not os.environ.get("FAKE_CALIBAN_NO_SERVE"):
        try:  # global flags go before the subcommand (args.rs: none is `global = true`)
            global_args = check(argv[:-2])
        except Usage as exc:
            sys.stderr.write(f"error: {exc}\n")
            return 2
        from fake_caliban_serve import main as serve

        return serve(global_args)
    try:
        args = check(argv)
    except Usage as exc:
        sys.stderr.write(f"error: {exc}\n\nUsage: caliban [OPTIONS] [PROMPT] [COMMAND]\n")
        return 2
    stdin = ""
    inline = args.get("--print") or args.get("--prompt") or (args["positional"] or [None])[0]
    if inline in (None, "", "-"):
        stdin = sys.stdin.read()  # caliban reads all of stdin before it runs anything
    system = args.get("--system")
    if args.get("--system-file"):  # (system_prompt.rs `resolve`: read at start, an error if it cannot be)
        try:
            system = Path(args["--system-file"]).read_text()
        except (OSError, UnicodeDecodeError) as exc:
            sys.stderr.write(f"Error: reading system prompt from {args['--system-file']}: {exc}\n")
            return 1
    try:
        settings = overlay(args.get("--settings"))
    except (OSError, ValueError) as exc:
        sys.stderr.write(f"[caliban] --settings: {exc}\n")
        return 78
    log = os.environ.get("FAKE_CALIBAN_LOG")
    calls = 0
    if log:
        with open(log, "a+") as fh:
            fh.seek(0)
            calls = sum(1 for _ in fh)
            fh.write(json.dumps({"argv": argv, "stdin": stdin, "pid": os.getpid(), "pgid": os.getpgrp(),
                                 "system": system, "settings": settings, "cwd": os.getcwd()}) + "\n")
    prompt = stdin.rstrip("\n") if inline in (None, "", "-") else inline
    if "--print" not in args and "--output-format" not in args:
        sys.stderr.write("fake caliban: only headless mode is faked\n")
        return 64
    if not prompt.strip():
        sys.stderr.write("[caliban] empty prompt — pass a non-empty `--print <TEXT>`, positional arg, or stdin\n")
        return 64
    store = sessions_dir(args)
    name = args.get("--session") or args.get("--resume")
    if args.get("--resume") and not (store / f"{args['--resume']}.json").exists():
        sys.stderr.write(f"[caliban] session not found: {args['--resume']}\n")
        return 66
    path = store / f"{name}.json" if name and not args.get("--no-save") and not args.get("--bare") else None
    scripts = json.loads(os.environ.get("FAKE_CALIBAN_SCRIPTS", "[]"))
    script = scripts[calls % len(scripts)] if scripts else {"file": None}
    session_id = name or "ephemeral"

    def cancelled(signum: int, frame: object) -> None:
        save(path, session_id, prompt)
        result = {"type": "result", "subtype": "cancelled", "session_id": session_id, "total_cost_usd": 0.0,
                  "turns": 1, "total_input_tokens": 0, "total_output_tokens": 0, "num_turns": 1,
                  "is_error": True, "duration_ms": 0, "usage": {"input_tokens": 0, "output_tokens": 0},
                  "tool_calls_seen": 0, "turns_without_edit": 0, "no_edit_nudge_emitted": False}  # fmt: skip
        emit(json.dumps(result, separators=(",", ":")))
        os._exit(124)

    signal.signal(signal.SIGINT, signal.SIG_IGN if script.get("ignore_sigint") else cancelled)
    if script.get("ignore_sigterm"):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    hostile(script)
    if script.get("stderr"):
        sys.stderr.write(script["stderr"] + "\n")
        sys.stderr.flush()
    if "mcp_calls" in script:
        status = mcp_run(args, script, session_id)
        save(path, session_id, prompt)
        return status
    lines = Path(script["file"]).read_text().splitlines() if script.get("file") else []
    status = 0
    model = args.get("--model")
    for n, line in enumerate(lines):
        if n == script.get("pause_after"):
            time.sleep(30)
        if n == script.get("exit_after"):
            return int(script.get("exit", 1))
        frame = json.loads(line)
        if "session_id" in frame and frame["session_id"] in ("SESSION", "test-session"):
            frame["session_id"] = session_id
        if frame.get("subtype") == "init":
            frame["permission_mode"] = args.get("--permission-mode", "default")
            if model:
                frame["model"] = model if "/" in model else f"anthropic/{model}"
        if frame.get("type") == "result":
            status = EXIT.get(frame["subtype"], 1)
        emit(json.dumps(frame, separators=(",", ":")))
    save(path, session_id, prompt)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
