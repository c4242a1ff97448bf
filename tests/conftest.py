"""The suite's fixtures and hooks; the helpers they share with the tests are in
tests/support/ (support_fixtures.py and the support_*.py modules, the fake caliban)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

import pytest
from support_fixtures import TS_SDK_CACHE, TS_SDK_PACKAGE, TS_SDK_SKIPPED, TS_SDK_VERSION, Reap, npm_installed

from translator.core.rates import RateCard

# A suite started as a shell's background job (`make test &`: SIGINT ignored) or under nohup
# (SIGHUP ignored) would hand that on to every command it starts, which keeps an ignored stop
# signal ignored, as a Unix command does: the tests that stop one with it would wait out their
# timeouts. The suite's children start with the default actions (a handler is not inherited).
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
if signal.getsignal(signal.SIGHUP) is signal.SIG_IGN:
    signal.signal(signal.SIGHUP, lambda signum, frame: None)  # the suite itself still outlives a hang-up


@pytest.fixture(scope="session", autouse=True)
def claude_config_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the shim writes its session files (Claude Code's `$CLAUDE_CONFIG_DIR`) in every
    test that does not name its own: never the real ~/.claude."""
    config = tmp_path_factory.mktemp("claude-config")
    os.environ["CLAUDE_CONFIG_DIR"] = str(config)
    return config


@pytest.fixture
def reap() -> Iterator[Reap]:
    """`proc = reap(subprocess.Popen(...))`: a process the test started, killed and waited for
    at its end if it still runs (a failing test must not leave a translator behind)."""
    started: list[subprocess.Popen[bytes]] = []

    def keep(proc: subprocess.Popen[bytes]) -> subprocess.Popen[bytes]:
        started.append(proc)
        return proc

    yield keep
    for proc in started:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.fixture
def bundled_rates() -> RateCard:
    return RateCard.bundled()


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Tests skipped for a missing tool are said plainly at the end, not only counted."""
    for report in terminalreporter.stats.get("skipped", []):
        reason = str(report.longrepr[-1]) if isinstance(report.longrepr, tuple) else ""
        if "SKIPPED:" in reason:
            terminalreporter.write_line(reason.removeprefix("Skipped: "))
            return


@pytest.fixture(scope="module")
def sdk() -> Path:
    """The SDK's entry module, installed once into the cache (without the optional native CLI)."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.skip(TS_SDK_SKIPPED)
    return npm_installed(TS_SDK_CACHE, {TS_SDK_PACKAGE: TS_SDK_VERSION}) / TS_SDK_PACKAGE / "sdk.mjs"


# ccusage from npm, for the tests that read the session files with it (test_transcripts.py):
# 20.0.24, the last release with a linux-x64 binary (20.0.26's was never published).
CCUSAGE_VERSION = "20.0.24"
CCUSAGE_CACHE = Path(os.environ.get("CALIBAN_CLAUDE_CCUSAGE_CACHE") or Path.home() / ".cache" / "caliban-claude-ccusage")


@pytest.fixture(scope="session")
def ccusage() -> Callable[[Path, str], dict[str, Any]]:
    """`ccusage REPORT --json --offline` on a Claude config dir (in UTC), installed once into the cache."""
    npm = shutil.which("npm")
    if shutil.which("node") is None or npm is None:
        pytest.skip("the ccusage tests were SKIPPED: node and npm are not installed (.ci/run installs them)")
    command = npm_installed(CCUSAGE_CACHE, {"ccusage": CCUSAGE_VERSION}, omit_optional=False) / ".bin" / "ccusage"

    def report(config_dir: Path, kind: str) -> dict[str, Any]:
        env = {**os.environ, "CLAUDE_CONFIG_DIR": str(config_dir), "TZ": "UTC"}
        done = subprocess.run([str(command), kind, "--json", "--offline"], env=env, capture_output=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return cast(dict[str, Any], json.loads(done.stdout))

    return report
