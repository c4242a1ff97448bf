"""The agent's `TurnEvent` variants as typed, immutable classes, decoded and checked in C.

One class per serde variant (the tag is the `type` value), with the agent's own fields, types
and ranges (u32 counts), so that decoding is the check: a value that decodes is well-formed
JSON with every field present, of the right type and in range. Big sub-documents nobody reads
whole (a run's history, a tool's result blocks) stay `msgspec.Raw`: checked as JSON, never
built, and spliced into the output as they are. A field serde does not write is ignored, as
serde ignores it; the `STRICT` decoder rejects it instead (`--strict`). The agent's headless
stream-json frames are typed the same way (below). Both readers (raw events, headless
stream-json) hand the fold these classes. Imports nothing of the package.
"""

from __future__ import annotations

import sys
from typing import Annotated, Any, ClassVar, Union

import msgspec
import orjson
from msgspec import Meta, Raw, Struct, field

U32_MAX = (1 << 32) - 1
MAX_DURATION_S = U32_MAX  # a span beyond u32 seconds (136 years) is none the agent measured
MAX_STAMP_S = 253402300799  # 9999-12-31T23:59:59Z: datetime's last second

WALL, RECORDED, ESTIMATED = "wall", "recorded", "estimated"  # the clocks a stream is timed by

U32 = Annotated[int, Meta(ge=0, le=U32_MAX)]
Stamp = Annotated[float, Meta(ge=0, le=MAX_STAMP_S)]
CACHE_KEYS = ("cache_creation_input_tokens", "cache_read_input_tokens")

# Every class is untracked by the garbage collector (`gc=False`): none can be part of a cycle,
# and a batch of them is much cheaper to build.
_CONFIG: dict[str, Any] = {"frozen": True, "gc": False}


class Usage(Struct, **_CONFIG):
    """Token counts; `input_tokens` includes the two cache counters (the agent's semantics)."""

    input_tokens: U32
    output_tokens: U32
    cache_creation_input_tokens: U32 | None = None
    cache_read_input_tokens: U32 | None = None

    def add_to(self, total: dict[str, int]) -> None:
        """Add these counts to a running `total` (which has the two that are always there);
        a cache counter is added the first time one is reported. (`counts()`, summed, without
        building it: once a turn.)"""
        total["input_tokens"] += self.input_tokens
        total["output_tokens"] += self.output_tokens
        if self.cache_creation_input_tokens is not None:
            total["cache_creation_input_tokens"] = total.get("cache_creation_input_tokens", 0) + self.cache_creation_input_tokens
        if self.cache_read_input_tokens is not None:
            total["cache_read_input_tokens"] = total.get("cache_read_input_tokens", 0) + self.cache_read_input_tokens

    def counts(self) -> dict[str, int]:
        """The counts present, by name (a cache counter the provider did not report is absent)."""
        counts = {"input_tokens": self.input_tokens, "output_tokens": self.output_tokens}
        if self.cache_creation_input_tokens is not None:
            counts["cache_creation_input_tokens"] = self.cache_creation_input_tokens
        if self.cache_read_input_tokens is not None:
            counts["cache_read_input_tokens"] = self.cache_read_input_tokens
        return counts


class Duration(Struct, **_CONFIG):
    """A serde `std::time::Duration`."""

    secs: Annotated[int, Meta(ge=0, le=MAX_DURATION_S)]
    nanos: U32

    @property
    def seconds(self) -> float:
        return self.secs + self.nanos / 1e9


class Message(Struct, **_CONFIG):
    """An assistant message: its content blocks as the agent wrote them."""

    role: str
    content: list[Any]

    def __post_init__(self) -> None:
        _writable(self.content, "content")


class Event(Struct, kw_only=True, tag_field="type", **_CONFIG):
    """A `TurnEvent`. A recorded log may stamp each one: `ts` (Unix seconds) or an ISO-8601
    `timestamp`, whose range the reader checks where stamps are read (the recorded clock): it
    needs a date parser."""

    ts: Stamp | None = None
    timestamp: str | None = None
    # A text or thinking delta (no field: a class's own): a batch's runs of them are found by it in C.
    is_delta: ClassVar[bool] = False


class TurnStart(Event, tag=True, **_CONFIG):
    turn_index: U32
    message_id: str
    model: str


class AssistantTextDelta(Event, tag=True, **_CONFIG):
    turn_index: U32
    content_block_index: U32
    text: str
    is_delta: ClassVar[bool] = True


class AssistantThinkingDelta(Event, tag=True, **_CONFIG):
    turn_index: U32
    content_block_index: U32
    text: str
    is_delta: ClassVar[bool] = True


class ToolCallStart(Event, tag=True, **_CONFIG):
    turn_index: U32
    tool_use_id: str
    name: str


class ToolCallInputDelta(Event, tag=True, **_CONFIG):
    turn_index: U32
    tool_use_id: str
    partial_json: str


class ToolCallEnd(Event, tag=True, **_CONFIG):
    turn_index: U32
    tool_use_id: str
    is_error: bool
    content: Raw  # content blocks
    result_text: str | None = None  # the agent's display preview; nobody here reads it
    truncated: bool = False

    def __post_init__(self) -> None:
        _array(self.content, "content")


class TurnEnd(Event, tag=True, **_CONFIG):
    turn_index: U32
    assistant_message: Message
    tool_results: Raw  # a copy of what the turn's ToolCallEnds carried
    stop_reason: str | None
    usage: Usage
    ttft: Duration | None
    tbt: Duration | None

    def __post_init__(self) -> None:
        _array(self.tool_results, "tool_results")


class RunEnd(Event, tag=True, **_CONFIG):
    final_messages: Raw  # the whole history: megabytes in a long session
    total_usage: Usage
    turn_count: U32
    stopped_for: str | dict[str, Any]  # a unit variant, or one variant with its value
    turns_without_edit: U32 = 0
    no_edit_nudge_emitted: bool = False

    def __post_init__(self) -> None:
        """The numbers inside `stopped_for` are the agent's too: in range, or no RunEnd."""
        _array(self.final_messages, "final_messages")
        stop = self.stopped_for
        if isinstance(stop, str):
            return
        _writable(stop, "stopped_for")
        if len(stop) != 1:
            raise ValueError("'stopped_for' must hold one variant")
        ((kind, value),) = stop.items()
        try:
            if kind == "StreamIdle":
                msgspec.convert(value, Duration)
            elif kind == "MaxTurnsReached":
                msgspec.convert(value, U32)
        except msgspec.ValidationError:
            raise ValueError(f"'stopped_for' {kind} out of range") from None


# The agent's provider errors (its `provider/src/error.rs`, caliban f33a2d0), by the start of
# their `Display` text, with the HTTP status each kind implies (None: none known; a server
# error's is in its message; "context too long" is Anthropic's 400). What a `ProviderError`
# stop, or a headless result's `error`, holds. No prefix starts another.
PROVIDER_ERRORS: tuple[tuple[str, int | None], ...] = (
    ("server error (HTTP ", None), ("authentication failed: ", 401), ("rate limit exceeded", 429),
    ("invalid request: ", 400), ("context too long: ", 400), ("model unavailable: ", 404),
    ("upstream server fault: ", None), ("content filter triggered: ", None), ("network error: ", None),
    ("stream interrupted mid-response", None), ("operation cancelled", None), ("adapter error: ", None),
    ("stream idle for ", None),
)  # fmt: skip


def provider_error(error: object) -> bool:
    """Whether an error text is one of the agent's provider errors."""
    return isinstance(error, str) and error.startswith(tuple(prefix for prefix, _ in PROVIDER_ERRORS))

def _writable(value: Any, name: str) -> None:
    """A value decoded whole is written out again: it must hold nothing JSON writers refuse (an
    integer beyond 64 bits, which JSON allows and msgspec decodes)."""
    try:
        orjson.dumps(value)
    except orjson.JSONEncodeError:
        raise ValueError(f"'{name}' holds a number beyond 64 bits") from None


def _array(value: Raw, name: str) -> None:
    """A `Raw` value serde writes as a sequence must be one (checked without building it)."""
    if bytes(memoryview(value)[:1]) != b"[":
        raise ValueError(f"'{name}' is not an array")


Delta = AssistantTextDelta | AssistantThinkingDelta
TurnEvent = TurnStart | AssistantTextDelta | AssistantThinkingDelta | ToolCallStart | ToolCallInputDelta | ToolCallEnd | TurnEnd | RunEnd
TYPES = frozenset(cls.__struct_config__.tag for cls in TurnEvent.__args__)


def _strict_union(of: tuple[Any, ...], inner: tuple[Any, ...]) -> Any:
    """The tagged classes `of` rejecting what serde does not write (their `inner` classes too)."""
    nested: dict[Any, Any] = {
        cls: msgspec.defstruct(cls.__name__, [], bases=(cls,), forbid_unknown_fields=True, **_CONFIG)
        for cls in inner
    }
    nested.update({cls | None: nested[cls] | None for cls in inner})
    variants = []
    for cls in of:
        fields = [(f.name, nested[f.type], f.default) for f in msgspec.structs.fields(cls) if f.type in nested]
        variants.append(
            msgspec.defstruct(
                cls.__name__, fields, bases=(cls,), tag=cls.__struct_config__.tag,
                forbid_unknown_fields=True, kw_only=True, **_CONFIG,
            )
        )
    return Union[tuple(variants)]  # noqa: UP007 (a union built at run time)


DECODER = msgspec.json.Decoder(TurnEvent)
Errors = (msgspec.ValidationError, msgspec.DecodeError)


# ---------------------------------------------------------------- the headless stream-json
# The agent's headless frames (its `headless/events.rs`), one class per frame type, with its
# field types and ranges. A field the headless reader acts on is required; every other field
# the agent writes is optional (older builds, and other writers of the dialect, leave many
# out) but checked when present. A frame passes to the output as its own bytes (an unknown
# field with it), so nothing here is encoded again; `HEADLESS_STRICT` rejects unknown fields.

U64_MAX = (1 << 64) - 1
U64 = Annotated[int, Meta(ge=0)]  # at most U64_MAX: msgspec's bounds stop at int64 (see _u64)
U16 = Annotated[int, Meta(ge=0, le=(1 << 16) - 1)]
Ms = Annotated[int, Meta(ge=0, le=MAX_DURATION_S * 1000)]  # a duration the fold subtracts
Dollars = Annotated[float, Meta(ge=0, le=sys.float_info.max)]


class Totals(Struct, **_CONFIG):
    """A result's `usage`: the run's tokens, flat."""

    input_tokens: U32
    output_tokens: U32


class SystemFrame(Event, tag="system", **_CONFIG):
    """`system`: `init` (always a run's first frame) or `api_retry` (older builds only)."""

    subtype: str | None = None
    session_id: str | None = None
    model: str | None = None  # "provider/model"
    tools: list[str] | None = None
    plugins: list[Any] | None = None
    setting_sources: list[str] | None = field(default=None, name="settingSources")
    mcp_servers: list[Any] | None = None
    bare_mode: bool | None = None
    cwd: str | None = None
    permission_mode: str | None = None
    attempt: U32 | None = None
    max_retries: U32 | None = None
    retry_delay_ms: U64 | None = None
    error_status: U16 | None = None
    error_category: str | None = None

    def __post_init__(self) -> None:
        _u64(self.retry_delay_ms, "retry_delay_ms")

    def own_session(self) -> str | None:
        """The session an init names: its id, unless it names none. caliban run without
        `--session` says `ephemeral` (startup/drivers.rs), whatever the run: two logs saying it
        are two sessions, never one file and one id."""
        return self.session_id if self.session_id and self.session_id != "ephemeral" else None


class UserFrame(Event, tag="user", **_CONFIG):
    """An echoed prompt (`--replay-user-messages`): the start of an input frame."""

    content: Raw = field(default_factory=Raw)  # empty when absent


class TextFrame(Event, tag="text", **_CONFIG):
    """A text delta (`--include-partial-messages` only)."""

    delta: str


class ThinkingFrame(Event, tag="thinking", **_CONFIG):
    """A thinking delta (`--include-partial-messages` only)."""

    delta: str


class ToolUseFrame(Event, tag="tool_use", **_CONFIG):
    """A tool call, printed when it ends (after it ran), with its whole input."""

    id: str
    name: str
    input: Raw = field(default_factory=lambda: Raw(b"{}"))


class ToolResultFrame(Event, tag="tool_result", **_CONFIG):
    """A tool call's result; `content` is its blocks, or a plain text."""

    tool_use_id: str
    is_error: bool
    content: Raw
    t_ms: Ms | None = None

    def __post_init__(self) -> None:
        if bytes(memoryview(self.content)[:1]) not in (b"[", b'"'):
            raise ValueError("'content' is neither blocks nor a text")


class MessageFrame(Event, tag="message", **_CONFIG):
    """A turn's authoritative message (not printed with partial messages)."""

    content: list[Any]
    role: str = "assistant"

    def __post_init__(self) -> None:
        _writable(self.content, "content")


class WarningFrame(Event, tag="warning", **_CONFIG):
    subtype: str | None = None
    message: str | None = None
    details: Raw = field(default_factory=Raw)


class HookEventFrame(Event, tag="hook_event", **_CONFIG):
    hook_event_name: str | None = field(default=None, name="hookEventName")
    hook_specific_output: Raw = field(default_factory=Raw, name="hookSpecificOutput")


class ResultFrame(Event, tag="result", **_CONFIG):
    """A run's last frame. Builds before ADR 0049 lack `num_turns`, `is_error`,
    `duration_ms` and `usage`."""

    subtype: str
    result: str | None = None
    session_id: str | None = None
    total_cost_usd: Dollars | None = None
    turns: U32 | None = None
    total_input_tokens: U32 | None = None
    total_output_tokens: U32 | None = None
    num_turns: U32 | None = None
    is_error: bool | None = None
    duration_ms: U64 | None = None
    usage: Totals | None = None
    structured_output: Raw = field(default_factory=Raw)
    error: str | None = None
    last_assistant_text: str | None = None
    tool_calls_seen: U32 | None = None
    turns_without_edit: U32 | None = None
    no_edit_nudge_emitted: bool | None = None

    def __post_init__(self) -> None:
        _u64(self.duration_ms, "duration_ms")


def _u64(value: int | None, name: str) -> None:
    if value is not None and value > U64_MAX:
        raise ValueError(f"'{name}' is out of range")


HeadlessFrame = (
    SystemFrame | UserFrame | TextFrame | ThinkingFrame | ToolUseFrame | ToolResultFrame | MessageFrame
    | WarningFrame | HookEventFrame | ResultFrame
)
HEADLESS_TYPES = frozenset(cls.__struct_config__.tag for cls in HeadlessFrame.__args__)


def __getattr__(name: str) -> msgspec.json.Decoder[Any]:
    """The decoders only some input needs, built when first asked for: `HEADLESS_DECODER`
    (headless frames, and lines that are no raw event: ~4 ms to build, more than the rest of
    this module), and the `--strict` ones, `STRICT` (raw events) and `HEADLESS_STRICT`."""
    if name == "HEADLESS_DECODER":
        decoder = msgspec.json.Decoder(HeadlessFrame)
    elif name == "STRICT":
        decoder = msgspec.json.Decoder(_strict_union(TurnEvent.__args__, (Usage, Duration, Message)))
    elif name == "HEADLESS_STRICT":
        decoder = msgspec.json.Decoder(_strict_union(HeadlessFrame.__args__, (Totals,)))
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = decoder  # asked once: from now on an ordinary global
    return decoder


class DeltaRun(Struct, **_CONFIG):
    """A run of consecutive text/thinking deltas, handed to the fold as one (a Struct: one is
    built for every run, and a Struct is built in C)."""

    deltas: list[Delta]

    @property
    def count(self) -> int:
        return len(self.deltas)

    @property
    def last(self) -> Delta:
        return self.deltas[-1]

    @property
    def thinking(self) -> bool:
        """Whether a thinking delta is among them."""
        return AssistantThinkingDelta in map(type, self.deltas)  # (loops in C)
