"""Every provider error kind of the agent (provider/src/error.rs at f33a2d0) gives the same
result whichever dialect it came in, in both output formats."""

from __future__ import annotations

import orjson
import pytest
from support_fixtures import claude_code, drive, run_end

from translator.encoders.provider_errors import api_error
from translator.model import PROVIDER_ERRORS as KINDS
from translator.model import provider_error as recognise

# One message per kind, as the agent's Display impls write them: (message, status, type, category)
MESSAGES = [
    ('server error (HTTP 500): {"type":"error","error":{"type":"api_error","message":"Internal server error"}}',
     500, "api_error", "server_error"),
    ("server error (HTTP 403): forbidden", 403, "permission_error", "authentication_failed"),
    ("authentication failed: invalid x-api-key", 401, "authentication_error", "authentication_failed"),
    ("rate limit exceeded (retry after Some(2s))", 429, "rate_limit_error", "rate_limit"),
    ("rate limit exceeded (retry after None)", 429, "rate_limit_error", "rate_limit"),
    ('invalid request: {"type":"error","error":{"type":"invalid_request_error","message":"bad"}}',
     400, "invalid_request_error", "unknown"),
    ("context too long: requested 250000 but max is 200000", 400, "invalid_request_error", "unknown"),
    ("model unavailable: gpt-9", 404, "not_found_error", "unknown"),
    ("upstream server fault: model crashed", None, None, "unknown"),
    ("content filter triggered: violence", None, None, "unknown"),
    ("network error: error sending request", None, None, "unknown"),
    ("stream interrupted mid-response: hyper: connection reset by peer", None, None, "unknown"),
    ("operation cancelled", None, None, "unknown"),
    ("adapter error: unexpected SSE frame", None, None, "unknown"),
    ("stream idle for 90s", None, None, "unknown"),
]


def test_every_kind_is_covered() -> None:
    assert {prefix for prefix, _ in KINDS} == {
        next(p for p, _ in KINDS if m.startswith(p)) for m, *_ in MESSAGES
    }


@pytest.mark.parametrize(("message", "status", "err_type", "category"), MESSAGES)
def test_claude_code_fields(message: str, status: int | None, err_type: str | None, category: str) -> None:
    assert recognise(message)
    error = api_error(message)
    assert (error.status, error.type, error.category) == (status, err_type, category)
    assert error.text.startswith(f"API Error: {status} " if status else "API Error: ")


def raw(message: str) -> bytes:
    return run_end({"ProviderError": message})


def headless(message: str) -> bytes:
    result = {"type": "result", "subtype": "error", "session_id": "s", "total_cost_usd": 0.0, "turns": 0,
              "total_input_tokens": 0, "total_output_tokens": 0, "num_turns": 0, "is_error": True,
              "duration_ms": 3, "usage": {"input_tokens": 0, "output_tokens": 0}, "error": message,
              "tool_calls_seen": 0, "turns_without_edit": 0, "no_edit_nudge_emitted": False}
    return orjson.dumps(result) + b"\n"


FIELDS = ("subtype", "is_error", "terminal_reason", "api_error_status", "api_error_type", "result", "num_turns")


# A headless `stream idle for Ns` is the agent's StreamIdle stop, which its driver writes alike
# (the provider's idle error never ends a run as a ProviderError): test_headless.py holds it to
# the raw StreamIdle.
@pytest.mark.parametrize("message", [m for m, *_ in MESSAGES if not m.startswith("stream idle")])
def test_the_same_result_from_either_dialect(message: str) -> None:
    from_raw, from_headless = claude_code(raw(message)), claude_code(headless(message))
    (a, b) = (from_raw[-1], from_headless[-1])
    assert [a.get(k) for k in FIELDS] == [b.get(k) for k in FIELDS]
    assert (a["subtype"], a["is_error"], a["terminal_reason"], a["num_turns"]) == ("success", True, "api_error", 1)
    assert from_raw[-2]["error"] == from_headless[-2]["error"] == api_error(message).category
    enriched = drive(raw(message)).results[-1]
    assert (enriched["subtype"], enriched["is_error"], enriched["error"]) == ("error", True, message)
