"""--listen: the translation service, with real sockets, clients and signals."""

from __future__ import annotations

import select
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest
from support_fixtures import events, expected, frames_of, lines_of, recoveries, without_timing
from support_processes import TRANSLATOR, Server, exchange, read_all

from translator.core.states import CUT, RETRIED


@pytest.fixture
def server(tmp_path: Path):
    srv = Server(f"unix:{tmp_path / 'translator.sock'}")
    yield srv
    if srv.proc.poll() is None:
        srv.stop()


def test_many_clients_at_once_each_get_their_own_translation(server: Server) -> None:
    names = ["tool_use_two_turns", "thinking", "multi_input_frames", "max_turns", "api_error"] * 6
    outputs: dict[int, bytes] = {}

    def client(i: int, name: str) -> None:
        outputs[i] = exchange(server.connect(), events(name))

    threads = [threading.Thread(target=client, args=(i, n)) for i, n in enumerate(names)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i, name in enumerate(names):
        assert without_timing(outputs[i]) == expected(name)
    assert frames_of(outputs[0])[-1]["duration_source"] == "wall"


def test_bad_bytes_slowness_and_disconnects_stay_with_their_connection(server: Server) -> None:
    slow = server.connect()  # sends a lot and reads nothing for a while
    slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    big = events("tool_use_two_turns") * 3000
    sender = threading.Thread(target=lambda: (slow.sendall(big), slow.shutdown(socket.SHUT_WR)))
    sender.start()
    rude = server.connect()  # goes away mid-run
    rude.sendall(b"\n".join(lines_of("tool_use_two_turns")[:5]) + b"\n")
    rude.close()
    garbled = exchange(server.connect(), b"\x00\xffnot json\n" + events("thinking"))
    assert without_timing(garbled) == expected("thinking")
    assert without_timing(exchange(server.connect(), events("max_turns"))) == expected("max_turns")
    out = read_all(slow)  # now it reads: everything is there, in order
    sender.join()
    assert out.count(b'"type":"result"') == 3000
    status, err = server.stop()
    assert status == 143
    assert b"invalid UTF-8" in err or b"invalid JSON" in err


def test_a_connection_that_ends_inside_a_run_is_said_with_its_label(server: Server) -> None:
    data, ((retry, _), (cut, _)) = recoveries()
    out = frames_of(exchange(server.connect(), data))
    assert [f["subtype"] for f in out if f["type"] == "result"] == ["success", "error"]
    status, err = server.stop()
    assert status == 143
    label = f"{server.address}#2"  # the first connection was the start-up probe
    assert err.decode().splitlines() == [
        f"translator: {label}:{retry}: info: {RETRIED.says}",
        f"translator: {label}:{cut}: warning: {CUT.says}",
    ]


def test_idle_connections_are_closed(tmp_path: Path) -> None:
    srv = Server(f"unix:{tmp_path / 's.sock'}", "--idle-timeout", "0.5")
    sock = srv.connect()
    sock.sendall(b"\n".join(lines_of("tool_use_two_turns")[:9]) + b"\n")
    frames = frames_of(read_all(sock))  # no shutdown from us: the service gives up
    assert frames[-1]["subtype"] == "error" and "ended before the run finished" in frames[-1]["error"]
    _, err = srv.stop()
    assert b"nothing for 0.5 s; closing" in err


def test_connection_limit_queues_the_next_client(tmp_path: Path) -> None:
    srv = Server(f"unix:{tmp_path / 's.sock'}", "--max-connections", "1")
    first = srv.connect()
    first.sendall(events("thinking"))
    time.sleep(0.3)
    second = srv.connect()  # accepted by the kernel, served when a slot frees
    second.sendall(events("max_turns"))
    second.shutdown(socket.SHUT_WR)
    second.settimeout(0.5)
    with pytest.raises(TimeoutError):
        second.recv(1)
    second.settimeout(20)
    first.shutdown(socket.SHUT_WR)
    assert without_timing(read_all(first)) == expected("thinking")
    assert without_timing(read_all(second)) == expected("max_turns")
    srv.stop()


def test_sigterm_stops_accepting_and_cancels_what_outlives_the_grace(tmp_path: Path) -> None:
    srv = Server(f"unix:{tmp_path / 's.sock'}", "--grace", "0.5")
    sock = srv.connect()
    sock.sendall(b"\n".join(lines_of("tool_use_two_turns")[:9]) + b"\n")
    time.sleep(0.2)
    srv.proc.send_signal(signal.SIGTERM)
    frames = frames_of(read_all(sock))
    assert frames[-1]["subtype"] == "cancelled"
    assert srv.proc.wait(timeout=10) == 143
    with pytest.raises(OSError):
        srv.connect()


def test_port_0_says_the_port_the_system_chose() -> None:
    proc = subprocess.Popen([TRANSLATOR, "--listen", "tcp:0", "--session-id", "SESSION"],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        assert proc.stderr is not None
        ready, _, _ = select.select([proc.stderr], [], [], 20)  # said at once, or the test fails (not hangs)
        assert ready, "the service did not say its port"
        said = proc.stderr.readline().decode()
        assert said.startswith("translator: --listen tcp:0: listening on port ") and said.endswith("\n")
        port = int(said.rsplit(" ", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=20) as sock:
            assert without_timing(exchange(sock, events("thinking"))) == expected("thinking")
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 143
    assert proc.stderr.read() == b""  # said once, and only that


def test_tcp_on_loopback() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    srv = Server(f"tcp:{port}", "--format", "claude-code")
    out = frames_of(exchange(srv.connect(), events("tool_use_two_turns")))
    assert out[-1]["result"] == "There are 3 files." and out[0]["subtype"] == "init"
    srv.stop()
