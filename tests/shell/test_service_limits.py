"""--listen under attack: poison lines, a failure inside one connection, drip and non-reading
clients, a memory budget for unfinished lines, and the unix socket file's life. Real sockets,
real processes (the installed command), and one in-process service for an injected failure."""

from __future__ import annotations

import contextlib
import os
import socket
import stat
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest
from support_fixtures import events, expected, frames_of, lines_of, without_timing
from support_processes import TRANSLATOR, Server, exchange, peak_rss_kb, read_all

from translator.core.rates import RateCard
from translator.encoders.enriched import EnrichedEncoder
from translator.model import TurnStart
from translator.shell.modes import translate
from translator.shell.sink import Config


def poisoned_stream() -> bytes:
    """A run whose TurnEnd has a token count of 2^64 - 1, then a good run."""
    evs = [orjson.loads(ln) for ln in lines_of("tool_use_two_turns")]
    next(ev for ev in evs if ev["type"] == "TurnEnd")["usage"]["input_tokens"] = (1 << 64) - 1
    return b"".join(orjson.dumps(ev) + b"\n" for ev in evs) + events("thinking")


@pytest.mark.parametrize("fmt", ["enriched", "claude-code"])
def test_one_clients_poison_line_touches_no_other_client(tmp_path: Path, fmt: str) -> None:
    srv = Server(f"unix:{tmp_path / 's.sock'}", "--format", fmt)
    other = srv.connect()
    other.sendall(b"".join(ln + b"\n" for ln in lines_of("tool_use_two_turns")[:5]))  # mid-stream
    poisoned = frames_of(exchange(srv.connect(), poisoned_stream()))
    assert [f["subtype"] for f in poisoned if f["type"] == "result"] == ["success", "success"]
    other.sendall(b"".join(ln + b"\n" for ln in lines_of("tool_use_two_turns")[5:]))
    other.shutdown(socket.SHUT_WR)
    assert frames_of(read_all(other))[-1]["result"] == "There are 3 files."
    assert frames_of(exchange(srv.connect(), events("thinking")))[-1]["subtype"] == "success"  # still serving
    status, err = srv.stop()
    assert status == 143
    assert b":9: TurnEnd has a malformed 'usage'" in err and b"Traceback" not in err


class BrokenOutput(EnrichedEncoder):
    """An encoder that puts something that is not bytes into its output for a run of model
    "poison": the failure happens in the shell, outside the core's own guard."""

    def turn_start(self, ev: TurnStart, t: float) -> None:
        super().turn_start(ev, t)
        if ev.model == "poison":
            self.out.append("not bytes")  # type: ignore[arg-type]


async def test_a_failure_inside_one_connection_ends_only_that_connection(tmp_path: Path, capfd: Any) -> None:
    path = tmp_path / "s.sock"
    cfg = Config(
        sources=[], make_encoder=lambda sid: BrokenOutput([], session_id=sid), rates=RateCard.bundled(),
        listen=f"unix:{path}", session_id="SESSION",
    )
    poison = events("tool_use_two_turns").replace(b"claude-sonnet-4-5", b"poison")

    async def client(data: bytes, half_close: bool = True) -> bytes:
        async with await anyio.connect_unix(str(path)) as conn:
            await conn.send(data)
            if half_close:
                await conn.send_eof()
            out = b""
            with anyio.fail_after(20):
                while True:
                    try:
                        out += await conn.receive()
                    except (anyio.EndOfStream, anyio.BrokenResourceError):
                        return out

    async with anyio.create_task_group() as tg:
        tg.start_soon(translate, cfg)
        with anyio.fail_after(10):
            while not path.exists():
                await anyio.sleep(0.02)
        async with await anyio.connect_unix(str(path)) as other:  # mid-stream while the other fails
            await other.send(b"".join(ln + b"\n" for ln in lines_of("thinking")[:3]))
            assert await client(poison) == b""  # closed: its frames cannot be written at all
            await other.send(b"".join(ln + b"\n" for ln in lines_of("thinking")[3:]))
            await other.send_eof()
            out = b""
            with anyio.fail_after(20):
                while chunk := await _receive(other):
                    out += chunk
        assert without_timing(out) == expected("thinking")
        assert without_timing(await client(events("max_turns"))) == expected("max_turns")  # still serving
        tg.cancel_scope.cancel()
    err = capfd.readouterr().err
    assert f"translator: unix:{path}#2: internal error (TypeError: " in err
    assert "; closing" in err


async def _receive(conn: Any) -> bytes:
    try:
        return bytes(await conn.receive())
    except anyio.EndOfStream:
        return b""


class Drip:
    """A client that sends an unfinished line a byte at a time and reconnects when closed."""

    def __init__(self, srv: Server, every: float) -> None:
        self.srv, self.every, self.closed = srv, every, 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                sock = self.srv.connect()
                sock.sendall(b'{"type":"TurnStart",')
                while not self.stop.wait(self.every):
                    sock.sendall(b" ")
            except OSError:
                self.closed += 1  # the service closed us: come back for another slot
                time.sleep(0.05)


def test_drip_clients_cannot_keep_a_real_client_waiting(tmp_path: Path) -> None:
    # the set-up: the line timeout follows the short idle timeout
    srv = Server(f"unix:{tmp_path / 's.sock'}", "--max-connections", "2", "--idle-timeout", "2")
    drips = [Drip(srv, 1.5) for _ in range(4)]
    time.sleep(1.0)  # the drips hold both slots, and two more wait
    began = time.monotonic()
    out = exchange(srv.connect(), events("thinking"))
    waited = time.monotonic() - began
    for d in drips:
        d.stop.set()
    assert without_timing(out) == expected("thinking")
    assert waited < 15, waited  # a few line timeouts, not forever
    _, err = srv.stop()
    assert b"a line unfinished 2 s after it began; closing" in err
    assert err.count(b"all 2 connections are being served; the next clients wait") == 1  # once a minute at most
    print(f"a real client beside four drip clients waited {waited:.2f} s")  # the figure for the report


def test_a_client_that_never_reads_loses_its_slot(tmp_path: Path) -> None:
    srv = Server(f"unix:{tmp_path / 's.sock'}", "--max-connections", "1", "--idle-timeout", "2",
                 "--include-partial-messages")
    deaf = srv.connect()
    deaf.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    threading.Thread(target=lambda: _quietly(deaf.sendall, events("tool_use_two_turns") * 5000), daemon=True).start()
    time.sleep(0.5)
    began = time.monotonic()
    out = exchange(srv.connect(), events("thinking"))
    assert frames_of(out)[-1]["result"] == "17 * 23 = 391."
    assert time.monotonic() - began < 15
    deaf.close()
    _, err = srv.stop()
    assert b"its output unread for 2 s; closing" in err


def _quietly(fn: Any, *args: Any) -> None:
    with contextlib.suppress(OSError):
        fn(*args)


def test_a_live_socket_is_not_taken_over_and_the_file_goes_at_exit(tmp_path: Path) -> None:
    path = tmp_path / "s.sock"
    first = Server(f"unix:{path}")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    proc = subprocess.run([TRANSLATOR, "--listen", f"unix:{path}"], capture_output=True, timeout=20)
    assert proc.returncode == 74
    assert proc.stderr == f"translator: --listen unix:{path}: a live service already listens on this socket\n".encode()
    assert without_timing(exchange(first.connect(), events("thinking"))) == expected("thinking")
    assert first.stop()[0] == 143
    assert not path.exists()


def test_a_stale_socket_is_replaced_and_socket_mode_is_honoured(tmp_path: Path) -> None:
    path = tmp_path / "s.sock"
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(str(path))  # a socket file nobody listens on: left by a run that died
    stale.close()
    srv = Server(f"unix:{path}", "--socket-mode", "660")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o660
    assert frames_of(exchange(srv.connect(), events("thinking")))[-1]["subtype"] == "success"
    srv.stop()
    assert not path.exists()


def test_unfinished_lines_of_all_connections_stay_within_the_budget(tmp_path: Path) -> None:
    mib = 1 << 20
    srv = Server(f"unix:{tmp_path / 's.sock'}", "--max-line-bytes", str(16 * mib), "--max-pending-bytes", str(24 * mib))
    base = peak_rss_kb(srv.proc.pid)
    outputs: list[bytes] = []

    def client() -> None:
        sock = srv.connect()
        chunk = b"x" * mib
        sock.sendall(b'{"type":"TurnStart","x":"')
        for _ in range(50):
            sock.sendall(chunk)
        sock.sendall(b'"}\n' + events("thinking"))
        sock.shutdown(socket.SHUT_WR)
        outputs.append(read_all(sock))

    threads = [threading.Thread(target=client) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    peak = peak_rss_kb(srv.proc.pid)
    _, err = srv.stop()
    assert [without_timing(out) for out in outputs] == [expected("thinking")] * 4
    assert err.count(b"line longer than") + err.count(b"line skipped: unfinished lines") == 4
    # each client's 50 MiB line is never held beyond the 24 MiB budget (plus reading buffers)
    assert (peak - base) < 24 * 1024 + 16 * 1024, (base, peak)


def test_a_socket_mode_that_is_not_octal_is_a_usage_error(tmp_path: Path) -> None:
    proc = subprocess.run([TRANSLATOR, "--listen", f"unix:{tmp_path / 's.sock'}", "--socket-mode", "9x"],
                          capture_output=True, timeout=20)
    assert proc.returncode == 64
    assert proc.stderr.endswith(b"translator: argument --socket-mode: invalid octal value: '9x'\n")
