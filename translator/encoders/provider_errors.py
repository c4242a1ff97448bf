"""The agent's provider errors, read once for every dialect and format.

A run that failed in the provider ends with `{"ProviderError": msg}` (raw events) or a headless
result whose `error` is that message; `msg` is the `Display` text of one of the kinds in the
agent's `provider/src/error.rs` (caliban f33a2d0), which the model knows (`PROVIDER_ERRORS`,
`provider_error`: the input reads them too). `api_error` says what Claude Code reports for
one: the HTTP status where the kind implies or states one, Anthropic's error type for that
status, the `error` category of its synthetic assistant message, and its `API Error: …` text.
"""

from __future__ import annotations

import re

import msgspec
import orjson

from translator.model import PROVIDER_ERRORS

# Anthropic's error type for an HTTP status (used when the body does not name one).
ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}
SERVER_ERROR_HINT = "This is a server-side issue, usually temporary \u2014 try again in a moment."
_STATUS = re.compile(r"\(HTTP (\d{3})\)")


# A Struct rather than a dataclass: built in C at import (a dataclass costs ~0.5 ms a start).
class ApiError(msgspec.Struct, frozen=True):
    """What Claude Code reports for a failed API call."""

    status: int | None  # api_error_status
    type: str | None  # api_error_type
    category: str  # the synthetic assistant message's `error`
    text: str  # its text, and the result's `result`


def api_error(message: str) -> ApiError:
    """Claude Code's report of a provider error, e.g. `server error (HTTP 500):
    {"type":"error","error":{"type":"api_error","message":"…"}}`, `invalid request: {…}`,
    `authentication failed: invalid x-api-key`, `network error: …`."""
    status = next((code for prefix, code in PROVIDER_ERRORS if message.startswith(prefix)), None)
    match = _STATUS.search(message) if message.startswith(PROVIDER_ERRORS[0][0]) else None
    if match:
        status = int(match.group(1))
    err_type = detail = None
    brace = message.find("{")
    if brace >= 0:
        try:
            body = orjson.loads(message[brace:])
        except orjson.JSONDecodeError:
            body = None
        err = body.get("error") if isinstance(body, dict) else None
        if isinstance(err, dict):
            err_type, detail = err.get("type"), err.get("message")
    if err_type is None and status is not None:
        err_type = ERROR_TYPES.get(status, "api_error" if status >= 500 else None)
    if not isinstance(detail, str):
        detail = message
    text = f"API Error: {status} {detail}" if status else f"API Error: {detail}"
    if status is not None and status >= 500:
        text = f"{text}. {SERVER_ERROR_HINT}"
    return ApiError(status, err_type, category(status), text)


def category(status: int | None) -> str:
    """Claude Code's `error` category for an HTTP status (its captures: 5xx `server_error`,
    400 `unknown`)."""
    if status is None:
        return "unknown"
    if status >= 500:
        return "server_error"
    return {401: "authentication_failed", 403: "authentication_failed", 429: "rate_limit"}.get(status, "unknown")
