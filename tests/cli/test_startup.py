"""What a start-up (and an exit) does not pay for: work that only some options need is done
when they ask (each check runs the command's main in a fresh interpreter and looks at what it
loaded), and the exit skips the interpreter's teardown without losing anything."""

from __future__ import annotations

import os
import subprocess
import sys

from support_fixtures import FIXTURES
from support_processes import TRANSLATOR, fixture

STRICT_BUILT = """\
import sys
import translator.cli.command as cli
import translator.model as model
cli.main([*sys.argv[1:]])
print(sorted({'STRICT', 'HEADLESS_STRICT', 'HEADLESS_DECODER'} & set(vars(model))), file=sys.stderr)
"""


def built(*args: str) -> str:
    proc = subprocess.run([sys.executable, "-c", STRICT_BUILT, "--session-id", "S", *args],
                          capture_output=True, timeout=60)
    return proc.stderr.decode().splitlines()[-1]


def test_the_decoders_some_input_needs_are_built_only_for_it() -> None:
    headless = str(FIXTURES / "headless" / "tool_use_two_turns.jsonl")
    assert built(fixture("thinking")) == "[]"
    assert built("--strict", fixture("thinking")) == "['STRICT']"
    assert built(headless) == "['HEADLESS_DECODER']"
    assert built("--strict", headless) == "['HEADLESS_DECODER', 'HEADLESS_STRICT', 'STRICT']"


def quiet_env() -> dict[str, str]:
    """Without PYTHONUNBUFFERED: stdout to a pipe is block-buffered, as it is for most users."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}


def test_the_exit_without_teardown_loses_nothing_buffered() -> None:
    """The command ends without the interpreter's teardown: what sits in sys.stdout's and
    sys.stderr's buffers is still written, and the status is the one asked for."""
    code = "import sys, translator.cli.command as c; sys.stdout.write('x' * 5000 + 'end'); sys.stderr.write('no newline'); c.leave(3)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, env=quiet_env(), timeout=60)
    assert (proc.returncode, proc.stdout, proc.stderr) == (3, b"x" * 5000 + b"end", b"no newline")
    proc = subprocess.run([TRANSLATOR, "--exit-status", "--on-invalid", "fail"], input=b"not json\n",
                          capture_output=True, env=quiet_env(), timeout=60)
    assert proc.returncode == 65 and proc.stderr.startswith(b"translator: <stdin>:1: invalid JSON")


def test_an_exit_hook_still_runs() -> None:
    """Something registered to run at exit (a coverage tool, a library) gets the usual exit."""
    code = "import atexit, sys, translator.cli.command as c; atexit.register(print, 'hook ran'); sys.argv[1:] = ['/dev/null']; c.run()"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, env=quiet_env(), timeout=60)
    assert (proc.returncode, proc.stdout) == (0, b"hook ran\n")


def test_a_python_without_the_private_hook_count_gets_the_usual_exit() -> None:
    """`atexit._ncallbacks` is CPython's, and private: where it is missing, the exit is the
    usual one, with everything written and the status asked for (not an AttributeError)."""
    code = ("import atexit, sys, translator.cli.command as c; del atexit._ncallbacks; "
            "sys.stdout.write('x' * 5000 + 'end'); c.leave(3)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, env=quiet_env(), timeout=60)
    assert (proc.returncode, proc.stdout, proc.stderr) == (3, b"x" * 5000 + b"end", b"")
