"""Decoding helpers of the raw event dialect."""

from __future__ import annotations

import orjson
import pytest

from translator.events import BadLine, check
from translator.raw_reader import split_parse, text_run


def delta(text: object, index: int = 0, **extra: object) -> bytes:
    return orjson.dumps({"type": "AssistantTextDelta", "turn_index": 0, "content_block_index": index,
                         "text": text, **extra})


def test_text_run_takes_one_blocks_deltas_whole() -> None:
    region = b"\n".join(delta(t) for t in ["a", 'b "quoted" }\\n', "\u00e9\U0001f600"])
    assert text_run(region) == (0, ["a", 'b "quoted" }\\n', "\u00e9\U0001f600"])
    assert text_run(delta("solo", 3)) == (3, ["solo"])


@pytest.mark.parametrize(
    "region",
    [
        delta("a") + b"\n" + delta("b", 1),  # two blocks
        delta("a") + b"\n" + delta(5),  # not a string
        delta("a") + b"\n" + delta("b", extra=1),  # a key serde does not write
        delta("a") + b"\n" + delta("b").replace(b'":', b'": '),  # lines laid out differently
        delta("a") + b"\n" + delta("b")[:-3],  # cut short
        delta("a") + b"\n" + b'{"type":"AssistantThinkingDelta","turn_index":0,"content_block_index":0,"text":"t"}',
        delta("a")[:-2] + b'"}' + delta("b"),  # two events glued on one line
    ],
)
def test_text_run_leaves_everything_else_to_the_full_decode(region: bytes) -> None:
    assert text_run(region) is None


def test_split_parse_skips_only_the_history() -> None:
    line = (b'{"type":"RunEnd","final_messages":[{"role":"user","content":[{"type":"text",'
            b'"text":"x,\\"total_usage\\":1"}],"total_usage":{"bogus":1}}],"total_usage":'
            b'{"input_tokens":1,"output_tokens":2},"turn_count":1,"stopped_for":"EndOfTurn"}')
    ev = split_parse(line, "RunEnd")
    assert ev is not None and ev["total_usage"] == {"input_tokens": 1, "output_tokens": 2}
    assert "final_messages" not in ev


def test_check_names_the_missing_or_malformed_field() -> None:
    with pytest.raises(BadLine, match="TurnEnd without 'stop_reason'"):
        check({"type": "TurnEnd", "turn_index": 0, "assistant_message": {"content": []},
               "usage": {"input_tokens": 1, "output_tokens": 1}, "ttft": None, "tbt": None}, "TurnEnd")
    with pytest.raises(BadLine, match="malformed 'total_usage'"):
        check({"type": "RunEnd", "total_usage": {"input_tokens": -1, "output_tokens": 0},
               "turn_count": 0, "stopped_for": "EndOfTurn"}, "RunEnd")
