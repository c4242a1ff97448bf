"""The shim's frame stage alone: caliban's lines in, the Claude Code frames the SDK parses out."""

from __future__ import annotations

import json
from typing import Any

import orjson
from claude_agent_sdk._internal.message_parser import parse_message
from support_fixtures import FIXTURES

from translator.shim.backends.completion import MAX_LINE
from translator.shim.backends.oneshot.conversation import Conversation
from translator.shim.place import Place

RECORDED = FIXTURES / "caliban"
HERE = Place({}, "/home/dev/project")  # the session's folder, as caliban's recorded init names it


def run(conv: Conversation, lines: list[bytes], status: int = 0) -> list[dict[str, Any]]:
    conv.start_run()
    out = [frame for line in lines for frame in conv.caliban_output(line)]
    out += conv.end_run(status, "")
    assert all(len(frame) <= MAX_LINE and frame.endswith(b"\n") for frame in out)
    frames = [orjson.loads(frame) for frame in out]
    for frame in frames:
        parse_message(frame)  # the SDK's own parser accepts every frame
    return frames


def recorded(name: str) -> list[bytes]:
    return [line + b"\n" for line in (RECORDED / name).read_bytes().splitlines()]


def test_results_count_and_cost_adds_up_across_runs() -> None:
    conv = Conversation("S", partial=False, mode="plan", place=HERE)
    first = run(conv, recorded("tool_use_two_turns.jsonl"))
    second = run(conv, recorded("benign_text.jsonl"))
    assert [f["result_index"] for f in first + second if f["type"] == "result"] == [0, 1]
    init = first[0]
    assert (init["permissionMode"], init["claude_code_version"], init["cwd"]) == (
        "plan",
        "2.1.333",
        "/home/dev/project",
    )
    assert second[-1]["total_cost_usd"] == first[-1]["total_cost_usd"] == 0.025906199999999997
    assert {f["session_id"] for f in first + second} == {"S"}


def test_structured_output_passes_through() -> None:
    lines = recorded("benign_text.jsonl")
    result = json.loads(lines[-1])
    result["structured_output"] = {"answer": 42}
    lines[-1] = json.dumps(result).encode() + b"\n"
    frames = run(Conversation("S", partial=False, mode="default", place=HERE), lines)
    assert frames[-1]["structured_output"] == {"answer": 42} and frames[-1]["subtype"] == "success"


def test_an_interrupted_run_ends_with_the_user_frame_then_the_result() -> None:
    conv = Conversation("S", partial=False, mode="default", place=HERE)
    conv.start_run()
    frames = [f for line in recorded("tool_use_two_turns.jsonl")[:2] for f in conv.caliban_output(line)]
    conv.interrupted = True
    frames += conv.end_run(124, "")  # killed before it printed a result
    tail = [orjson.loads(f) for f in frames[-2:]]
    assert tail[0]["message"]["content"] == [{"type": "text", "text": "[Request interrupted by user]"}]
    assert (tail[1]["subtype"], tail[1]["terminal_reason"]) == ("error_during_execution", "aborted_streaming")
    assert conv.last_is_error


def test_frames_stay_under_the_sdks_line_limit() -> None:
    lines = recorded("tool_use_two_turns.jsonl")
    huge = "x" * (3 << 20)
    lines[2] = json.dumps({"type": "tool_result", "tool_use_id": "toolu_01Ab3CdE4fGh5iJk6LmN7oPq", "is_error": False,
                           "content": [{"type": "text", "text": huge}]}).encode() + b"\n"  # fmt: skip
    frames = run(Conversation("S", partial=False, mode="default", place=HERE), lines)
    (tool_result,) = [f for f in frames if f["type"] == "user"]
    text = tool_result["message"]["content"][0]["content"]
    assert text.startswith("xxx") and text.endswith("exceeded the SDK's 1 MiB line limit]")
    assert frames[-1]["result"] == "There are 3 files."


def test_any_split_of_calibans_output_gives_the_same_frames() -> None:
    """caliban's stdout is read in whatever pieces the pipe gives: lines cut anywhere."""
    lines = recorded("tool_use_two_turns.jsonl")
    result = json.loads(lines[-1])
    result["structured_output"] = {"n": 3}
    lines[-1] = orjson.dumps(result) + b"\n"
    data = b"".join(lines)
    whole = run(Conversation("S", partial=False, mode="default", place=HERE), lines)
    cut = run(Conversation("S", partial=False, mode="default", place=HERE), [data[i : i + 7] for i in range(0, len(data), 7)])
    volatile = (
        "uuid",
        "timestamp",
        "duration_ms",
        "duration_api_ms",
        "ttft_ms",
        "ttft_stream_ms",
        "first_content_frame_ms",
    )

    def kept(frames: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The frames without their volatile keys, each message id (random: caliban -p names none)
        as the order of its first appearance."""
        ids: dict[str, int] = {}
        return [{k: ({**v, "id": ids.setdefault(v["id"], len(ids))} if k == "message" and "id" in v else v)
                 for k, v in f.items() if k not in volatile} for f in frames]  # fmt: skip

    assert kept(cut) == kept(whole)
    assert cut[0]["cwd"] == "/home/dev/project" and cut[-1]["structured_output"] == {"n": 3}
