"""What a start-up does not pay for: work that only some options need is done when they ask
(each check runs the command's main in a fresh interpreter and looks at what it loaded)."""

from __future__ import annotations

import subprocess
import sys

from support_processes import fixture

STRICT_BUILT = """\
import sys
import translator.cli as cli
import translator.model as model
cli.main([*sys.argv[1:]])
print(sorted({'STRICT', 'HEADLESS_STRICT'} & set(vars(model))), file=sys.stderr)
"""


def built(*args: str) -> str:
    proc = subprocess.run([sys.executable, "-c", STRICT_BUILT, "--session-id", "S", *args],
                          capture_output=True, timeout=60)
    return proc.stderr.decode().splitlines()[-1]


def test_the_strict_decoders_are_built_only_for_strict() -> None:
    assert built(fixture("thinking")) == "[]"
    assert built("--strict", fixture("thinking")) == "['STRICT']"
