"""Out of file descriptors (`ulimit -n`): what could not be had is named in one line, with
sysexits' EX_OSERR (71), never blamed on a file that is not at fault; a service that cannot
accept a connection says so and serves it once an fd is free. Real limits, processes, sockets."""

from __future__ import annotations

import resource
import socket
import subprocess
from pathlib import Path

from support_fixtures import events, frames_of
from support_processes import TRANSLATOR, fixture, poll

LIMITS = range(5, 13)  # below 5 the interpreter itself cannot start
OUT_OF_FDS = "Too many open files"


def limited(limit: int, *args: str, stdin: bytes = b"", cwd: Path | None = None) -> tuple[int, str]:
    proc = subprocess.run(["bash", "-c", f'ulimit -n {limit} && exec "$0" "$@"', TRANSLATOR, *args],
                          input=stdin, capture_output=True, timeout=60, cwd=cwd)
    return proc.returncode, proc.stderr.decode()


def test_out_of_fds_with_an_output_file_names_what_failed(tmp_path: Path) -> None:
    """`-o FILE` takes the fd the signals' pipe would have had: that pipe failing was reported as
    `--reject-file None: Too many open files` (74)."""
    source = fixture("tool_use_two_turns")
    seen = set()
    for limit in LIMITS:
        out = tmp_path / f"out{limit}.jsonl"
        status, err = limited(limit, "--results-only", "-o", str(out), source)
        seen.add((status, err.replace(str(out), "OUT")))
        if status == 0:
            assert frames_of(out.read_bytes())[0]["result"] == "There are 3 files."
        else:
            assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")) == []  # none left behind
    assert (0, "") in seen and (71, f"translator: cannot start: {OUT_OF_FDS}\n") in seen
    assert seen <= {
        (0, ""),
        (71, f"translator: cannot start: {OUT_OF_FDS}\n"),
        (71, f"translator: {source}: {OUT_OF_FDS}\n"),
        (71, f"translator: --output OUT: {OUT_OF_FDS}\n"),
    }


def test_out_of_fds_with_a_reject_file_is_not_blamed_on_it_unless_its_open_failed(tmp_path: Path) -> None:
    """The reject file is opened first (a FIFO's wait must be one a signal ends): the pipe
    after it is what fails (74 and the reject file's name, before)."""
    seen = {limited(limit, "--results-only", "--reject-file", "rejects", stdin=events("thinking"), cwd=tmp_path)
            for limit in LIMITS}
    assert (0, "") in seen and (71, f"translator: cannot start: {OUT_OF_FDS}\n") in seen
    assert seen <= {(0, ""), (71, f"translator: cannot start: {OUT_OF_FDS}\n"),
                    (71, f"translator: --reject-file rejects: {OUT_OF_FDS}\n")}


def test_out_of_fds_for_the_event_loop_is_one_line() -> None:
    """The event loop's own fds failing (--follow): one line, and no traceback from the half-made
    loop as it is freed ("Exception ignored in: BaseEventLoop.__del__")."""
    assert limited(5, "--follow", "no-such-log") == (71, f"translator: cannot start: {OUT_OF_FDS}\n")


def listening(path: Path) -> bool:
    """Whether a unix socket is listening at `path` (/proc/net/unix: __SO_ACCEPTCON in its
    flags), known without a connection of our own, which would take a place in the backlog."""
    for line in Path("/proc/net/unix").read_text().splitlines()[1:]:
        fields = line.split()
        if len(fields) >= 8 and fields[-1] == str(path) and int(fields[3], 16) & 0x10000:
            return True
    return False


def test_a_service_out_of_fds_says_so_once_and_serves_the_waiting_clients_when_it_can(tmp_path: Path) -> None:
    """The service's fd limit lowered below what it holds (prlimit, Linux; the fds it has stay
    good): the clients wait in the backlog, the service says why once (the accept is retried);
    the limit raised again, they are served."""
    path = tmp_path / "t.sock"
    proc = subprocess.Popen([TRANSLATOR, "--listen", f"unix:{path}"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        poll(lambda: listening(path))  # not path.exists: the socket's file is there at bind, before listen
        limits = resource.prlimit(proc.pid, resource.RLIMIT_NOFILE)
        resource.prlimit(proc.pid, resource.RLIMIT_NOFILE, (3, limits[1]))
        clients = []
        for _ in range(2):
            client = socket.socket(socket.AF_UNIX)
            client.connect(str(path))  # into the backlog
            client.sendall(events("thinking"))
            client.shutdown(socket.SHUT_WR)
            clients.append(client)
        assert proc.stderr is not None
        said = proc.stderr.readline().decode()
        assert said == f"translator: unix:{path}: cannot accept a connection: {OUT_OF_FDS}; trying again every 0.5 s\n"
        resource.prlimit(proc.pid, resource.RLIMIT_NOFILE, limits)
        for client in clients:
            client.settimeout(30)
            out = b""
            while chunk := client.recv(65536):
                out += chunk
            client.close()
            assert frames_of(out)[-1]["subtype"] == "success"
        proc.terminate()
        assert proc.wait(timeout=30) == 143
        assert proc.stderr.read() == b""  # said once
    finally:
        proc.kill()
        proc.wait()


def test_out_of_fds_for_the_batch_s_worker_pool_is_one_line(tmp_path: Path) -> None:
    """`--out-dir`: the pool's pipes failing was an internal error (70)."""
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "a.ndjson").write_bytes(events("thinking"))
    seen = set()
    for limit in range(6, 13):  # at 5 glibc cannot load what a thread's exit needs (an abort)
        status, err = limited(limit, "--out-dir", str(tmp_path / f"out{limit}"), str(logs))
        seen.add((status, err if status != 0 else ""))
    assert (71, f"translator: cannot start the worker processes: {OUT_OF_FDS}\n") in seen
    assert {status for status, _ in seen} <= {0, 71, 74} and all("internal error" not in err for _, err in seen)
