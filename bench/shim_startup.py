"""The start-up cost of `caliban-claude -p` over caliban's own `caliban -p`, as figures.

Both run the same prompt on the test double (tests/support/fake_caliban.py) as caliban, alternated
run by run (on a shared machine the load drifts): the time from the start to the first stdout
line, and to the exit. The shim's cost is what it adds to caliban's: its interpreter, the
translation's imports, the argv mapping, and the frames through the translation.

    python bench/shim_startup.py [--runs 20]

Exits 1 when the median added to either time is over the target (80 ms).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHIM = str(Path(sys.executable).with_name("caliban-claude"))
TARGET_MS = 80.0
PROMPT = "how many files are here?"


def once(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Milliseconds to the first stdout line and to the exit."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    assert proc.stdout is not None
    proc.stdout.readline()
    first = time.perf_counter()
    proc.stdout.read()
    proc.wait()
    return (first - start) * 1000, (time.perf_counter() - start) * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    runs = parser.parse_args().runs
    with tempfile.TemporaryDirectory() as tmp:
        caliban = Path(tmp) / "caliban"
        caliban.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{ROOT / "tests" / "support" / "fake_caliban.py"}" "$@"\n')
        caliban.chmod(0o755)
        script = [{"file": str(ROOT / "fixtures" / "caliban" / "tool_use_two_turns.jsonl")}]
        env = {**os.environ, "CALIBAN_BIN": str(caliban), "CALIBAN_SESSIONS_DIR": str(Path(tmp) / "sessions"),
               "FAKE_CALIBAN_SCRIPTS": json.dumps(script), "CALIBAN_CLAUDE_ARGS": ""}  # fmt: skip
        env.pop("FAKE_CALIBAN_LOG", None)
        commands = {
            "caliban -p (stream-json)": [str(caliban), "-p", PROMPT, "--output-format", "stream-json", "--session", "b"],
            "caliban-claude -p (stream-json)": [SHIM, "-p", PROMPT, "--output-format", "stream-json", "--verbose"],
            "caliban-claude -p (text)": [SHIM, "-p", PROMPT],
        }
        for argv in commands.values():  # warm the page cache
            once(argv, env)
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
        for _ in range(runs):
            for name, argv in commands.items():
                times[name].append(once(argv, env))
    base = times["caliban -p (stream-json)"]
    print(f"start-up, {runs} alternated runs each (median; least):")
    missed = False
    for name, got in times.items():
        first, end = [t[0] for t in got], [t[1] for t in got]
        line = f"  {name:32s} first frame {statistics.median(first):6.1f} ms ({min(first):5.1f}), exit {statistics.median(end):6.1f} ms ({min(end):5.1f})"
        if got is not base:
            added = (statistics.median(f - b[0] for f, b in zip(first, base, strict=True)),
                     statistics.median(e - b[1] for e, b in zip(end, base, strict=True)))  # fmt: skip
            ok = max(added) <= TARGET_MS
            missed |= not ok
            line += f"; added {added[0]:+.1f} / {added[1]:+.1f} ms (target <= {TARGET_MS:.0f}) {'ok' if ok else 'MISSED'}"
        print(line)
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
