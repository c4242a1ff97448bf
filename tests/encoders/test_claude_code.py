"""--format claude-code against the real Claude Code CLI's captures (Claude Code 2.1.332).

For every scenario in the reference set, the translation of the agent's events must give the
same frames, in the same order, with the same keys in the same order and the same values —
except the values listed below, each with the reason it cannot or should not match.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from support_fixtures import FIXTURES, events, frames_of, kind, translate_cc

from translator.core.rates import RateCard
from translator.core.translator import Translator
from translator.encoders.claude_code import ClaudeCodeEncoder

CAPTURES = FIXTURES / "claude-code"
SCENARIOS = sorted(p.name.removesuffix(".stream.jsonl") for p in CAPTURES.glob("*.stream.jsonl"))

# Differ from run to run, or describe the machine: never compared.
VOLATILE = {
    "session_id", "uuid", "timestamp", "request_id", "duration_ms", "duration_api_ms", "ttft_ms",
    "ttft_stream_ms", "time_to_request_ms", "first_content_frame_ms", "thinking_duration_ms",
    "cwd", "original_cwd", "memory_paths", "messaging_socket_path",
}
# Describe the Claude Code installation: present with neutral values (see INIT), not compared.
INSTALLATION = {
    "tools", "slash_commands", "terminal_slash_commands", "apiKeySource", "claude_code_version",
    "agents", "skills", "plugins", "capabilities", "fast_mode_disabled_reason", "provider",
}
# Deviations: (frame kind, key path) -> why the translation's value differs.
DEVIATIONS = {
    ("assistant", "message.usage"): "a turn's usage arrives only with its TurnEnd",
    ("stream_event/message_start", "event.message.usage"): "a turn's usage arrives only with its TurnEnd",
    ("user", "tool_result_meta"): "Claude Code's permission rules are not in the agent's events",
    ("system/init", "model"): "a run with no TurnStart never names its model",
    ("assistant", "message.id"): "the synthetic API-error message's id is a fresh uuid",
}


def captured(name: str) -> list[dict[str, Any]]:
    # caliban's raw events carry no retry events: Claude Code's api_retry frames have no source.
    frames = frames_of((CAPTURES / f"{name}.stream.jsonl").read_bytes())
    return [f for f in frames if kind(f) != "system/api_retry"]


def differences(ours: Any, theirs: Any, frame_kind: str, path: str = "") -> list[str]:
    if isinstance(theirs, dict) and isinstance(ours, dict):
        if list(ours) != list(theirs):
            return [f"{frame_kind} {path or '.'}: keys {list(ours)} != {list(theirs)}"]
        found = []
        for key in theirs:
            sub = f"{path}.{key}" if path else key
            if key in VOLATILE or key in INSTALLATION or (frame_kind, sub) in DEVIATIONS:
                continue
            found += differences(ours[key], theirs[key], frame_kind, sub)
        return found
    if isinstance(theirs, list) and isinstance(ours, list) and len(ours) == len(theirs):
        return [d for i, (a, b) in enumerate(zip(ours, theirs, strict=False)) for d in differences(a, b, frame_kind, f"{path}[{i}]")]
    return [] if ours == theirs else [f"{frame_kind} {path}: {ours!r} != {theirs!r}"]


def known_deviation(name: str, frame_kind: str, diff: str) -> bool:
    """Value differences that only some scenarios have, each documented in docs/claude-code.md."""
    if name.startswith("api_error") and ("result: " in diff or "content[0].text" in diff):
        ours, theirs = diff.split(": ", 1)[1].split(" != ")
        # Claude Code appends its own gateway's address to the server-error text
        return theirs.startswith(ours.rstrip("'\"")) and "inference gateway" in theirs
    # with partial messages the thinking block ends before TurnEnd brings it
    return name == "thinking_partial" and diff.split(":")[0].endswith("signature")


@pytest.mark.parametrize("name", SCENARIOS)
def test_same_frames_in_the_same_order(name: str) -> None:
    assert [kind(f) for f in translate_cc(name)] == [kind(f) for f in captured(name)]


@pytest.mark.parametrize("name", SCENARIOS)
def test_same_keys_and_values(name: str) -> None:
    problems = []
    for ours, theirs in zip(translate_cc(name), captured(name), strict=True):
        frame_kind = kind(theirs)
        problems += [d for d in differences(ours, theirs, frame_kind) if not known_deviation(name, frame_kind, d)]
    assert problems == []


def test_the_deviations_are_real_and_limited() -> None:
    """The exemptions above are needed (each is hit) and no wider than said."""
    ours, theirs = translate_cc("tool_use_two_turns"), captured("tool_use_two_turns")
    first_text = ours[1]["message"]
    assert first_text["usage"] == {
        "input_tokens": 0, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0,
        "output_tokens": 0, "service_tier": "standard",
    }
    # A block written at TurnEnd carries the turn's real usage, in Anthropic's counters.
    assert ours[4]["message"]["usage"] == {
        "input_tokens": 60, "cache_creation_input_tokens": 120, "cache_read_input_tokens": 3096,
        "output_tokens": 9, "service_tier": "standard",
    }
    assert theirs[4]["message"]["usage"]["output_tokens"] == 1
    # num_turns counts as Claude Code does: max_turns after one call is 2, an API error 1
    assert translate_cc("max_turns")[-1]["num_turns"] == 2
    assert translate_cc("api_error")[-1]["num_turns"] == 1


def test_usage_arithmetic_and_cost() -> None:
    result = translate_cc("tool_use_two_turns")[-1]
    assert result["total_cost_usd"] == 0.006970200000000001  # the capture's float, to the bit
    assert result["usage"]["input_tokens"] == 64  # 3100 + 3276 minus both cache counters
    model = result["modelUsage"]["claude-sonnet-4-5"]
    assert (model["inputTokens"], model["cacheReadInputTokens"], model["cacheCreationInputTokens"]) == (64, 5144, 1168)


def test_cumulative_and_per_frame_figures_over_several_runs() -> None:
    first, second = [f for f in translate_cc("multi_input_frames") if f["type"] == "result"]
    assert (first["result_index"], second["result_index"]) == (0, 1)
    assert second["total_cost_usd"] == 0.0055305  # cumulative, as Claude Code
    assert second["modelUsage"]["claude-sonnet-4-5"]["inputTokens"] == 16
    assert second["model_usage_since_last_result"]["claude-sonnet-4-5"]["inputTokens"] == 9
    assert second["usage"]["input_tokens"] == 9 and second["num_turns"] == 1
    assert second["duration_api_ms"] == first["duration_api_ms"] + 265


def test_results_only_is_claude_code_output_format_json() -> None:
    (ours,) = translate_cc("tool_use_two_turns", results_only=True)
    theirs = orjson.loads((CAPTURES / "tool_use_two_turns.json").read_bytes())
    assert differences(ours, theirs, "result") == []


def test_api_error_text_and_fields() -> None:
    synthetic, result = translate_cc("api_error_400")[-2:]
    assert synthetic["message"]["content"][0]["text"] == "API Error: 400 messages.0.content: fake invalid request"
    assert (synthetic["error"], synthetic["api_error_status"], synthetic["api_error_type"]) == (
        "unknown", 400, "invalid_request_error")
    assert (result["subtype"], result["is_error"], result["terminal_reason"]) == ("success", True, "api_error")
    overloaded = translate_cc("api_error_overloaded")[-1]
    assert overloaded["api_error_status"] == 529 and overloaded["api_error_type"] == "overloaded_error"
    assert overloaded["result"].startswith("API Error: 529 Overloaded. This is a server-side issue")


@pytest.mark.parametrize("name", SCENARIOS)
def test_every_frame_is_accepted_by_the_python_sdk(name: str) -> None:
    from claude_agent_sdk._internal.message_parser import parse_message

    parsed = [parse_message(f) for f in translate_cc(name)]
    assert all(p is not None for p in parsed)
    names = [type(p).__name__ for p in parsed]
    assert names[-1] == "ResultMessage"
    theirs = [type(parse_message(f)).__name__ for f in captured(name)]
    assert names == theirs


def live(data: bytes, *, partial: bool = False) -> list[dict[str, Any]]:
    """Frames written so far, the input left open (as in a live pipe)."""
    rates = RateCard.bundled()
    core = Translator(ClaudeCodeEncoder([], session_id="S", partial=partial, limits=rates.limits), rates=rates)
    core.feed(data, 0.0)
    return frames_of(core.take_output())


def cut_before(name: str, event_type: str, nth: int = 1) -> bytes:
    lines = events(name).splitlines(keepends=True)
    hits = [i for i, ln in enumerate(lines) if ln.startswith(b'{"type":"' + event_type.encode())]
    return b"".join(lines[: hits[nth - 1]])


def test_text_shows_before_the_tool_runs() -> None:
    # Up to the tool call's start: the text block is proven complete.
    frames = live(cut_before("tool_use_two_turns", "ToolCallInputDelta"))
    assert [f["message"]["content"][0]["type"] for f in frames if f["type"] == "assistant"] == ["text"]
    # Once the tool's input parses, its block is complete too: shown before the tool ran.
    frames = live(cut_before("tool_use_two_turns", "ToolCallEnd"))
    blocks = [f["message"]["content"][0] for f in frames if f["type"] == "assistant"]
    assert blocks[-1] == {"type": "tool_use", "id": "toolu_01Ab3CdE4fGh5iJk6LmN7oPq", "name": "Bash",
                          "input": {"command": "ls | wc -l"}}
    assert not any(f["type"] == "user" for f in frames)


def test_final_text_waits_for_its_turn_end() -> None:
    frames = live(cut_before("tool_use_two_turns", "TurnEnd", 2))
    texts = [f["message"]["content"][0].get("text") for f in frames if f["type"] == "assistant"]
    assert texts == ["I'll count the files.", None]  # "There are 3 files." is not proven complete


def test_thinking_waits_for_the_signature_unless_a_tool_call_comes() -> None:
    frames = live(cut_before("thinking", "TurnEnd"))
    assert [f["subtype"] for f in frames if f["type"] == "system"] == ["init"] + ["thinking_tokens"] * 3
    assert not any(f["type"] == "assistant" for f in frames)
    thinking = (
        b'{"type":"TurnStart","turn_index":0,"message_id":"m1","model":"claude-sonnet-4-5"}\n'
        b'{"type":"AssistantThinkingDelta","turn_index":0,"content_block_index":0,"text":"plan"}\n'
        b'{"type":"AssistantTextDelta","turn_index":0,"content_block_index":1,"text":"Looking."}\n'
        b'{"type":"ToolCallStart","turn_index":0,"tool_use_id":"t1","name":"Bash"}\n'
    )
    blocks = [f["message"]["content"][0] for f in live(thinking) if f["type"] == "assistant"]
    assert blocks == [{"type": "thinking", "thinking": "plan", "signature": ""}, {"type": "text", "text": "Looking."}]


@pytest.mark.parametrize(
    ("stopped_for", "reason", "error"),
    [
        ("Cancelled", "aborted_streaming", "the run was cancelled"),
        ({"HookDenied": "no"}, "hook_stopped", "no"),
        ({"Refusal": "declined"}, "model_error", "declined"),
        ("MaxTokensExhausted", "model_error", "the run was max_tokens"),
    ],
)
def test_other_stops_are_errors_during_execution(stopped_for: Any, reason: str, error: str) -> None:
    data = events("thinking").replace(b'"stopped_for":"EndOfTurn"', b'"stopped_for":' + orjson.dumps(stopped_for))
    rates = RateCard.bundled()
    core = Translator(ClaudeCodeEncoder([], session_id="S", limits=rates.limits), rates=rates)
    core.feed(data, 0.0)
    result = frames_of(core.take_output())[-1]
    assert (result["subtype"], result["is_error"], result["terminal_reason"]) == ("error_during_execution", True, reason)
    assert result["errors"] == [error] and "result" not in result


def test_signal_while_a_tool_runs_is_aborted_tools() -> None:
    rates = RateCard.bundled()
    core = Translator(ClaudeCodeEncoder([], session_id="S", limits=rates.limits), rates=rates)
    core.feed(cut_before("tool_use_two_turns", "ToolCallEnd"), 0.0)
    core.cancel(1.0)
    result = frames_of(core.take_output())[-1]
    assert (result["subtype"], result["terminal_reason"]) == ("error_during_execution", "aborted_tools")


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ('server error (HTTP 503): {"error": "busy"}', (503, "api_error")),
        ("server error (HTTP 502): <html>bad gateway</html>", (502, "api_error")),
        ("connection reset", (None, None)),
    ],
)
def test_api_errors_without_the_usual_body(message: str, expected: tuple[Any, Any]) -> None:
    from translator.encoders.provider_errors import api_error

    error = api_error(message)
    assert (error.status, error.type) == expected
    assert error.text.startswith("API Error: ")


def test_fresh_ids_are_random_version_4_uuids_never_repeated() -> None:
    """The uuids come in batches (frames.uuid4_batch): each one must still be a valid random
    uuid in the canonical text form Claude Code writes, and no two frames may share one."""
    import uuid

    rates = RateCard.bundled()
    core = Translator(ClaudeCodeEncoder([], session_id="S", limits=rates.limits), rates=rates)
    for _ in range(60):  # more frames than one batch holds
        core.feed(events("tool_use_two_turns"), 0.0)
    core.end(0.0)
    ids = [f["uuid"] for f in frames_of(core.take_output())]
    assert len(ids) > 256 and len(set(ids)) == len(ids)
    for text in ids:
        parsed = uuid.UUID(text)
        assert (str(parsed), parsed.version, parsed.variant) == (text, 4, uuid.RFC_4122)
    digits = "".join(text.replace("-", "") for text in ids)
    # random: every hex digit turns up, at a plausible rate, in the 30 random digits of each
    assert {d: digits.count(d) for d in "0123456789abcdef"}.keys() == set("0123456789abcdef")
    assert min(digits.count(d) for d in "0123456789abcdef") > len(ids) * 30 / 16 / 2


@pytest.mark.parametrize("partial", [False, True])
@pytest.mark.parametrize("name", SCENARIOS)
def test_every_frame_is_the_bytes_orjson_writes_for_it(name: str, partial: bool) -> None:
    """The frames written for every block, tool result and run (frames.ASSISTANT, USER,
    init_parts) are serialised by hand around their values: they must be byte for byte what
    serialising the whole frame writes (key order, separators, escapes)."""
    from itertools import count

    ids = count()
    rates = RateCard.bundled()
    weird = 'S "quoted" \\ \u2028 \x00'  # a session id that needs escaping
    encoder = ClaudeCodeEncoder([], session_id=weird, partial=partial, limits=rates.limits,
                                new_id=lambda: f'id-{next(ids)}"\\')  # fmt: skip
    core = Translator(encoder, rates=rates)
    core.feed(events(name), 1.5)
    core.end(2.25)
    lines = core.take_output().splitlines()
    kinds = {kind(orjson.loads(line)) for line in lines}
    assert "system/init" in kinds
    for line in lines:
        assert orjson.dumps(orjson.loads(line)) == line
