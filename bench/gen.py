"""Generate a reference event stream in the agent's exact serde shape (compact JSON, Rust field
order): runs of several turns with ~40 text deltas, one tool call with a ~2 KB result and the
full history in RunEnd. Deterministic for a given size.

    python bench/gen.py OUT.ndjson [MEGABYTES]
"""

from __future__ import annotations

import random
import sys

import orjson

WORDS = ["the", "agent", "reads", "a", "file", "and", "counts", "lines", "then", "writes", "a", "summary", "of", "what", "it", "found", "in", "the", "repository", "including", "tests", "docs", "and", "build", "scripts", "before", "it", "answers"]
TURNS_PER_RUN = 4
DELTAS_PER_TURN = 40


def text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words)) + " "


def run_events(rng: random.Random, run: int) -> list[bytes]:
    out: list[bytes] = []
    dump = orjson.dumps
    history: list[dict] = [{"role": "user", "content": [{"type": "text", "text": text(rng, 12)}]}]
    total = {"input_tokens": 0, "output_tokens": 0, "cache_creation_input_tokens": 0,
             "cache_read_input_tokens": 0}
    for t in range(TURNS_PER_RUN):
        last = t == TURNS_PER_RUN - 1
        out.append(dump({"type": "TurnStart", "turn_index": t,
                         "message_id": f"msg_{run:06d}_{t}", "model": "claude-sonnet-4-5"}))
        pieces = [text(rng, rng.randint(2, 5)) for _ in range(DELTAS_PER_TURN)]
        for piece in pieces:
            out.append(dump({"type": "AssistantTextDelta", "turn_index": t,
                             "content_block_index": 0, "text": piece}))
        content: list[dict] = [{"type": "text", "text": "".join(pieces)}]
        results: list[dict] = []
        if not last:
            tid = f"toolu_{run:06d}_{t}"
            args = {"command": f"grep -rn {rng.choice(WORDS)} src | head -50"}
            raw = dump(args).decode()
            out.append(dump({"type": "ToolCallStart", "turn_index": t, "tool_use_id": tid,
                             "name": "Bash"}))
            for i in range(0, len(raw), 16):
                out.append(dump({"type": "ToolCallInputDelta", "turn_index": t,
                                 "tool_use_id": tid, "partial_json": raw[i:i + 16]}))
            result = text(rng, 330)[:2048]
            blocks = [{"type": "text", "text": result}]
            out.append(dump({"type": "ToolCallEnd", "turn_index": t, "tool_use_id": tid,
                             "is_error": False, "content": blocks, "result_text": result,
                             "truncated": False}))
            content.append({"type": "tool_use", "id": tid, "name": "Bash", "input": args})
            results = [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": tid,
                                                     "content": blocks, "is_error": False}]}]
        usage = {"input_tokens": 3000 + 400 * t, "output_tokens": 120,
                 "cache_creation_input_tokens": 200, "cache_read_input_tokens": 2500 + 300 * t}
        for k, v in usage.items():
            total[k] += v
        message = {"role": "assistant", "content": content}
        out.append(dump({"type": "TurnEnd", "turn_index": t, "assistant_message": message,
                         "tool_results": results,
                         "stop_reason": "end_turn" if last else "tool_use", "usage": usage,
                         "ttft": {"secs": 0, "nanos": 400_000_000},
                         "tbt": {"secs": 0, "nanos": 15_000_000}}))
        history.append(message)
        history.extend(results)
    out.append(dump({"type": "RunEnd", "final_messages": history, "total_usage": total,
                     "turn_count": TURNS_PER_RUN, "stopped_for": "EndOfTurn",
                     "turns_without_edit": TURNS_PER_RUN, "no_edit_nudge_emitted": False}))
    return out


def generate(path: str, megabytes: float) -> int:
    rng = random.Random(49)
    target = int(megabytes * 1_000_000)
    written = runs = 0
    with open(path, "wb") as f:
        while written < target:
            data = b"\n".join(run_events(rng, runs)) + b"\n"
            f.write(data)
            written += len(data)
            runs += 1
    return runs


if __name__ == "__main__":
    n = generate(sys.argv[1], float(sys.argv[2]) if len(sys.argv) > 2 else 100)
    print(f"{n} runs", file=sys.stderr)
