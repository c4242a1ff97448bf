"""Retried turns, the ADR 0055 envelope, and a post-ADR 0049 headless result left as printed."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from support_fixtures import drive, drive_cc, line, reported, results, run_end, turn

from translator.core.translator import LOST_RUN_END


def start(index: int, message_id: str = "m") -> bytes:
    return line(type="TurnStart", turn_index=index, message_id=message_id, model="claude-sonnet-4-5")


def text(index: int, piece: str, block: int = 0) -> bytes:
    return line(type="AssistantTextDelta", turn_index=index, content_block_index=block, text=piece)


def line_of(head: bytes) -> int:
    """The number of the line that follows `head`."""
    return head.count(b"\n") + 1


# A retry of turn 0 (the #245 drain retry, or Stage A), then a retry of turn 1 after a tool.
RETRIED_0 = start(0, "a1") + text(0, "Here is the ") + text(0, "truncat")
RETRIED_1 = turn(0, "one") + start(1, "b1") + text(1, "half")


@pytest.mark.parametrize("head", [RETRIED_0, RETRIED_1])
def test_a_retried_turn_is_the_same_run(head: bytes) -> None:
    index = 0 if head is RETRIED_0 else 1
    data = head + turn(index, "Here is the full answer.").replace(b'"msg_', b'"retry_') + run_end(turns=index + 1)
    run = drive(data)
    (result,) = results(run.output)
    # The retry is said where the turn starts again (information, not a bad line).
    assert reported(run.diagnostics) == [(line_of(head), "retried_turn")]
    assert run.diagnostics[0].startswith(f"translator: test:{line_of(head)}: info: the open turn was sent again")
    assert run.core.bad_lines == 0 and run.rejects == b""
    assert (result["subtype"], result["result"], result["num_turns"]) == ("success", "Here is the full answer.", index + 1)


def test_the_abandoned_attempt_is_not_the_fallback_reply() -> None:
    # No TurnEnd has text: the reply falls back to the streamed text, of the final attempt only.
    end = line(type="RunEnd", final_messages=[], total_usage={"input_tokens": 0, "output_tokens": 0},
               turn_count=0, stopped_for={"StreamIdle": {"secs": 30, "nanos": 0}})
    (result,) = results(drive(RETRIED_0 + start(0, "a2") + text(0, "Working on") + end).output)
    assert result["error"] == "stream idle for 30s"
    assert result["last_assistant_text"] == "Working on"


def test_only_turn_zero_after_a_completed_turn_means_a_lost_run_end() -> None:
    lost = drive(turn(0, "one") + turn(0, "two") + run_end(turns=1))
    first, second = results(lost.output)
    assert first["error"] == LOST_RUN_END and second["result"] == "two"
    assert reported(lost.diagnostics) == [(line_of(turn(0, "one")), "lost_run_end")]
    # turn 0 sent twice before any TurnEnd: a retry, one result (and each repeat said)
    retried = drive(start(0) + start(0) + turn(0, "x") + run_end(turns=1))
    assert len(results(retried.output)) == 1
    assert reported(retried.diagnostics) == [(2, "retried_turn"), (3, "retried_turn")]


def test_usage_is_the_sum_of_the_turns_not_the_run_total() -> None:
    # RunEnd.total_usage also counts the abandoned attempt; the agent's driver reports the turns'.
    data = RETRIED_0 + turn(0, "ok", usage={"input_tokens": 10, "output_tokens": 5}) + run_end(
        turns=1, total_usage={"input_tokens": 20, "output_tokens": 9})
    (result,) = results(drive(data).output)
    assert (result["total_input_tokens"], result["total_output_tokens"]) == (10, 5)
    assert result["usage"] == {"input_tokens": 10, "output_tokens": 5}


@pytest.mark.parametrize("partial", [False, True])
def test_claude_code_marks_the_retry_and_writes_only_the_final_attempt(partial: bool) -> None:
    data = RETRIED_0 + turn(0, "Here is the full answer.") + run_end(turns=1)
    frames, diagnostics = drive_cc(data, partial=partial)
    assert reported(diagnostics) == [(line_of(RETRIED_0), "retried_turn")]
    kinds = [(f["type"], f.get("subtype")) for f in frames]
    assert ("system", "api_retry") in kinds
    texts = [f["message"]["content"][0]["text"] for f in frames if f["type"] == "assistant"]
    assert texts == ["Here is the full answer."]
    assert frames[-1]["num_turns"] == 1 and frames[-1]["result"] == "Here is the full answer."
    if partial:
        starts = [f["event"]["message"]["id"] for f in frames
                  if f["type"] == "stream_event" and f["event"]["type"] == "message_start"]
        assert starts == ["a1", "msg_0"]
        assert kinds.index(("system", "api_retry")) < [i for i, f in enumerate(frames)
                                                         if f["type"] == "stream_event"][-1]


# ------------------------------------------------------------------ the envelope (ADR 0055)

def enveloped(data: bytes) -> list[dict[str, Any]]:
    # serde_json without preserve_order: the envelope's keys, and the event's, alphabetical
    return [{"event": dict(sorted(orjson.loads(ln).items())), "v": 1} for ln in data.splitlines()]


PLAIN = turn(0, "hello") + run_end(turns=1)


@pytest.mark.parametrize("shape", ["lines", "array", "poll"])
def test_envelopes_translate_like_the_plain_stream(shape: str) -> None:
    items = enveloped(PLAIN)
    if shape == "lines":
        data = b"".join(orjson.dumps(i) + b"\n" for i in items)
    elif shape == "array":
        data = orjson.dumps(items) + b"\n"
    else:
        data = orjson.dumps({"events": items, "next_cursor": 4, "permission_request": None, "status": "done"}) + b"\n"
    for strict in (False, True):
        run = drive(data, strict=strict)
        assert run.diagnostics == []
        assert run.output == drive(PLAIN).output


def test_an_unknown_envelope_version_is_reported() -> None:
    run = drive(b'{"event":{"type":"TurnStart"},"v":2}\n')
    assert len(run.diagnostics) == 1 and "envelope version 2" in run.diagnostics[0]


# ------------------------------------------------------------------ headless results as printed

def test_a_post_adr_0049_result_is_never_rewritten() -> None:
    # With --include-partial-messages the agent's result is the final reply ("beta"), although
    # every text delta of the run streamed before it.
    upstream = {"type": "result", "subtype": "success", "result": "beta", "session_id": "s",
                "total_cost_usd": 0.0, "turns": 2, "total_input_tokens": 2, "total_output_tokens": 2,
                "num_turns": 2, "is_error": False, "duration_ms": 3,
                "usage": {"input_tokens": 2, "output_tokens": 2}, "turns_without_edit": 1,
                "no_edit_nudge_emitted": False}
    data = b'{"type":"text","delta":"alpha"}\n{"type":"text","delta":"beta"}\n' + orjson.dumps(upstream) + b"\n"
    (result,) = results(drive(data).output)
    added = {"duration_api_ms", "duration_source"}
    assert {k: v for k, v in result.items() if k not in added} == upstream
    keys = list(result)
    assert keys[keys.index("duration_ms") + 1 : keys.index("duration_ms") + 3] == ["duration_api_ms", "duration_source"]


def test_an_interactive_worker_conversation_is_one_run() -> None:
    # ADR 0047: an operator's second message continues the same run (turn_index keeps rising,
    # nothing marks the new input): one result, the last reply, both turns counted.
    (result,) = results(drive(turn(0, "first answer") + turn(1, "second answer") + run_end(turns=2)).output)
    assert (result["result"], result["num_turns"]) == ("second answer", 2)
