"""A pydantic-ai agent whose model is Claude Code via its CLI (pydantic-ai-claude-code), run in
the client's own venv (support_venv) by tests/shim/test_shim_clients_pydantic_ai.py: argv[1] the
claude binary, argv[2] the working directory, then the prompts, each run given the messages of
the runs before it. Prints one JSON line a run: its output, usage and model, or the error."""

from __future__ import annotations

import json
import sys

from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse
from pydantic_ai_claude_code import ClaudeCodeModel, ClaudeCodeProvider

cli, folder, prompts = sys.argv[1], sys.argv[2], sys.argv[3:]
provider = ClaudeCodeProvider({"claude_cli_path": cli, "working_directory": folder, "use_sandbox_runtime": False})
agent = Agent(ClaudeCodeModel("sonnet", provider=provider))
history = None
for prompt in prompts:
    try:
        run = agent.run_sync(prompt, message_history=history)
    except Exception as exc:  # (what the client raised, for the test to read)
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}), flush=True)
        break
    history = run.all_messages()
    response = next(m for m in reversed(history) if isinstance(m, ModelResponse))
    usage = run.usage()
    print(json.dumps({"output": run.output, "model": response.model_name,
                      "usage": {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens}}), flush=True)
