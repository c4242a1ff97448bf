"""duration_ms and duration_api_ms under each clock: the core is handed the time, never reads it."""

from __future__ import annotations

from datetime import UTC, datetime

import orjson
import pytest
from support_fixtures import drive, lines_of

# tool_use_two_turns, line by line, with the second at which each line arrives (or was stamped).
# Turn 1 streams until 101.3, its tool runs until 105.0; turn 2 streams from 105.2 to 106.0.
ARRIVALS = [100.5, 100.8, 100.9, 101.0, 101.2, 101.25, 101.3, 105.0, 105.1, 105.2, 105.8, 106.0, 106.1, 106.2]
START = 100.0


def timed_chunks() -> list[tuple[bytes, float]]:
    lines = lines_of("tool_use_two_turns")
    assert len(lines) == len(ARRIVALS)
    return [(ln + b"\n", t) for ln, t in zip(lines, ARRIVALS, strict=False)]


def stamped(key: str) -> bytes:
    out = []
    for ln, t in zip(lines_of("tool_use_two_turns"), ARRIVALS, strict=False):
        ev = orjson.loads(ln)
        if key == "ts":
            ev["ts"] = t
        else:
            ev["timestamp"] = datetime.fromtimestamp(t, UTC).isoformat().replace("+00:00", "Z")
        out.append(orjson.dumps(ev))
    return b"\n".join(out) + b"\n"


def test_wall_clock_excludes_tool_time_from_api_time() -> None:
    result = drive(timed_chunks(), clock="wall", started_at=START, end=300.0).results[0]
    assert result["duration_source"] == "wall"
    assert result["duration_ms"] == 6200  # 100.0 (reading started) .. 106.2 (RunEnd)
    # turn 1: 100.0 .. 101.3 (last tool-input delta); turn 2: 105.1 (TurnEnd) .. 106.0
    assert result["duration_api_ms"] == 1300 + 900


def test_wall_clock_later_frames_start_at_their_first_event() -> None:
    chunks = timed_chunks() + [(ln + b"\n", 200.0 + i / 10) for i, ln in enumerate(lines_of("multi_input_frames")[:5])]
    first, second = drive(chunks, clock="wall", started_at=START).results
    assert first["duration_ms"] == 6200
    assert second["duration_ms"] == 400  # 200.0 .. 200.4
    assert second["duration_api_ms"] == 200  # 200.0 .. 200.2, the last delta


def test_wall_clock_for_a_cut_stream_runs_to_the_end_of_input() -> None:
    result = drive(timed_chunks()[:8], clock="wall", started_at=START, end=110.0).results[0]
    assert result["subtype"] == "error"
    assert result["duration_ms"] == 10000
    assert result["duration_api_ms"] == 1300


def test_cancel_closes_the_frame_as_cancelled() -> None:
    run = drive(timed_chunks()[:5], clock="wall", started_at=START, end=None)
    run.core.cancel(102.0)
    result = orjson.loads(run.core.take_output())
    assert result["subtype"] == "cancelled" and result["is_error"] is True
    assert result["duration_ms"] == 2000
    assert result["duration_api_ms"] == 1200  # the turn was still streaming: up to 101.2
    assert "error" not in result


@pytest.mark.parametrize("key", ["ts", "timestamp"])
def test_recorded_clock_reads_the_events_stamps(key: str) -> None:
    result = drive(stamped(key), clock="recorded").results[0]
    assert result["duration_source"] == "recorded"
    assert result["duration_ms"] == 5700  # first event 100.5 .. RunEnd 106.2
    assert result["duration_api_ms"] == 800 + 900


@pytest.mark.parametrize("key", ["ts", "timestamp"])
def test_auto_picks_recorded_for_stamped_events(key: str) -> None:
    result = drive(stamped(key), clock="estimated", detect_recorded=True).results[0]
    assert result["duration_source"] == "recorded"
    assert result["duration_ms"] == 5700


def test_auto_keeps_its_fallback_for_plain_events() -> None:
    data = b"".join(c for c, _ in timed_chunks())
    result = drive(data, clock="estimated", detect_recorded=True).results[0]
    assert result["duration_source"] == "estimated"
    assert result["duration_ms"] == 787


def test_estimated_clock_uses_ttft_and_tbt() -> None:
    result = drive(b"".join(c for c, _ in timed_chunks()), clock="estimated").results[0]
    assert result["duration_api_ms"] == result["duration_ms"] == 412 + 15 * 4 + 300 + 15 * 1


def test_durations_are_never_negative() -> None:
    chunks = [(c, 100.0 - i) for i, (c, _) in enumerate(timed_chunks())]  # a clock going backwards
    result = drive(chunks, clock="wall", started_at=START).results[0]
    assert result["duration_ms"] == 0 and result["duration_api_ms"] == 0
