"""`caliban-claude`: the program an Agent SDK runs as its `claude` CLI (spec §6). Here only
argv: print mode or the SDK's protocol, the plan, one session (session.py), its exit status.
"""

from __future__ import annotations

import errno
import os
import shutil
import signal
import sys
import threading
import uuid
from collections.abc import Mapping
from typing import NoReturn

import orjson

from translator import stdio, telemetry
from translator.diagnostics import stderr as _stderr
from translator.diagnostics import stdout_text
from translator.exits import EX_OSERR, EX_USAGE
from translator.shim import choose, printing, restricting, sessions, unserved
from translator.shim.backends.base import RunContext
from translator.shim.backends.drive.backend import DriveBackend
from translator.shim.backends.oneshot.backend import OneshotBackend
from translator.shim.flags import parse
from translator.shim.mapping import plan
from translator.shim.place import Place
from translator.shim.protocol.frames import CLI_VERSION, no_conversation
from translator.shim.protocol.transport import Transport
from translator.shim.say import PROG, say, warn
from translator.shim.session import ShimSession
from translator.version import __version__

DOCS = os.path.join(sys.prefix, "share", "doc", "caliban-stream-translator")  # pyproject's data-files
USAGE = f"""usage: {PROG} -p [PROMPT] [--output-format text|json|stream-json --verbose] [CLAUDE CODE OPTIONS]
       {PROG} --output-format stream-json --input-format stream-json --verbose [CLAUDE CODE OPTIONS]

A `claude`-compatible command that runs caliban: Claude Code's print mode, and the protocol
the Claude Agent SDKs (Python, TypeScript) speak with the CLI.
  {PROG} -p "how many files are here?"
  git diff | {PROG} -p "review this" --output-format json | jq -r .result
  ClaudeAgentOptions(cli_path="{PROG}")                (Python SDK)
  query({{prompt, options: {{pathToClaudeCodeExecutable: "{PROG}"}}}})   (TypeScript SDK)
Environment: CALIBAN_BIN (default: caliban on PATH), CALIBAN_SESSIONS_DIR, CALIBAN_CLAUDE_MODELS,
CALIBAN_CLAUDE_ARGS, CALIBAN_CLAUDE_KEEP_SYSTEM_PROMPT=1, CALIBAN_CLAUDE_BACKEND=drive|print (default:
caliban mcp serve for SDK apps with can_use_tool or hook callbacks, caliban -p otherwise),
CALIBAN_CLAUDE_HOOK_TIMEOUT (seconds a hook callback may take without a matcher timeout; 60),
CALIBAN_CLAUDE_MCP_TIMEOUT (seconds a request to caliban mcp serve may take, written and answered; 60).
See docs/shim.md ({DOCS}/shim.md once installed).
"""


# caliban has no MCP server of its tools: its own `caliban mcp serve` is the drive surface (runs,
# polls, permits: caliban-drive-surface.md), not the tools/list and tools/call of `claude mcp serve`.
MCP_SERVE = (f"mcp: not available: {PROG} cannot serve caliban's tools over MCP (caliban's own `mcp serve` "
             "is its drive surface: runs and permits, no tools/call); use caliban through -p or an Agent SDK")


def main(argv: list[str] | None = None) -> int:
    """The command: the process's arguments, environment and folder (the only place they are read)."""
    try:
        cwd = os.getcwd()
    except OSError as exc:  # (a folder removed under it)
        say(f"cannot read the current folder: {exc.strerror or exc}")
        return EX_OSERR
    return serve(sys.argv[1:] if argv is None else argv, os.environ, cwd)


def serve(argv: list[str], env: Mapping[str, str], cwd: str, transport: Transport | None = None) -> int:
    """The program for `argv`, `env` and the folder `cwd`, its app on `transport` (None: stdin
    and stdout), and its exit status: the one door a session is built by, the command's or a
    test's in this process (tests/support/support_inprocess.py). Everything below reads the
    environment and the folder from here (place.py), caliban is started with them; stop
    signals are taken on the main thread only."""
    place = Place(env, os.path.normpath(cwd))  # (absolute)
    args = parse(argv)
    asked = {given.split(" ")[0] for given in args.unknown}  # flags, not values that look like them
    if asked & {"-v", "--version"}:
        return stdout_text(f"{CLI_VERSION} (Claude Code; {PROG} {__version__})\n", PROG)
    if asked & {"-h", "--help"}:
        return stdout_text(USAGE, PROG)
    text_input = args.get("--input-format") in (None, "text")
    if "--print" in args.flags:
        refused = printing.refusal(args, strict=text_input)
        if refused:
            _stderr([refused])  # Claude Code's own line and status
            return 1
    elif args.positional[:1] == ["mcp"]:  # `claude mcp serve` serves Claude Code's own tools over MCP
        say(MCP_SERVE)
        if args.positional[1:2] == ["serve"] and transport is None:  # a client's initialize is told too
            unserved.answer(0, sys.stdout.buffer, MCP_SERVE)
        return EX_USAGE
    elif args.positional[:1] and args.positional[0] in unserved.COMMANDS:  # `claude doctor`, `claude auth`, …
        say(unserved.command_line(args.positional[0], PROG))
        return EX_USAGE
    else:
        for flag in ("--output-format", "--input-format"):
            if args.get(flag) != "stream-json":
                say(f"{flag} stream-json is required without -p (the Agent SDK's protocol); a prompt: {PROG} -p PROMPT")
                return EX_USAGE
    prompt, refused = printing.prompt(args) if text_input else (None, None)
    refused = refused or sessions.refusal(args, place)
    if refused:
        _stderr([refused])
        return 1
    if (absent := sessions.missing(args, place)) is not None:
        _stderr([absent])
        if args.get("--output-format") == "stream-json":  # (fork: the new session's id)
            fork = "--fork-session" in args.flags
            named = (args.get("--session-id") or str(uuid.uuid4())) if fork else args.get("--resume")
            frame = orjson.dumps(no_conversation(absent, named or "")) + b"\n"
            if transport is not None:
                transport.write(frame)
            else:
                stdout_text(frame.decode(), PROG)
        return 1
    binary = env.get("CALIBAN_BIN") or "caliban"
    if (cannot := unrunnable(env.get("CALIBAN_BIN") or "", place)) is not None:
        say(f"{cannot}; every message will get an error result")
    p = plan(args, place)
    flagged = restricting.refusal(args, p.permission_mode, os.geteuid() == 0, env.get("IS_SANDBOX"))
    if flagged is not None:
        line, claudes = flagged
        _stderr([line])  # (the CLI's own line: its status; ours: a usage error)
        return 1 if claudes else EX_USAGE
    if text_input and len(args.positional) > 1:
        p.warnings.append(f"arguments after the prompt ignored: {' '.join(map(repr, args.positional[1:]))}")
    session = sessions.Session(args, p.warnings, place)
    force = choose.forced(env, warn)
    prompt_tool = args.get("--permission-prompt-tool") == "stdio"
    # Claude Code's OpenTelemetry export, when asked (-p: one message, a scrape endpoint would show nothing)
    text = prompt is not None and (args.get("--output-format") or "text") == "text"  # console only then, on stderr
    exporter = telemetry.start_or_say(env, warn, lasting=prompt is None, formatted=not text)

    def chosen(ctx: RunContext) -> choose.Choice:  # (the backends named here, chosen there)
        return choose.Choice(ctx, OneshotBackend, DriveBackend, force)

    rules = (args.get("--allowedTools"), args.get("--disallowedTools"))
    sdk = ShimSession(binary, p, session, chosen, rules=rules, prompt_tool=prompt_tool, telemetry=exporter,
                      transport=transport) if prompt is None else None  # (the backend chosen: its warnings said)
    for message in p.warnings:
        warn(message)
    try:
        if prompt is None:
            assert sdk is not None
            return _stopped_by_signals(sdk).serve()
        printer = printing.Printer(args)
        def printing_chosen(ctx: RunContext) -> choose.Choice:  # (no app: the drive only forced)
            return choose.Choice(ctx, OneshotBackend, DriveBackend, force, app=False)

        printed = ShimSession(binary, p, session, printing_chosen, printer.take, telemetry=exporter, transport=transport)
        shim = _stopped_by_signals(printed)
        shim.inbox.put(printing.user_message(prompt))
        shim.inbox.put(None)
        return shim.serve(read_input=False, end=printer.end)
    finally:
        session.close()
        if exporter is not None:
            exporter.close()  # the last exports, within a few seconds whatever the collector does


def _stopped_by_signals(session: ShimSession) -> ShimSession:
    if threading.current_thread() is not threading.main_thread():  # (a session served off it: its app ends it)
        return session
    for signum in stdio.stop_signals():  # (nohup's SIGHUP stays ignored)
        signal.signal(signum, session.on_signal)
    return session


def run() -> NoReturn:
    """Console-script entry point. Leaves at once, without waiting for the reader thread,
    which may still be blocked on stdin."""
    stdio.hold()  # a closed standard stream keeps its number (caliban's pipes must not take it)
    status = main()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(status)


def unrunnable(bin_env: str, place: Place) -> str | None:
    """Why caliban cannot be run, said once at the start (what would be run and why not), or
    None: `CALIBAN_BIN` when set (a path from the session's folder, or a name looked up on its
    PATH), else `caliban` on its PATH."""
    binary = bin_env or "caliban"
    named = f"CALIBAN_BIN={binary}" if bin_env else f"{binary} (CALIBAN_BIN is not set)"
    if os.sep not in binary:
        found = shutil.which(binary, path=place.env.get("PATH", os.defpath))
        return None if found is not None else f"cannot run {named}: not found on PATH"
    binary = place.path(binary)
    if shutil.which(binary) is not None:
        return None
    if os.path.isdir(binary):
        return f"cannot run {named}: {os.strerror(errno.EISDIR)}"
    why = os.strerror(errno.EACCES) + " (not executable)" if os.path.exists(binary) else os.strerror(errno.ENOENT)
    return f"cannot run {named}: {why}"
