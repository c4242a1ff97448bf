"""The output frames as a typed model: what each format writes, one TypedDict per kind of frame.

It types the library's frames for Python users, and it is what the JSON Schemas shipped in
`translator/data/schema/` are generated from (`make schemas`; a test checks they agree and that
every fixture's output validates). Objects are open: a frame may carry keys beyond those named
here (a headless input's frames pass through with the agent's own keys), and frames of a type
not named here are passed-through events, which the schemas accept when their `type` is a
string that no frame kind here uses.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict

# ---------------------------------------------------------------- enriched (the default)


class Usage(TypedDict):
    """The agent's semantics: input_tokens includes the two cache counters."""

    input_tokens: int
    output_tokens: int
    cache_creation_input_tokens: NotRequired[int]
    cache_read_input_tokens: NotRequired[int]


class EnrichedInit(TypedDict):
    type: Literal["system"]
    subtype: Literal["init"]
    session_id: str
    model: NotRequired[str]


class EnrichedToolUse(TypedDict):
    type: Literal["tool_use"]
    id: str
    name: str
    input: Any  # the parsed tool input (the raw string when it does not parse)


class EnrichedToolResult(TypedDict):
    type: Literal["tool_result"]
    tool_use_id: str
    is_error: bool
    content: str | list[Any]


class EnrichedMessage(TypedDict):
    type: Literal["message"]
    role: str
    content: list[dict[str, Any]]


class EnrichedText(TypedDict):
    type: Literal["text"]
    delta: str


class EnrichedThinking(TypedDict):
    type: Literal["thinking"]
    delta: str


class EnrichedResult(TypedDict):
    """ADR 0049's result frame."""

    type: Literal["result"]
    subtype: Literal["success", "error", "max_turns", "cancelled", "max_tokens", "budget_exceeded"]
    result: NotRequired[str]
    session_id: str
    total_cost_usd: float
    turns: int
    total_input_tokens: int
    total_output_tokens: int
    num_turns: int
    is_error: bool
    duration_ms: int
    duration_api_ms: int
    duration_source: Literal["wall", "recorded", "estimated"]
    usage: Usage
    error: NotRequired[str]
    last_assistant_text: NotRequired[str]
    tool_calls_seen: NotRequired[int]
    turns_without_edit: NotRequired[int]
    no_edit_nudge_emitted: NotRequired[bool]


ENRICHED: tuple[type, ...] = (
    EnrichedInit, EnrichedToolUse, EnrichedToolResult, EnrichedMessage, EnrichedText, EnrichedThinking,
    EnrichedResult,
)

# ---------------------------------------------------------------- claude-code


class _Session(TypedDict):
    session_id: str
    uuid: str


class ClaudeInit(_Session):
    type: Literal["system"]
    subtype: Literal["init"]
    cwd: str
    tools: list[Any]
    mcp_servers: list[Any]
    model: str
    permissionMode: str
    slash_commands: list[Any]
    apiKeySource: str
    claude_code_version: str
    output_style: str
    agents: list[Any]
    skills: list[Any]
    plugins: list[Any]


class ClaudeStatus(_Session):
    type: Literal["system"]
    subtype: Literal["status"]
    status: str


class ClaudeThinkingTokens(_Session):
    type: Literal["system"]
    subtype: Literal["thinking_tokens"]
    estimated_tokens: int
    estimated_tokens_delta: int


class ClaudeApiRetry(_Session):
    type: Literal["system"]
    subtype: Literal["api_retry"]
    attempt: int
    max_retries: int
    retry_delay_ms: int
    error_status: int | None
    error: str


class ApiUsage(TypedDict):
    """Anthropic's counters: input_tokens without the cache counters."""

    input_tokens: int
    output_tokens: int
    cache_creation_input_tokens: NotRequired[int]
    cache_read_input_tokens: NotRequired[int]


class ApiMessage(TypedDict):
    id: str
    type: Literal["message"]
    role: Literal["assistant"]
    model: str
    content: list[dict[str, Any]]
    stop_reason: str | None
    stop_sequence: str | None
    usage: ApiUsage


class ClaudeAssistant(_Session):
    type: Literal["assistant"]
    message: ApiMessage
    parent_tool_use_id: str | None
    timestamp: str
    request_id: str | None
    error: NotRequired[str]
    thinking_duration_ms: NotRequired[int]


class UserMessage(TypedDict):
    role: Literal["user"]
    content: list[dict[str, Any]] | str


class ClaudeUser(_Session):
    type: Literal["user"]
    message: UserMessage
    parent_tool_use_id: str | None
    timestamp: NotRequired[str]
    tool_use_result: NotRequired[Any]


class _StreamEvent(_Session):
    type: Literal["stream_event"]
    parent_tool_use_id: str | None


class MessageStart(TypedDict):
    type: Literal["message_start"]
    message: ApiMessage


class ContentBlockStart(TypedDict):
    type: Literal["content_block_start"]
    index: int
    content_block: dict[str, Any]


class ContentBlockDelta(TypedDict):
    type: Literal["content_block_delta"]
    index: int
    delta: dict[str, Any]


class ContentBlockStop(TypedDict):
    type: Literal["content_block_stop"]
    index: int


class MessageDelta(TypedDict):
    type: Literal["message_delta"]
    delta: dict[str, Any]
    usage: ApiUsage


class MessageStop(TypedDict):
    type: Literal["message_stop"]


class ClaudeMessageStart(_StreamEvent):
    event: MessageStart
    ttft_ms: NotRequired[int]


class ClaudeContentBlockStart(_StreamEvent):
    event: ContentBlockStart


class ClaudeContentBlockDelta(_StreamEvent):
    event: ContentBlockDelta


class ClaudeContentBlockStop(_StreamEvent):
    event: ContentBlockStop


class ClaudeMessageDelta(_StreamEvent):
    event: MessageDelta


class ClaudeMessageStop(_StreamEvent):
    event: MessageStop


class ClaudeResult(TypedDict):
    """`claude -p --output-format stream-json`'s result (with --results-only: `json`'s)."""

    type: Literal["result"]
    subtype: Literal[
        "success", "error_max_turns", "error_during_execution", "error_max_budget_usd",
        "error_max_structured_output_retries",
    ]
    is_error: bool
    duration_ms: int
    duration_api_ms: int
    num_turns: int
    result: NotRequired[str]
    stop_reason: str | None
    session_id: str
    total_cost_usd: float
    usage: dict[str, Any]
    modelUsage: dict[str, dict[str, Any]]
    permission_denials: list[Any]
    terminal_reason: NotRequired[str]  # absent where the run's stop gives no reason Claude Code has
    uuid: str
    errors: NotRequired[list[str]]
    api_error_status: NotRequired[int | None]
    result_index: NotRequired[int]


CLAUDE_CODE: tuple[type, ...] = (
    ClaudeInit, ClaudeStatus, ClaudeThinkingTokens, ClaudeApiRetry, ClaudeAssistant, ClaudeUser,
    ClaudeMessageStart, ClaudeContentBlockStart, ClaudeContentBlockDelta, ClaudeContentBlockStop,
    ClaudeMessageDelta, ClaudeMessageStop, ClaudeResult,
)
MODELS: dict[str, tuple[type, ...]] = {"enriched": ENRICHED, "claude-code": CLAUDE_CODE}

# What the library's `translate()` yields, per format: the kinds named here, told apart by their
# "type" (and "subtype"). A frame passed through as it came (a headless input's own, an unknown
# event) is typed as the kind its "type" names, or as none: check "type" before its keys.
EnrichedFrame = (EnrichedInit | EnrichedToolUse | EnrichedToolResult | EnrichedMessage | EnrichedText
                 | EnrichedThinking | EnrichedResult)
ClaudeCodeFrame = (ClaudeInit | ClaudeStatus | ClaudeThinkingTokens | ClaudeApiRetry | ClaudeAssistant | ClaudeUser
                   | ClaudeMessageStart | ClaudeContentBlockStart | ClaudeContentBlockDelta | ClaudeContentBlockStop
                   | ClaudeMessageDelta | ClaudeMessageStop | ClaudeResult)
