"""The TS SDK's `prewarm()` + `claim()` (0.3.333) on caliban-claude (issue 40): the spare starts
with `--await-claim` in the SDK's parking folder; the claim names the session's folder, which
becomes its runs' and its session file's, and is accepted as the SDK expects (`claimed` resolves
with it). A claim that cannot be honoured is refused, failing closed: `claimed` rejects with
the SDK's reason and the prompt gets an error result, never run in the parking folder."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support_fixtures import FIXTURES, SUPPORT
from support_processes import fake_caliban

from translator.shim.claiming import NOT_CLAIMED
from translator.transcripts.files import slug

SHIM = str(Path(sys.executable).with_name("caliban-claude"))
PREWARM = SUPPORT / "ts_sdk" / "prewarm.mjs"
PROMPT = "how many files are here?"


class Spare:
    """One prewarmed spare, claimed: what the SDK's script saw, and what caliban was run with."""

    def __init__(self, root: Path, sdk: Path, spec: dict[str, Any]) -> None:
        self.root, self.work = root, root / "work"
        self.work.mkdir(exist_ok=True)
        env = {**os.environ, "HOME": str(root), "CLAUDE_CONFIG_DIR": str(root / "claude"),
               "CALIBAN_BIN": str(fake_caliban(root)), "CALIBAN_SESSIONS_DIR": str(root / "sessions"),
               "FAKE_CALIBAN_LOG": str(root / "calls.jsonl"), "FAKE_SERVE_LOG": str(root / "serve.jsonl"),
               "FAKE_SERVE_SCRIPT": json.dumps({"messages": [{"turns": [{"text": "ok"}]}]}),
               "FAKE_CALIBAN_SCRIPTS": json.dumps([{"file": str(FIXTURES / "caliban" / "tool_use_two_turns.jsonl")}])}  # fmt: skip
        spec = {"prompt": PROMPT, **spec, "options": {"pathToClaudeCodeExecutable": SHIM, **spec.get("options", {})}}
        (root / "spec.json").write_text(json.dumps(spec))
        done = subprocess.run(["node", str(PREWARM), str(sdk), f"@{root / 'spec.json'}"], capture_output=True,
                              env=env, cwd=root, timeout=90, check=False)  # fmt: skip
        self.events = [json.loads(line) for line in done.stdout.splitlines()]
        assert self.events and self.events[-1]["kind"] == "done", done.stderr.decode()

    def of(self, kind: str) -> list[Any]:
        return [e["data"] for e in self.events if e["kind"] == kind]

    def logged(self, name: str) -> list[dict[str, Any]]:
        log = self.root / name
        return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []

    @property
    def result(self) -> dict[str, Any]:
        (result,) = [m for m in self.of("msg") if m["type"] == "result"]
        return dict(result)


def test_the_claimed_folder_is_the_sessions_and_the_claim_is_accepted(sdk: Path, tmp_path: Path) -> None:
    spare = Spare(tmp_path, sdk, {"claim": {"cwd": str(tmp_path / "work")}})
    (claimed,) = spare.of("claimed")
    assert (claimed["cwd"], claimed["sessionId"], claimed["sdkMcpSettled"]) == (str(spare.work), spare.result["session_id"], True)
    assert spare.of("refused") == [] and spare.of("exception") == []
    assert (spare.result["is_error"], spare.result["result"]) == (False, "There are 3 files.")
    (call,) = spare.logged("calls.jsonl")
    assert (call["cwd"], call["stdin"]) == (str(spare.work), PROMPT)  # caliban ran in the claimed folder
    (path,) = (tmp_path / "claude" / "projects").rglob("*.jsonl")  # the session's file is that folder's
    assert path.parent.name == slug(str(spare.work))
    assert {json.loads(line).get("cwd") for line in path.read_bytes().splitlines()} <= {str(spare.work), None}
    assert "--await-claim" not in "".join(spare.of("stderr"))  # (known: no longer warned as unknown)


def test_what_the_claim_sets_reaches_caliban(sdk: Path, tmp_path: Path) -> None:
    claim = {"cwd": str(tmp_path / "work"), "permissionMode": "plan", "appendSystemPrompt": "Be terse.", "title": "t"}
    spare = Spare(tmp_path, sdk, {"claim": claim})
    assert spare.of("claimed") and spare.result["is_error"] is False
    (call,) = spare.logged("calls.jsonl")
    argv = call["argv"]
    assert argv[argv.index("--permission-mode") + 1] == "plan"
    assert call["stdin"] == f"Be terse.\n\n{PROMPT}"
    assert "caliban-claude: warning: claim: title ignored (caliban-claude keeps no session titles)" in "".join(spare.of("stderr"))


@pytest.mark.parametrize(("claim", "reason"), [
    ({"cwd": "/nonexistent/folder"}, "claim_failed: /nonexistent/folder: no such folder"),
    ({"env": {"PATH": "/evil"}}, "claim_failed: env PATH cannot be set at claim"),
    ({"permissionMode": "yolo"}, "permission_mode_not_claimable: caliban shim: unknown permission mode 'yolo'"),
], ids=["missing-folder", "env", "mode"])  # fmt: skip
def test_a_claim_that_cannot_be_honoured_is_refused_and_nothing_runs(sdk: Path, tmp_path: Path, claim: dict[str, Any],
                                                                      reason: str) -> None:  # fmt: skip
    spare = Spare(tmp_path, sdk, {"claim": {"cwd": str(tmp_path / "work"), **claim}})
    (refused,) = spare.of("refused")
    assert refused == reason and spare.of("claimed") == []
    assert spare.logged("calls.jsonl") == []  # caliban never ran, in the parking folder or elsewhere
    results = [m for m in spare.of("msg") if m["type"] == "result"]
    assert all(r["is_error"] and NOT_CLAIMED in r.get("errors", [r.get("result")])[0] for r in results)


def test_on_the_drive_backend_caliban_serves_from_the_claimed_folder(sdk: Path, tmp_path: Path) -> None:
    spare = Spare(tmp_path, sdk, {"claim": {"cwd": str(tmp_path / "work")}, "allow": True})
    assert spare.of("claimed") and (spare.result["is_error"], spare.result["result"]) == (False, "ok")
    starts = [e for e in spare.logged("serve.jsonl") if "pid" in e]
    assert len(starts) == 2 and starts[-1]["cwd"] == str(spare.work) != starts[0]["cwd"]  # the probe's was parked
    assert "knows nothing" not in "".join(spare.of("stderr"))  # a server ended before any run lost nothing
