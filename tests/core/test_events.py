"""The raw events' classes (model.py) and what the reader says of a line that does not fit them."""

from __future__ import annotations

from typing import Any

import msgspec
import orjson
import pytest

from translator import model as M
from translator.core import jsonl as E
from translator.core.raw import reason


def delta(text: object, index: int = 0, **extra: object) -> bytes:
    return orjson.dumps({"type": "AssistantTextDelta", "turn_index": 0, "content_block_index": index,
                         "text": text, **extra})


def run_of(*lines: bytes) -> M.DeltaRun:
    deltas = M.DECODER.decode_lines(b"\n".join(lines))
    return M.DeltaRun(deltas)


def test_a_run_says_whether_it_holds_thinking() -> None:
    assert not run_of(*(delta(t) for t in ["a", 'b "quoted" }\\n', "\u00e9\U0001f600"])).thinking
    assert not run_of(delta("a"), delta("b", 1)).thinking
    mixed = run_of(delta("a"), b'{"type":"AssistantThinkingDelta","turn_index":0,"content_block_index":0,"text":"t"}')
    assert mixed.thinking


RUN_END = (b'{"type":"RunEnd","final_messages":[{"role":"user","content":[]}],"total_usage":'
           b'{"input_tokens":1,"output_tokens":2},"turn_count":1,"stopped_for":%s}')


def test_run_end_keeps_the_history_as_json_it_never_builds() -> None:
    ev = M.DECODER.decode(RUN_END % b'"EndOfTurn"')
    assert isinstance(ev, M.RunEnd) and bytes(ev.final_messages) == b'[{"role":"user","content":[]}]'
    assert ev.total_usage.counts() == {"input_tokens": 1, "output_tokens": 2}
    assert (ev.turns_without_edit, ev.no_edit_nudge_emitted) == (0, False)  # serde defaults


@pytest.mark.parametrize("stop", [b'{"StreamIdle":{"secs":-1,"nanos":0}}', b'{"MaxTurnsReached":4294967296}', b'{"A":1,"B":2}'])
def test_numbers_inside_stopped_for_are_checked(stop: bytes) -> None:
    with pytest.raises(msgspec.ValidationError) as err:
        M.DECODER.decode(RUN_END % stop)
    assert reason("RunEnd", str(err.value)).startswith("RunEnd has a malformed 'stopped_for' (a variant name")


def why(line: bytes, decoder: msgspec.json.Decoder = M.DECODER) -> str:  # type: ignore[type-arg]
    with pytest.raises(msgspec.ValidationError) as err:
        decoder.decode(line)
    return reason(orjson.loads(line)["type"], str(err.value))


def test_reasons_name_the_missing_or_malformed_field() -> None:
    assert why(b'{"type":"TurnStart","turn_index":0,"model":"m"}') == "TurnStart without 'message_id'"
    assert why(b'{"type":"TurnStart","turn_index":-1,"message_id":"","model":"m"}') == (
        "TurnStart has a malformed 'turn_index' (a whole number 0 to 4294967295)")
    assert why(RUN_END.replace(b'"output_tokens":2', b'"output_tokens":-2') % b'"EndOfTurn"').startswith(
        "RunEnd has a malformed 'total_usage' (input_tokens and output_tokens")
    assert why(delta("a", ts=1e20)) == "'ts' is out of range (Unix seconds, 1970 to 9999)"


def test_strict_rejects_what_serde_does_not_write_and_the_default_ignores_it() -> None:
    line = delta("a", extra=1)
    assert M.DECODER.decode(line) == M.DECODER.decode(delta("a"))
    assert why(line, M.STRICT) == "AssistantTextDelta has an unknown field 'extra'"
    nested = RUN_END.replace(b'"output_tokens":2', b'"output_tokens":2,"x":1') % b'"EndOfTurn"'
    assert M.DECODER.decode(nested).total_usage.counts() == {"input_tokens": 1, "output_tokens": 2}
    with pytest.raises(msgspec.ValidationError, match="unknown field `x`"):
        M.STRICT.decode(nested)


def test_an_integer_beyond_64_bits_in_a_message_or_stop_is_a_malformed_event() -> None:
    """JSON allows it and msgspec decodes it, but no writer takes it: the line is rejected, so
    writing the message out can never fail."""
    big = -(1 << 64) + 1
    turn_end = orjson.dumps({"type": "TurnEnd", "turn_index": 0,
                             "assistant_message": {"role": "assistant", "content": [{"type": "text", "text": "a"}]},
                             "tool_results": [], "stop_reason": None, "usage": {"input_tokens": 1, "output_tokens": 1},
                             "ttft": None, "tbt": None})
    assert M.DECODER.decode(turn_end).assistant_message.content == [{"type": "text", "text": "a"}]
    assert why(turn_end.replace(b'"type":"text"', b'"type":%d' % big)) == "TurnEnd has a malformed 'assistant_message'"
    assert why(RUN_END % b'{"ProviderError":%d}' % big).startswith("RunEnd has a malformed 'stopped_for'")


@pytest.mark.parametrize(
    ("content", "said"),
    [
        ([], ("", None)),
        ([{"type": "text", "text": "a"}], ("a", "a")),
        ([{"type": "text", "text": ""}], ("", None)),  # one empty block: no last text
        ([{"type": "text", "text": "a"}, {"type": "tool_use", "id": "t"}], ("a", "a")),
        ([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}, {"type": "text", "text": ""}], ("ab", "b")),
        ([{"type": "thinking", "thinking": "x"}, {"type": "text", "text": 5}, "text"], ("", None)),
    ],
)
def test_a_reply_is_its_text_blocks_joined_and_its_last_non_empty_one(content: list[Any], said: tuple[str, str | None]) -> None:
    assert E.reply(content) == said
