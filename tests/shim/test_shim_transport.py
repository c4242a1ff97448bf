"""The in-memory transport is a pipe to the session, as the tests that run it in place of a
process need it to be: an empty write is no end of its input (only closing it is), and what
the session writes after its last newline is still there at its end."""

from __future__ import annotations

import json
import os
from pathlib import Path

from support_inprocess import Served

ARGV = ["--output-format", "stream-json", "--verbose", "--input-format", "stream-json"]
INITIALIZE = {"type": "control_request", "request_id": "r1", "request": {"subtype": "initialize"}}


def test_an_empty_write_is_no_end_of_the_input(tmp_path: Path) -> None:
    served = Served(ARGV, {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}, tmp_path)
    served.send(b"")
    served.send(json.dumps(INITIALIZE).encode() + b"\n")
    answer = json.loads(served.line())
    assert (answer["type"], answer["response"]["request_id"]) == ("control_response", "r1")
    served.end()
    assert served.rest() == [] and served.wait() == 0


def test_the_end_of_the_output_is_kept_without_its_newline() -> None:
    from translator.shim.protocol.transport import Memory

    memory = Memory()
    memory.write(b'{"a": 1}\n{"b"')
    assert (memory.line(), memory.left_over(), memory.left_over()) == (b'{"a": 1}\n', b'{"b"', b"")
