"""--format claude-code content blocks from the agent's real messages: thinking without a
signature, empty text blocks, block positions that do not match, unparseable tool input."""

from __future__ import annotations

from typing import Any

import pytest
from support_fixtures import FIXTURES, claude_code, line, run_end

SAMPLES = FIXTURES / "samples"


def blocks(frames: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [f["message"]["content"][0] for f in frames if f["type"] == "assistant"]


@pytest.mark.parametrize("partial", [False, True])
@pytest.mark.parametrize("name", ["raw-derived-from-code/headless_thinking_then_text.ndjson",
                                  "headless-derived-from-code/headless_thinking_then_text.ndjson",
                                  "headless-derived-from-code/headless_thinking_then_text.partial.ndjson"])
def test_a_thinking_block_without_signature_gets_an_empty_one(name: str, partial: bool) -> None:
    from claude_agent_sdk._internal.message_parser import parse_message

    frames = claude_code((SAMPLES / name).read_bytes(), partial)
    assert blocks(frames) == [{"type": "thinking", "thinking": "Let me think...", "signature": ""},
                              {"type": "text", "text": "answer"}]
    assert all(parse_message(f) is not None for f in frames)


def test_headless_blocks_come_in_claude_code_key_order() -> None:
    frames = claude_code((SAMPLES / "headless-derived-from-code/plan_mode_denied_image_signature_cache.ndjson").read_bytes())
    assert [list(b) for b in blocks(frames)] == [
        ["type", "thinking", "signature"], ["type", "text"], ["type", "id", "name", "input"],
        ["type", "id", "name", "input"], ["type", "text"]]


START = line(type="TurnStart", turn_index=0, message_id="m", model="gpt-5")


def text(block: int, piece: str) -> bytes:
    return line(type="AssistantTextDelta", turn_index=0, content_block_index=block, text=piece)


def turn_end(content: list[dict[str, Any]]) -> bytes:
    return line(type="TurnEnd", turn_index=0, assistant_message={"role": "assistant", "content": content},
                tool_results=[], stop_reason="tool_use", usage={"input_tokens": 1, "output_tokens": 1},
                ttft=None, tbt=None)


@pytest.mark.parametrize("partial", [False, True])
def test_an_empty_text_block_is_dropped_and_blocks_match_by_content(partial: bool) -> None:
    # OpenAI's empty first text block: streamed at index 0, dropped from the message, so the
    # tool call is block 1 in the events and block 0 in the message.
    data = (START + text(0, "")
            + line(type="ToolCallStart", turn_index=0, tool_use_id="t1", name="Read")
            + line(type="ToolCallInputDelta", turn_index=0, tool_use_id="t1", partial_json='{"path": "a"')
            + line(type="ToolCallEnd", turn_index=0, tool_use_id="t1", is_error=False,
                   content=[{"type": "text", "text": "x"}], result_text="x", truncated=False)
            + text(2, "Done.")
            + turn_end([{"type": "tool_use", "id": "t1", "name": "Read", "input": {}},
                        {"type": "text", "text": "Done."}])
            + run_end(turns=1))
    frames = claude_code(data, partial)
    # the unparseable input is {} as in the authoritative message, no empty assistant frame
    assert blocks(frames) == [{"type": "tool_use", "id": "t1", "name": "Read", "input": {}},
                              {"type": "text", "text": "Done."}]
    assert frames[-1]["result"] == "Done."


def test_a_text_block_is_written_from_its_own_message_block() -> None:
    # Thinking then text; the message has them in a different position than the indices say.
    data = (START + line(type="AssistantThinkingDelta", turn_index=0, content_block_index=0, text="hmm")
            + text(1, "Hi") + turn_end([{"type": "thinking", "thinking": "hmm", "signature": "s"},
                                        {"type": "text", "text": ""}, {"type": "text", "text": "Hi"}])
            + run_end(turns=1))
    assert blocks(claude_code(data)) == [{"type": "thinking", "thinking": "hmm", "signature": "s"},
                                         {"type": "text", "text": "Hi"}]


def thinking(block: int, piece: str) -> bytes:
    return line(type="AssistantThinkingDelta", turn_index=0, content_block_index=block, text=piece)


TOOL = (line(type="ToolCallStart", turn_index=0, tool_use_id="t1", name="Read")
        + line(type="ToolCallInputDelta", turn_index=0, tool_use_id="t1", partial_json='{"path": "a"}'))


@pytest.mark.parametrize("partial", [False, True])
def test_a_run_of_deltas_over_several_blocks_is_taken_block_by_block(partial: bool) -> None:
    # Text deltas wait for their block's end; a run spanning two text blocks, or holding
    # thinking, is taken delta by delta: every block its own frame, in order, thinking counted.
    def kinds(frames: list[dict[str, Any]]) -> list[str]:
        said = [f["subtype"] if f["type"] == "system" else f["type"] for f in frames if f["type"] != "stream_event"]
        return [k for k in said if k != "status"]  # (partial messages' "requesting")

    two_blocks = START + text(0, "a") + text(0, "b") + text(1, "c") + TOOL
    frames = claude_code(two_blocks + run_end(), partial)
    assert blocks(frames)[:3] == [{"type": "text", "text": "ab"}, {"type": "text", "text": "c"},
                                  {"type": "tool_use", "id": "t1", "name": "Read", "input": {"path": "a"}}]
    with_thinking = START + text(0, "a") + text(1, "b") + thinking(2, "hmm") + TOOL
    frames = claude_code(with_thinking + run_end(), partial)
    assert blocks(frames)[:4] == [{"type": "text", "text": "a"}, {"type": "text", "text": "b"},
                                  {"type": "thinking", "thinking": "hmm", "signature": ""},
                                  {"type": "tool_use", "id": "t1", "name": "Read", "input": {"path": "a"}}]
    assert kinds(frames)[:6] == ["init", "assistant", "assistant", "thinking_tokens", "assistant", "assistant"]
