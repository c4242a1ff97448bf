"""`caliban-claude`: the program an Agent SDK runs as its `claude` CLI (spec §6).

Three threads: a reader answers control requests the moment they arrive (the SDK waits on
them) and queues user messages; a worker runs the queued messages one at a time, one caliban
process each; the main thread waits and handles signals. stdout carries protocol frames only.
"""

from __future__ import annotations

import errno
import os
import queue
import select
import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, NoReturn

import orjson

from translator import __version__, stdio
from translator.diagnostics import stderr as _stderr
from translator.diagnostics import stdout_text
from translator.feed import CHUNK
from translator.shim import configure, control, initialize, printing, stdin
from translator.shim.conversation import Conversation
from translator.shim.drive.backend import DriveBackend
from translator.shim.drive.policy import Policy
from translator.shim.flags import parse
from translator.shim.group import LADDER, TICK
from translator.shim.mapping import PERMISSION_MODES, Plan, plan, resolve_model, run_argv
from translator.shim.process import CalibanRun
from translator.shim.sessions import Session

EX_USAGE = 64
EX_SOFTWARE = 70
EX_IOERR = 74
PROG = "caliban-claude"
BACKENDS = ("drive", "print")  # CALIBAN_CLAUDE_BACKEND: force one (default: chosen per session)


def say(line: str) -> None:
    """A line on stderr (the SDK hands it to `options.stderr`), as the command writes its
    diagnostics: a closed, full or missing stderr is no reason to fail."""
    _stderr([f"{PROG}: {line}"])


def warn(message: str) -> None:
    say(f"warning: {message}")


def prompt_text(message: dict[str, Any]) -> tuple[str, int]:
    """The text of an SDK user message, and how many non-text blocks were left out."""
    body = message.get("message")
    content = body.get("content", "") if isinstance(body, dict) else ""
    if isinstance(content, str):
        return content, 0
    blocks = content if isinstance(content, list) else []
    texts = [
        b["text"] for b in blocks if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
    ]
    return "\n".join(texts), len(blocks) - len(texts)


def _unchanged(frames: list[bytes]) -> list[bytes]:
    return frames


class Shim:
    def __init__(
        self, binary: str, p: Plan, session: Session, shape: Callable[[list[bytes]], list[bytes]] = _unchanged, *,
        policy: Policy | None = None, backend: str | None = None, prompt_tool: bool = False,
    ) -> None:  # fmt: skip
        self.binary, self.plan, self.session = binary, p, session
        self.policy, self.backend, self.prompt_tool = policy or Policy(None, None), backend, prompt_tool
        self.drive: DriveBackend | None = None  # the drive backend, once chosen and probed
        self._no_drive = backend == "print"  # (forced, or probed once and missing)
        self.shape = shape  # what of the frames is written as they come (print mode holds some back)
        self.model = p.model
        self.mode = p.permission_mode
        self.conversation = Conversation(session.id, partial=p.partial, mode=self.mode)
        # A user message; the error of one that could not be read (str); None: stdin ended.
        self.inbox: queue.Queue[dict[str, Any] | str | None] = queue.Queue()
        self.current: CalibanRun | None = None
        self.initialize = initialize.Initialize()  # what the SDK's initialize asked for (none yet)
        self.prefix = p.prefix if session.new else ""  # goes before the first message's text
        self.stopping = threading.Event()
        self.signal: int | None = None
        self._out = threading.Lock()
        self._closed = False  # stdout failed: the SDK stopped reading, or a write error
        self._write_error: str | None = None  # what failed, when it was not the reader leaving

    # ------------------------------------------------------------------ output

    def write(self, frames: list[bytes]) -> None:
        self.write_bytes(b"".join(self.shape(frames)))

    def write_bytes(self, raw: bytes) -> None:
        data = memoryview(raw)
        with self._out:
            while data and not self._closed:
                try:
                    data = data[os.write(1, data) :]
                except OSError as exc:
                    self._closed = True
                    if exc.errno != errno.EPIPE:
                        self._write_error = exc.strerror or str(exc)

    def send(self, *frames: dict[str, Any]) -> None:
        self.write([orjson.dumps(f) + b"\n" for f in frames])

    # ------------------------------------------------------------------ stdin

    def read_stdin(self) -> None:
        """Until EOF; then the worker is told there is nothing more, whatever happened here."""
        try:
            for n, line in stdin.lines(self._read):
                try:
                    self.message(n, line)
                except Exception as exc:  # a bug here must not end the reader: the app would wait
                    warn(f"stdin:{n}: internal error: {exc!r}")
        finally:
            self.inbox.put(None)

    @staticmethod
    def _read() -> bytes:
        try:
            return os.read(0, CHUNK)
        except OSError:
            return b""

    def message(self, n: int, line: bytes | stdin.TooLong) -> None:
        if isinstance(line, stdin.TooLong):
            self.too_long(n, line)
            return
        if not line.strip():
            return
        try:
            msg, mended = stdin.decode(line)
        except ValueError:
            warn(f"stdin:{n}: not JSON, ignored: {line[:80]!r}")
            return
        if mended:
            warn(f"stdin:{n}: unpaired surrogate escape(s) replaced by U+FFFD")
        kind = msg.get("type") if isinstance(msg, dict) else None
        if kind == "control_request":
            rid, request = msg.get("request_id"), msg.get("request")
            rid = rid if isinstance(rid, str) else "" if rid is None else orjson.dumps(rid).decode()
            try:
                self.control(rid, request if isinstance(request, dict) else {})
            except Exception as exc:  # answered all the same: the SDK waits on every request
                subtype = request.get("subtype") if isinstance(request, dict) else None
                self.send(control.error(rid, f"caliban shim: malformed {subtype} request: {exc}"))
        elif kind == "user":
            self.inbox.put(msg)
        elif kind == "control_response" and self.drive is not None:
            self.drive.answer(msg)  # (the app's answer to can_use_tool or a hook callback)
        elif kind not in ("control_response", "control_cancel_request", "keep_alive"):
            warn(f"stdin:{n}: message of type {kind!r} ignored")

    def too_long(self, n: int, line: stdin.TooLong) -> None:
        """Not read: a user message gets its error result (in its turn), a request its answer."""
        warn(f"stdin:{n}: {line.reason}, ignored")
        why = f"{PROG}: the message was not read: {line.reason} (the most a line may have)"
        if line.kind == "user":
            self.inbox.put(why)
        elif line.kind == "control_request" and line.request_id is not None:
            self.send(control.error(line.request_id, why))

    def control(self, rid: str, request: dict[str, Any]) -> None:
        """Answer at once: the SDK blocks on every control request."""
        subtype = request.get("subtype")
        if subtype == "initialize":
            self.initialize = init = initialize.read(request)
            self.policy.also_deny(init.disallowed_tools or ())  # (what the drive backend applies itself)
            if init.hooks_sent and self.use_drive():
                assert self.drive is not None
                self.drive.set_hooks(init.hooks)
            applied, warnings = configure.apply(self.plan, init)  # (no run has started: the reader runs first)
            if self.drive is not None:
                warnings = [w for w in warnings if w != configure.HOOKS]  # they are called
            self.prefix = self.plan.prefix if self.session.new else ""
            for message in warnings:
                warn(message)
            self.send(control.success(rid, control.initialize(self.mode, init.hooks_sent and self.drive is None, applied)))
        elif subtype == "interrupt":
            self.send(control.success(rid, {"still_queued": []}))
            if self.drive is not None:
                self.drive.interrupt()
                return
            run = self.current
            if run is not None:
                self.conversation.interrupted = True
                run.interrupt()
        elif subtype == "set_permission_mode":
            mode = request.get("mode")
            if not isinstance(mode, str) or mode not in PERMISSION_MODES:
                self.send(control.error(rid, f"caliban shim: unknown permission mode {mode!r}"))
                return
            self.mode = self.conversation.mode = str(mode)
            self.send(control.success(rid, {"mode": self.mode}), control.status(self.mode, self.session.id))
        elif subtype == "set_model":
            model = request.get("model")
            if model is not None and not isinstance(model, str):
                self.send(control.error(rid, f"caliban shim: model {model!r} is not a name"))
                return
            self.model = resolve_model(model)
            if self.drive is not None:
                self.drive.model = self.model
                warn("set_model: caliban mcp serve fixes its model at its start; it applies after an interrupt")
            self.send(control.success(rid, {}))
        elif subtype == "mcp_status":
            self.send(control.success(rid, {"mcpServers": self.conversation.mcp_servers()}))
        else:
            self.send(control.unsupported(rid, str(subtype)))

    # ------------------------------------------------------------------ runs

    def use_drive(self) -> bool:
        """The drive backend (caliban mcp serve), for permission callbacks and hooks: probed
        once; where caliban has none, said in one line, and the session stays on `-p`."""
        if self.drive is not None:
            return True
        if self._no_drive:
            return False
        drive = DriveBackend(
            binary=self.binary, model=self.model, session_id=self.session.id, partial=self.plan.partial,
            mode=lambda: self.mode, policy=self.policy, can_use_tool=self.prompt_tool, write=self.write, warn=warn,
        )  # fmt: skip
        why = drive.probe()
        if why is not None:
            self._no_drive = True
            warn(f"caliban mcp serve is not available ({why}); permission callbacks and hooks fall back to caliban -p")
            return False
        self.drive = drive
        return True

    def work(self) -> None:
        while not self.stopping.is_set():
            msg = self.inbox.get()
            if msg is None and self.drive is not None and not self.stopping.is_set():
                self.drive.finish()
            if msg is None or self.stopping.is_set():
                return
            if isinstance(msg, str):
                self.write(self.conversation.refused(msg))
                continue
            try:
                self.run_message(msg)
            except Exception as exc:  # a bug here must not leave the app waiting for its result
                warn(f"internal error: {exc!r}")
                self.current = None
                self.write(self.conversation.end_run(EX_SOFTWARE, f"internal error in {PROG}: {exc}"))

    def run_message(self, msg: dict[str, Any]) -> None:
        prompt, dropped = prompt_text(msg)
        if dropped:
            warn(f"{dropped} non-text content block(s) (images, documents) dropped: caliban -p takes text only")
        if self.prefix:
            prompt, self.prefix = f"{self.prefix}\n\n{prompt}", ""
        conv = self.conversation
        if self.plan.replay_user:
            self.send(control.user_echo(msg, self.session.id))
        if self.drive is not None:
            self.drive.run_message(prompt)
            return
        conv.start_run()
        run = CalibanRun(run_argv(self.binary, self.plan, self.model, self.mode, self.session.args()))
        self.current = run
        status = run.run(prompt, lambda chunk: self.write(conv.caliban_output(chunk)))
        self.current = None
        self.write(conv.end_run(status, run.stderr_tail))
        self.session.ran(conv.run_result is not None)
        for line in conv.diagnostics():
            say(line)

    # ------------------------------------------------------------------ lifetime

    def serve(self, read_input: bool = True) -> int:
        """Until the input's messages are done (`read_input` False: the inbox holds them all)."""
        for signum in stdio.stop_signals():  # (nohup's SIGHUP stays ignored)
            signal.signal(signum, self._on_signal)
        if read_input:
            threading.Thread(target=self.read_stdin, name="stdin", daemon=True).start()
        worker = threading.Thread(target=self.work, name="runs", daemon=True)
        worker.start()
        stdout = select.poll()
        stdout.register(1, 0)  # its errors only: POLLERR once the reader has closed its end
        gone = False  # the app stopped reading: nobody would see what caliban does now
        while worker.is_alive() and self.signal is None and not self._closed and not gone:
            worker.join(0.1)
            gone = bool(stdout.poll(0))
        if self.signal is not None:
            self.stop(worker)
            return 128 + self.signal
        if self._closed or gone:
            self.stop(worker)
            if self._write_error is not None:  # (a reader that has gone is no error to say)
                say(f"write error: {self._write_error}")
                return EX_IOERR
        last_is_error = self.drive.last_is_error if self.drive is not None else self.conversation.last_is_error
        return 1 if last_is_error else 0

    def _on_signal(self, signum: int, frame: object) -> None:
        self.signal = signum

    def stop(self, worker: threading.Thread) -> None:
        """End caliban's process group (group.py's ladder: SIGINT, with which caliban saves its
        session and prints its result; SIGTERM; SIGKILL): nothing of it outlives the shim."""
        self.stopping.set()
        if self.drive is not None:
            self.drive.kill()
        run = self.current
        if run is not None:
            run.interrupt()
            deadline = time.monotonic() + sum(grace for _, grace in LADDER)
            while worker.is_alive() and not run.gone() and time.monotonic() < deadline:
                run.step()  # (climbed here too: the worker may be stuck writing to an app that does not read)
                worker.join(TICK)
            if not run.gone():
                run.kill()
            worker.join(1.0)  # its last frames, unless it is stuck writing them


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
caliban mcp serve for SDK apps with can_use_tool or hook callbacks, caliban -p otherwise). See docs/shim.md.
"""


def main(argv: list[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    asked = {given.split(" ")[0] for given in args.unknown}  # flags, not values that look like them
    if asked & {"-v", "--version"}:
        return stdout_text(f"{control.CLI_VERSION} (Claude Code; {PROG} {__version__})\n", PROG)
    if asked & {"-h", "--help"}:
        return stdout_text(USAGE, PROG)
    text_input = args.get("--input-format") in (None, "text")
    if "--print" in args.flags:
        refused = printing.refusal(args, strict=text_input)
        if refused:
            _stderr([refused])  # Claude Code's own line and status
            return 1
    else:
        for flag in ("--output-format", "--input-format"):
            if args.get(flag) != "stream-json":
                say(f"{flag} stream-json is required without -p (the Agent SDK's protocol); a prompt: {PROG} -p PROMPT")
                return EX_USAGE
    prompt, refused = printing.prompt(args) if text_input else (None, None)
    if refused:
        _stderr([refused])
        return 1
    binary = os.environ.get("CALIBAN_BIN") or "caliban"
    if os.sep not in binary and shutil.which(binary) is None:
        warn(f"{binary} not found on PATH (set CALIBAN_BIN); every message will get an error result")
    p = plan(args, keep_system_prompt=os.environ.get("CALIBAN_CLAUDE_KEEP_SYSTEM_PROMPT") == "1")
    if text_input and len(args.positional) > 1:
        p.warnings.append(f"arguments after the prompt ignored: {' '.join(map(repr, args.positional[1:]))}")
    session = Session(args, p.warnings)
    backend = os.environ.get("CALIBAN_CLAUDE_BACKEND") or None
    if backend not in (None, *BACKENDS):
        warn(f"CALIBAN_CLAUDE_BACKEND={backend}: expected drive or print; chosen per session")
        backend = None
    prompt_tool = args.get("--permission-prompt-tool") == "stdio"
    policy = Policy(args.get("--allowedTools"), args.get("--disallowedTools"))
    sdk = Shim(binary, p, session, policy=policy, backend=backend, prompt_tool=prompt_tool) if prompt is None else None
    if sdk is not None and (backend == "drive" or (backend is None and prompt_tool)) and sdk.use_drive():
        p.warnings = [w for w in p.warnings if not w.startswith("can_use_tool")]  # it is bridged
    for message in p.warnings:
        warn(message)
    try:
        if prompt is None:
            assert sdk is not None
            return sdk.serve()
        printer = printing.Printer(args)
        shim = Shim(binary, p, session, printer.take)
        shim.inbox.put(printing.user_message(prompt))
        shim.inbox.put(None)
        status = shim.serve(read_input=False)
        shim.write_bytes(printer.end())
        return status
    finally:
        session.close()


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
