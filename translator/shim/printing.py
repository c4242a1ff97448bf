"""`caliban-claude -p PROMPT`: Claude Code's print mode, as the CLI 2.1.333 prints it.

One user message, from argv, stdin or both; one caliban run; then what Claude Code writes for
`--output-format text` (the result text), `json` (the result object) or `stream-json` (every
frame as it comes). The refusals, their wording and exit status 1 are Claude Code's own
(shared/reference/cc-2.1.333/print/).
"""

from __future__ import annotations

import os
import re
import select
from collections.abc import Callable
from typing import Any

import orjson

from translator.encoders.array import document
from translator.shim.flags import ClaudeArgs

FORMATS = ("text", "json", "stream-json")
INPUT_FORMATS = ("text", "stream-json")
NO_INPUT = "Error: Input must be provided either through stdin or as a prompt argument when using --print"
# caliban takes a prompt of at most 10 MiB on stdin (exit 78 past it): what is more is not held.
MAX_STDIN = 10 * 1024 * 1024
TOO_LARGE = f"Error: the prompt on stdin is over {MAX_STDIN >> 20} MiB, more than caliban takes"
# With a prompt argument, stdin joins it only if it has something to say at once: Claude Code
# does not wait on an open pipe that stays silent (arg_prompt_stdin_open).
STDIN_WAIT_S = 0.1
MAX_TURNS = re.compile(r"^Reached maximum number of turns \((\d+)\)$")


def refusal(args: ClaudeArgs, strict: bool = True) -> str | None:
    """Claude Code's error line for a print-mode command line it refuses, or None. `strict`:
    an unknown option is refused too (not for the SDK protocol, whose extra_args pass anything)."""
    out, given = args.get("--output-format") or "text", args.get("--input-format") or "text"
    if out not in FORMATS:
        return f"error: option '--output-format <format>' argument '{out}' is invalid. Allowed choices are {', '.join(FORMATS)}."
    if given not in INPUT_FORMATS:
        return f"error: option '--input-format <format>' argument '{given}' is invalid. Allowed choices are {', '.join(INPUT_FORMATS)}."
    if given == "stream-json" and out != "stream-json":
        return "Error: --input-format=stream-json requires output-format=stream-json."
    if out == "stream-json" and "--verbose" not in args.flags:
        return "Error: When using --print, --output-format=stream-json requires --verbose"
    if strict and args.unknown:
        return f"error: unknown option '{args.unknown[0].split(' ')[0].split('=')[0]}'"
    return None


def _read_all(read: Callable[[], bytes]) -> bytes:
    """stdin to its end, or to one byte past MAX_STDIN."""
    parts, size = [], 0
    try:
        while size <= MAX_STDIN and (chunk := read()):
            parts.append(chunk)
            size += len(chunk)
    except OSError:
        pass
    return b"".join(parts)


def prompt(args: ClaudeArgs, fd: int = 0, app: Callable[[], bytes] | None = None) -> tuple[str, str | None]:
    """The prompt, as Claude Code makes it: the argument, stdin read verbatim (its trailing
    newline kept), or both as `ARG\\nSTDIN`; or the error line when there is none to run.
    `app`: the input of an app in this process (its transport's `read`), read to its end."""
    arg = args.positional[0] if args.positional else ""
    if app is not None:
        return _joined(arg, _read_all(app))
    try:
        tty = os.isatty(fd)
    except OSError:
        tty = True  # no stdin at all: nothing to read
    data = b""
    if not tty:
        try:
            ready = not arg or bool(select.select([fd], [], [], STDIN_WAIT_S)[0])
        except (OSError, ValueError):
            ready = False
        data = _read_all(lambda: os.read(fd, 1 << 16)) if ready else b""
    return _joined(arg, data)


def _joined(arg: str, data: bytes) -> tuple[str, str | None]:
    if len(data) > MAX_STDIN:
        return "", TOO_LARGE
    text = data.decode("utf-8", "replace")
    joined = f"{arg}\n{text}" if arg and text else arg or text
    return (joined, None) if joined.strip() else ("", NO_INPUT)


def user_message(text: str) -> dict[str, Any]:
    """The prompt as the SDK's user message, which the shim's runs take."""
    return {"type": "user", "message": {"role": "user", "content": text}, "parent_tool_use_id": None}


def _number(value: str | None) -> str:
    """A flag's number as JavaScript prints it (`1.0` → `1`)."""
    try:
        number = float(value or "")
    except ValueError:
        return value or ""
    return str(int(number)) if number.is_integer() else repr(number)


def text_of(result: dict[str, Any], args: ClaudeArgs) -> bytes:
    """What `--output-format text` prints for a result (Claude Code's wording; an error
    without its newline, as in the recording of max_turns_text)."""
    subtype = result.get("subtype")
    errors = result.get("errors") if isinstance(result.get("errors"), list) else []
    first = str(errors[0]) if errors else None
    if subtype == "success":
        return f"{result.get('result') or ''}\n".encode()
    if subtype == "error_during_execution":
        line = "Execution error"
    elif subtype == "error_max_turns":
        found = MAX_TURNS.match(first or "")
        line = "Error: Reached max turns" + (f" ({found.group(1)})" if found else "")
    elif subtype == "error_max_budget_usd":
        budget = args.get("--max-budget-usd")
        line = "Error: Exceeded USD budget" + (f" ({_number(budget)})" if budget else "")
    else:
        line = f"Error: {first or subtype}"
    return line.encode()


class Printer:
    """Shapes the conversation's frames into the output format: `take` what may be written
    as it comes, `end` the rest once the run is over."""

    def __init__(self, args: ClaudeArgs) -> None:
        self.args = args
        self.format = args.get("--output-format") or "text"
        self.verbose = "--verbose" in args.flags
        self.frames: list[bytes] = []  # json --verbose: all of them
        self.result: bytes | None = None

    def take(self, frames: list[bytes]) -> list[bytes]:
        if self.format == "stream-json":
            return frames
        for raw in frames:
            if self.format == "json" and self.verbose:
                self.frames.append(raw)
            if b'"result_index":' in raw:  # (a key: in a string its quotes would be escaped)
                self.result = raw
        return []

    def end(self) -> bytes:
        if self.format == "stream-json":
            return b""
        if self.format == "json" and self.verbose:
            return orjson.dumps([document(raw) for raw in self.frames]) + b"\n"
        if self.result is None:  # (every run that began gets a result: a run that never began)
            return b""
        if self.format == "json":
            return orjson.dumps(document(self.result)) + b"\n"
        return text_of(orjson.loads(self.result), self.args)


