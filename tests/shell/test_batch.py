"""--out-dir: batch replay of saved logs, end to end through the installed command."""

from __future__ import annotations

import gzip
import io
import os
import re
import shutil
import signal
import subprocess
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import BinaryIO

import orjson
import pytest
from support_fixtures import FIXTURES, events, recoveries
from support_processes import TRANSLATOR, children, poll, run

from bench.gen import generate
from translator.core.rates import RateCard
from translator.encoders.observed import session_id_of as session_id
from translator.shell.local_disk import LocalStore
from translator.shell.replay import Job, translate_file


def batch(*args: str) -> subprocess.CompletedProcess[bytes]:
    return run(*args, timeout=120)


def logs(tmp_path: Path) -> Path:
    src = tmp_path / "logs"
    (src / "team").mkdir(parents=True)
    shutil.copy(FIXTURES / "tool_use_two_turns.events.jsonl", src / "one.ndjson")
    (src / "team" / "two.jsonl.gz").write_bytes(gzip.compress(events("multi_input_frames")))
    (src / "notes.txt").write_text("not a log")
    return src


def listing(out: Path) -> list[str]:
    """What a user sees in the output directory (the hidden up-to-date records aside)."""
    return sorted(p.relative_to(out).as_posix() for p in out.rglob("*")
                  if not any(part.startswith(".") for part in p.relative_to(out).parts))


def test_a_directory_is_translated_file_by_file_and_reruns_are_identical(tmp_path: Path) -> None:
    src, out = logs(tmp_path), tmp_path / "out"
    proc = batch("--out-dir", str(out), "--jobs", "2", str(src))
    assert proc.returncode == 0, proc.stderr
    assert listing(out) == ["one.enriched.jsonl", "team", "team/two.enriched.jsonl"]
    single = subprocess.run(
        [TRANSLATOR, "--session-id", session_id(str(src / "one.ndjson")), str(src / "one.ndjson")], capture_output=True
    )
    assert (out / "one.enriched.jsonl").read_bytes() == single.stdout
    assert len(proc.stderr.splitlines()) == 1  # a summary and nothing else when not a terminal
    assert proc.stderr.startswith(b"translator: 2 translated, 0 skipped (up to date), 0 failed")

    first = {p: p.read_bytes() for p in out.rglob("*.jsonl")}
    again = batch("--out-dir", str(out), str(src))
    assert b"0 translated, 2 skipped" in again.stderr
    forced = batch("--out-dir", str(out), "--force", str(src))
    assert b"2 translated, 0 skipped" in forced.stderr
    assert {p: p.read_bytes() for p in out.rglob("*.jsonl")} == first


def test_claude_code_batch_output_is_deterministic(tmp_path: Path) -> None:
    src, out = logs(tmp_path), tmp_path / "out"
    batch("--out-dir", str(out), "--format", "claude-code", str(src))
    first = (out / "team" / "two.claude-code.jsonl").read_bytes()
    batch("--out-dir", str(out), "--format", "claude-code", "--force", str(src))
    assert (out / "team" / "two.claude-code.jsonl").read_bytes() == first
    assert first.count(b'"type":"result"') == 2


def test_inputs_with_the_same_name_get_outputs_and_session_ids_of_their_own(tmp_path: Path) -> None:
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        shutil.copy(FIXTURES / "tool_use_two_turns.events.jsonl", tmp_path / folder / "run.jsonl")
    for args in (["a/run.jsonl", "b/run.jsonl"], ["a", "b"], ["a/", "b/run.jsonl"]):
        out = tmp_path / f"out-{len(os.listdir(tmp_path))}"
        proc = subprocess.run([TRANSLATOR, "--out-dir", str(out), *args], capture_output=True, cwd=tmp_path)
        assert proc.returncode == 0 and b"2 translated" in proc.stderr, (args, proc.stderr)
        assert listing(out) == ["a", "a/run.enriched.jsonl", "b", "b/run.enriched.jsonl"]
        ids = {(out / f / "run.enriched.jsonl").read_bytes().split(b'"session_id":"')[1][:36] for f in "ab"}
        assert ids == {session_id(str(tmp_path / f / "run.jsonl")).encode() for f in "ab"}


def test_two_inputs_that_would_share_an_output_are_refused(tmp_path: Path) -> None:
    shutil.copy(FIXTURES / "tool_use_two_turns.events.jsonl", tmp_path / "x.jsonl")
    shutil.copy(FIXTURES / "tool_use_two_turns.events.jsonl", tmp_path / "x.ndjson")
    proc = batch("--out-dir", str(tmp_path / "out"), str(tmp_path))
    assert proc.returncode == 64
    assert proc.stderr.decode() == f"translator: {tmp_path}/x.jsonl and {tmp_path}/x.ndjson would both be written to x.enriched.jsonl\n"
    assert not list((tmp_path / "out").iterdir())


def test_up_to_date_means_made_with_the_same_options_rates_and_input(tmp_path: Path) -> None:
    src, out = logs(tmp_path), tmp_path / "out"
    assert batch("--out-dir", str(out), str(src)).returncode == 0
    rates = tmp_path / "rates.json"
    rates.write_text('{"rates": [{"model": "*", "input": 1, "output": 2}]}')
    for extra in (["--include-partial-messages"], ["--results-only"], ["--rates", str(rates)], [], ["--strict"]):
        proc = batch("--out-dir", str(out), *extra, str(src))
        assert b"2 translated, 0 skipped" in proc.stderr, (extra, proc.stderr)
        again = batch("--out-dir", str(out), *extra, str(src))
        assert b"0 translated, 2 skipped" in again.stderr, extra
    with_card = batch("--out-dir", str(out), "--force", "--rates", str(rates), str(src))
    assert with_card.returncode == 0
    assert b'"total_cost_usd":0.0,' not in (out / "one.enriched.jsonl").read_bytes()  # the new card's prices
    os.utime(src / "one.ndjson")  # touched: a new input
    assert b"1 translated, 1 skipped" in batch("--out-dir", str(out), "--rates", str(rates), str(src)).stderr


def test_recoveries_are_said_per_file_and_fail_nothing(tmp_path: Path) -> None:
    # Said from the worker with the file and line, in the log format asked for; not a bad line,
    # so --on-invalid fail passes the file and the status stays 0.
    data, said = recoveries()
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "cut.ndjson").write_bytes(data)
    out = tmp_path / "out"
    proc = batch("--log-format", "json", "--on-invalid", "fail", "--out-dir", str(out), str(tmp_path / "in"))
    assert proc.returncode == 0, proc.stderr
    *records, summary = [orjson.loads(line) for line in proc.stderr.splitlines()]
    assert [(r["line"], r["kind"], r["level"]) for r in records] == [
        (line, kind, level) for (line, kind), level in zip(said, ["info", "warning"], strict=True)
    ]
    assert all(r["source"].endswith("cut.ndjson") for r in records)
    assert summary["message"].startswith("1 translated, 0 skipped (up to date), 0 failed")
    results = [orjson.loads(ln) for ln in (out / "cut.enriched.jsonl").read_bytes().splitlines()
               if b'"type":"result"' in ln]
    assert [r["subtype"] for r in results] == ["success", "error"]


def test_an_empty_selection_warns(tmp_path: Path) -> None:
    (tmp_path / "logs").mkdir()
    proc = batch("--out-dir", str(tmp_path / "out"), str(tmp_path / "logs"))
    assert proc.returncode == 0
    assert proc.stderr.splitlines()[0] == f"translator: warning: no *.ndjson or *.jsonl files (optionally .gz) under {tmp_path}/logs".encode()


def test_user_errors_are_one_line_with_their_sysexit(tmp_path: Path) -> None:
    log = tmp_path / "f.jsonl"
    shutil.copy(FIXTURES / "tool_use_two_turns.events.jsonl", log)
    cases = [
        (["--out-dir", str(tmp_path / "o"), "/nonexistent"], 66, "translator: /nonexistent: No such file or directory"),
        (["--out-dir", str(tmp_path / "o"), "-"], 64,
         "translator: -: standard input cannot be batch-translated; name files or directories"),
        (["--out-dir", "/dev/full/x", str(log)], 73, "translator: --out-dir /dev/full/x: Not a directory"),
    ]
    for args, status, message in cases:
        proc = batch(*args)
        assert (proc.returncode, proc.stderr.decode()) == (status, message + "\n"), args


def test_a_failing_file_is_named_and_the_others_finish(tmp_path: Path) -> None:
    src, out = logs(tmp_path), tmp_path / "out"
    (src / "broken.ndjson.gz").write_bytes(gzip.compress(events("thinking"))[:-12])  # cut short
    proc = batch("--out-dir", str(out), str(src))
    assert proc.returncode == 65
    lines = proc.stderr.decode().splitlines()
    assert lines[0].startswith("translator: 2 translated, 0 skipped (up to date), 1 failed;")
    assert lines[1].startswith("translator: failed: broken.ndjson.gz: broken gzip:")
    assert not list(out.rglob("broken*")) and not list(out.rglob("*.tmp"))
    assert listing(out) == ["one.enriched.jsonl", "team", "team/two.enriched.jsonl"]


def test_an_output_that_cannot_be_committed_fails_its_file_alone(tmp_path: Path) -> None:
    """Outputs of a chunk are committed together: one that cannot be (a folder in its place)
    is named, gets no up-to-date entry and leaves no temporary; the others of its chunk are written."""
    src, out = logs(tmp_path), tmp_path / "out"
    (out / "one.enriched.jsonl" / "inside").mkdir(parents=True)
    proc = batch("--out-dir", str(out), "--jobs", "1", str(src))
    assert proc.returncode == 74
    lines = proc.stderr.decode().splitlines()
    assert lines[0].startswith("translator: 1 translated, 0 skipped (up to date), 1 failed;")
    assert lines[1] == "translator: failed: one.ndjson: Is a directory"
    assert (out / "team" / "two.enriched.jsonl").is_file() and not list(out.rglob("*.tmp"))
    records = [[orjson.loads(line) for line in r.read_bytes().splitlines()] for r in (out / ".translator.done").glob("*.done")]
    assert sorted(f for head, *_ in records for f in head["files"]) == ["one.ndjson", "team/two.jsonl.gz"]
    assert [e["file"] for _, *entries in records for e in entries] == ["team/two.jsonl.gz"]  # none for the failed one
    again = batch("--out-dir", str(out), "--jobs", "1", str(src))
    assert again.stderr.decode().startswith("translator: 0 translated, 1 skipped (up to date), 1 failed;")


def test_an_earlier_versions_markers_are_removed_and_its_outputs_made_again(tmp_path: Path) -> None:
    """Before the records, a hidden `.<output>.done` marker stood beside each output: the first
    run now makes the outputs again (the version is in the key) and removes the markers that
    stand beside an output, no other file."""
    src, out = logs(tmp_path), tmp_path / "out"
    (out / "team").mkdir(parents=True)
    for name in ("one.enriched.jsonl", "team/two.enriched.jsonl"):
        (out / name).write_bytes(b"old bytes\n")
        (out / name).with_name(f".{(out / name).name}.done").write_bytes(b'{"key": "old", "results": []}')
    (out / ".mine.jsonl.done").write_bytes(b"not the batch's")  # beside no output: left alone
    proc = batch("--out-dir", str(out), "--jobs", "1", str(src))
    assert proc.stderr.decode().startswith("translator: 2 translated, 0 skipped"), proc.stderr
    assert sorted(p.name for p in out.rglob(".*.done") if p.is_file()) == [".mine.jsonl.done"]
    assert (out / "one.enriched.jsonl").read_bytes() != b"old bytes\n"


def test_the_local_listing_is_what_rglob_found(tmp_path: Path) -> None:
    """files_under walks with scandir now: the same files as pathlib's rglob (links to files
    in, linked folders not entered), each with its size and modification time."""
    root = tmp_path / "logs"
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "b" / "x.ndjson").write_bytes(b"12345")
    (root / "y.jsonl").write_bytes(b"1")
    (root / "link.ndjson").symlink_to(root / "y.jsonl")
    (root / "linked").symlink_to(root / "a", target_is_directory=True)
    (root / "dangling.ndjson").symlink_to(root / "nowhere")
    got = sorted((f.path, f.size, f.mtime) for f in LocalStore().files_under(str(root)))
    want = sorted((str(p), p.stat().st_size, p.stat().st_mtime) for p in root.rglob("*") if p.is_file())
    assert got == want and len(got) == 3


def test_a_results_table_named_by_a_file_url_is_written_as_a_local_path_is(tmp_path: Path) -> None:
    """`file://` is local disk: the table is made as for a plain path (through fsspec it failed,
    74, on a folder not there yet)."""
    from deltalake import DeltaTable

    src = logs(tmp_path)
    proc = batch("--results-table", f"file://{tmp_path}/new/table", str(src))
    assert proc.returncode == 0, proc.stderr
    plain = batch("--results-table", str(tmp_path / "plain"), str(src))
    assert plain.returncode == 0, plain.stderr
    rows = [sorted(DeltaTable(str(t)).to_pyarrow_table().to_pylist(), key=lambda r: (r["source"], r["run_index"]))
            for t in (tmp_path / "new/table", tmp_path / "plain")]  # (a table's files come in no set order)
    assert rows[0] == rows[1] and rows[0]
    assert not list((tmp_path / "new").rglob("*.tmp"))


class Exploding:
    """A store whose input fails in the middle with an exception the core never expects:
    the last-resort guard of a worker, proven by injecting the failure."""

    def __init__(self, inner: LocalStore) -> None:
        self.inner = inner

    @contextmanager
    def open_input(self, path: str) -> Iterator[BinaryIO]:
        class Boom(io.BytesIO):
            def read(self, n: int | None = -1) -> bytes:
                if self.tell():
                    raise RuntimeError("the poison")
                return super().read(n)

        yield Boom(Path(path).read_bytes())

    def writer(self, path: str) -> AbstractContextManager[BinaryIO]:
        return self.inner.writer(path)

    def together(self, record: str | None = None, head: bytes = b"") -> AbstractContextManager[dict[str, OSError]]:
        return self.inner.together(record, head)

    def close_record(self, record: str, head: bytes, tail: bytes) -> None:
        self.inner.close_record(record, head, tail)


def test_an_unexpected_exception_fails_only_its_file(tmp_path: Path, bundled_rates: RateCard) -> None:
    from translator.core.translator import Options

    source = FIXTURES / "tool_use_two_turns.events.jsonl"
    job = Job(format="enriched", partial=False, results_only=False, rates=bundled_rates, rates_digest="",
              options=Options(), clock="auto", source=str(source), relative="x.ndjson",
              target=str(tmp_path / "x.enriched.jsonl"), size=source.stat().st_size)
    done = translate_file(job, Exploding(LocalStore()))  # type: ignore[arg-type]
    assert (done.error, done.data_error) == ("RuntimeError: the poison", True)
    assert list(tmp_path.iterdir()) == []  # no output, no temporary
    assert translate_file(job, LocalStore()).error is None


def test_stale_temporaries_are_removed_and_live_ones_kept(tmp_path: Path) -> None:
    src, out = logs(tmp_path), tmp_path / "out"
    (out / "team").mkdir(parents=True)
    dead = next(pid for pid in range(2**22, 2**21, -1) if not os.path.exists(f"/proc/{pid}"))  # not running
    stale = out / "team" / f".two.enriched.jsonl.{dead}.tmp"
    live = out / f".one.enriched.jsonl.{os.getpid()}.tmp"
    stale.write_text("half")
    live.write_text("being written")
    assert batch("--out-dir", str(out), str(src)).returncode == 0
    assert not stale.exists() and live.exists()


def test_workers_die_with_the_batch(tmp_path: Path) -> None:
    src = tmp_path / "logs"
    src.mkdir()
    generate(str(tmp_path / "big.ndjson"), 25)
    for n in range(6):
        shutil.copy(tmp_path / "big.ndjson", src / f"big-{n}.ndjson")
    proc = subprocess.Popen([TRANSLATOR, "--out-dir", str(tmp_path / "out"), "--jobs", "2", str(src)],
                            stderr=subprocess.DEVNULL)
    poll(lambda: len(children(proc.pid)) >= 2, 60)
    workers = children(proc.pid)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    poll(lambda: not any(Path(f"/proc/{pid}").exists() for pid in workers), 30)


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGTERM, 143), (signal.SIGINT, 130), (signal.SIGHUP, 129)])
def test_a_stop_signal_ends_the_batch_with_its_summary(tmp_path: Path, signum: int, status: int) -> None:
    """Each stop signal, as Ctrl-C: the summary says the batch was interrupted, the status is
    the signal's, no temporary is left. SIGTERM and SIGHUP killed it unsaid, temporaries left."""
    src, out = tmp_path / "logs", tmp_path / "out"
    src.mkdir()
    generate(str(tmp_path / "big.ndjson"), 25)
    for n in range(12):
        shutil.copy(tmp_path / "big.ndjson", src / f"big-{n}.ndjson")
    proc = subprocess.Popen([TRANSLATOR, "--out-dir", str(out), "--jobs", "2", str(src)], stderr=subprocess.PIPE)
    poll(lambda: len(children(proc.pid)) >= 2, 60)  # the workers are at it
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == status
    assert re.fullmatch(rb"translator: \d+ translated, 0 skipped \(up to date\), 0 failed; .* \(interrupted\)\n", err)
    assert [p.name for p in out.rglob("*.tmp")] == []


@pytest.mark.parametrize("fifo_writer", [False, True])
def test_a_stop_signal_ends_a_worker_stuck_on_its_input(tmp_path: Path, fifo_writer: bool) -> None:
    """A worker that waits on its input (a FIFO with no writer yet, or one that keeps it open
    without writing, its output's temporary begun) held the batch after its summary until the
    worker was done, for ever here; it is ended, its temporary removed, the status 143 at once."""
    src, out = tmp_path / "logs", tmp_path / "out"
    src.mkdir()
    stuck = src / "stuck.ndjson"
    os.mkfifo(stuck)
    shutil.copy(FIXTURES / "thinking.events.jsonl", src / "done.ndjson")
    proc = subprocess.Popen([TRANSLATOR, "--out-dir", str(out), "--jobs", "2", str(stuck), str(src / "done.ndjson")],
                            stderr=subprocess.PIPE)
    writer = None
    try:
        if fifo_writer:
            writer = open(stuck, "wb")  # noqa: SIM115 (the writer of the worker's input, held open)
            writer.write(events("thinking")[:200])
            writer.flush()
            poll(lambda: list(out.glob(".stuck.*.tmp")), 60)
        poll(lambda: (out / "done.enriched.jsonl").exists(), 60)  # the other file is done: one worker waits
        workers = children(proc.pid)
        assert workers
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        if writer is not None:
            writer.close()
        proc.kill()
    assert proc.returncode == 143
    assert re.fullmatch(rb"translator: 1 translated, 0 skipped \(up to date\), 0 failed; .* \(interrupted\)\n", err), err
    assert not any(Path(f"/proc/{pid}").exists() for pid in workers)
    assert [p.name for p in out.rglob("*.tmp")] == [] and (out / "done.enriched.jsonl").exists()
    assert not (out / "stuck.enriched.jsonl").exists()


# The batch, with a stop signal sent to itself from an at-fork hook while its pool forks the
# first worker: where one landed under load (logging's hook said "Exception ignored").
LANDS_IN_A_FORK = """
import os, signal, sys
from translator.cli.command import run

def land() -> None:
    if not sent:
        sent.append(1)
        os.kill(os.getpid(), {signum})
        for _ in range(1000):  # the handler runs here, inside the hook
            pass

sent = []
os.register_at_fork(after_in_parent=land)
sys.argv = ["translator", "--out-dir", {out!r}, "--jobs", "2", *{more!r}, {src!r}]
run()
"""


@pytest.mark.parametrize("fleet", [False, True])
@pytest.mark.parametrize(("signum", "status"), [(signal.SIGTERM, 143), (signal.SIGINT, 130), (signal.SIGHUP, 129)])
def test_a_stop_signal_while_the_pool_forks_is_not_lost(tmp_path: Path, signum: int, status: int, fleet: bool) -> None:
    """It was a KeyboardInterrupt raised where the signal landed: in an at-fork hook it was
    swallowed, and the batch ran on to its end, 0 (or it escaped before the summary: 130, not
    a word). Now the signal is noted and the pool's loop stops on it; on the fleet path too
    (a URL among the paths: here the results table's), whose handler still raises."""
    import sys

    src, out = logs(tmp_path), tmp_path / "out"
    more = ["--results-table", f"file://{tmp_path}/table"] if fleet else []
    code = LANDS_IN_A_FORK.format(signum=int(signum), out=str(out), src=str(src), more=more)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60)
    assert proc.returncode == status, proc.stderr
    assert re.fullmatch(rb"translator: \d translated, 0 skipped \(up to date\), 0 failed; .* \(interrupted\)\n",
                        proc.stderr), proc.stderr
    assert [p.name for p in out.rglob("*.tmp")] == []


def test_progress_is_in_bytes_within_a_file_on_a_terminal(tmp_path: Path) -> None:
    import fcntl
    import pty
    import struct
    import termios

    src, out = logs(tmp_path), tmp_path / "out"
    generate(str(src / "big.ndjson"), 60)
    pid, fd = pty.fork()
    if pid == 0:  # the child: stderr (and stdout) on a pseudo-terminal 100 columns wide
        fcntl.ioctl(2, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
        os.execv(TRANSLATOR, [TRANSLATOR, "--out-dir", str(out), "--jobs", "1", "--format", "claude-code", str(src)])
    seen = b""
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert b"3/3 files" in seen and b"100%" in seen  # tqdm: files done, bytes, rate, ETA
    assert b"3 translated, 0 skipped" in seen
    shown = {int(p) for p in re.findall(rb"\r\d/3 files: +(\d+)%", seen)}
    assert any(5 < p < 95 for p in shown), seen  # the bar moved while the one big file was read
    assert b"MB" in seen and b"MiB" not in seen  # one unit, as in the summary


def test_a_batch_started_without_stderr_still_translates(tmp_path: Path) -> None:
    """`2>&-` (Python has no sys.stderr): the progress bar's look at it raised and the batch
    died, 70, unsaid, nothing translated; now its warnings are lost, never put on stdout."""
    src, out = tmp_path / "logs", tmp_path / "out"
    src.mkdir()
    (src / "a.jsonl").write_bytes(b"not json\n" + events("thinking"))
    proc = subprocess.run(["sh", "-c", 'exec "$@" 2>&-', "sh", TRANSLATOR, "--out-dir", str(out), str(src)],
                          capture_output=True, timeout=120)
    assert (proc.returncode, proc.stdout) == (0, b"")
    assert orjson.loads((out / "a.enriched.jsonl").read_bytes().splitlines()[-1])["result"] == "17 * 23 = 391."
