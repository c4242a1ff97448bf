"""A headless turn under partial messages, whatever its first block: the same frames as the
stream without them (issue 40). The dialect has no turn boundaries and, with partial
messages, no message frames: a turn that opens with a tool call shows no delta before it."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from support_fixtures import FIXTURES, frames_of, translate_bytes

# Every partial fixture and the stream of the same conversation without partial messages.
TWINS = {
    "headless/tool_use_two_turns.partial": "headless/tool_use_two_turns",
    "headless/tool_use_two_turns.partial.pre0049": "headless/tool_use_two_turns.pre0049",
    "headless/thinking.partial": "headless/thinking",
    "caliban/tool_use_two_turns.partial": "caliban/tool_use_two_turns",
    "caliban/thinking_partial.partial": "caliban/thinking",
}
DELTAS = ("text", "thinking")
# The blocks cut from the front of each run's first turn: none, its first block, all before a call.
CUTS = ["none", "first_block", "leading_deltas"]


def test_every_partial_fixture_has_its_twin() -> None:
    partial = {str(p.relative_to(FIXTURES))[: -len(".jsonl")]
               for d in ("headless", "caliban") for p in (FIXTURES / d).glob("*.partial*.jsonl")}
    assert partial == set(TWINS)


def cut_partial(data: bytes, cut: str) -> bytes:
    """The partial stream less the deltas that open each run's first turn (`cut`)."""
    out, leading, first = [], False, None
    for line in data.splitlines():
        t = orjson.loads(line)["type"]
        if t == "system" and b'"init"' in line:
            leading, first = True, None
        elif t in DELTAS and leading:
            first = first or t
            if cut == "leading_deltas" or (cut == "first_block" and t == first):
                continue
            leading = False  # the first block is over
        else:
            leading = False
        out.append(line)
    return b"\n".join(out) + b"\n"


def cut_whole(data: bytes, cut: str) -> bytes:
    """The stream without partial messages, its runs' first messages cut alike: the blocks
    before the first tool call (or only the first block); a message left with nothing goes."""
    out, first = [], False
    for line in data.splitlines():
        frame = orjson.loads(line)
        if frame["type"] == "system" and frame.get("subtype") == "init":
            first = True
        elif frame["type"] == "message" and first:
            first = False
            blocks = frame["content"]
            lead = next((i for i, b in enumerate(blocks) if b["type"] == "tool_use"), len(blocks))
            drop = 0 if cut == "none" else min(1, lead) if cut == "first_block" else lead
            frame["content"] = blocks[drop:]
            if not frame["content"]:
                continue
            line = orjson.dumps(frame)
        out.append(line)
    return b"\n".join(out) + b"\n"


def comparable(data: bytes) -> list[dict[str, Any]]:
    """Claude Code's frames of `data`, less what only says when (the estimated clock's
    durations: a partial stream times its turns by its deltas) and the thinking estimate,
    which only thinking deltas can give (and the fresh uuid it took)."""
    run = translate_bytes(data, "claude-code")
    assert run.diagnostics == []
    out = []
    for f in frames_of(run.output):
        if f.get("subtype") == "thinking_tokens":
            continue
        out.append({k: v for k, v in f.items() if k not in ("duration_ms", "duration_api_ms", "ttft_ms", "uuid")})
    return out


@pytest.mark.parametrize("cut", CUTS)
@pytest.mark.parametrize("name", sorted(TWINS))
def test_a_streamed_turn_gives_the_frames_of_the_whole_one(name: str, cut: str) -> None:
    partial = (FIXTURES / f"{name}.jsonl").read_bytes()
    whole = (FIXTURES / f"{TWINS[name]}.jsonl").read_bytes()
    streamed, plain = cut_partial(partial, cut), cut_whole(whole, cut)
    if cut != "none":
        assert len(streamed) < len(partial)  # the cut took something
    assert comparable(streamed) == comparable(plain)


def test_a_turn_that_opens_with_a_tool_call_keeps_it() -> None:
    """Issue 40's case: tool_use_two_turns.partial without its three leading text deltas."""
    data = cut_partial((FIXTURES / "caliban/tool_use_two_turns.partial.jsonl").read_bytes(), "leading_deltas")
    out = frames_of(translate_bytes(data, "claude-code", partial=True).output)
    blocks = [b for f in out if f["type"] in ("assistant", "user") for b in f["message"]["content"]]
    assert [b["type"] for b in blocks] == ["tool_use", "tool_result", "text"]
    assert blocks[0]["id"] == blocks[1]["tool_use_id"] == "toolu_01Ab3CdE4fGh5iJk6LmN7oPq"
    assert out[-1]["result"] == "There are 3 files." and out[-1]["num_turns"] == 2
