"""LangChain's `bind_tools` on `caliban-claude`, through langchain-claude-cli 1.2.1 from PyPI
(a drop-in ChatAnthropic on the Claude Code CLI): its tools are an in-process SDK MCP server
(`mcp__lc__*`) whose every call a PreToolUse hook `defer`s, so the run stops with the call
pending (`tool_deferred`) and LangChain hands the tool call to the caller; the caller's
ToolMessage comes back on the resumed session, where the hook lets the call through and the
handler delivers the result (the fake caliban calls the tool again, as the model would)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from langchain_claude_cli import ChatClaudeCli
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from support_processes import fake_caliban

SHIM = str(Path(sys.executable).with_name("caliban-claude"))
CALL = {"tool": "mcp__lc__get_weather", "input": {"city": "Paris"}, "id": "toolu_weather"}


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return "sunny"


def test_bind_tools_hands_the_call_to_the_caller_and_takes_its_result_back(tmp_path: Path) -> None:
    wrapper = fake_caliban(tmp_path)
    runs = [{"mcp_calls": [CALL], "text": "unused"}, {"mcp_calls": [CALL], "text": "It is sunny in Paris."}]
    env = {"CALIBAN_BIN": str(wrapper), "CALIBAN_SESSIONS_DIR": str(tmp_path / "sessions"),
           "FAKE_CALIBAN_SCRIPTS": json.dumps(runs), "FAKE_CALIBAN_LOG": str(tmp_path / "calls.jsonl")}  # fmt: skip
    llm = ChatClaudeCli(cli_path=SHIM, env=env, auth="inherit").bind_tools([get_weather])
    question = HumanMessage("What is the weather in Paris?")
    first = llm.invoke([question])
    assert isinstance(first, AIMessage)
    (call,) = first.tool_calls  # (its id the relay's, which the hook was told: caliban names a call once it has returned)
    assert (call["name"], call["args"]) == ("get_weather", {"city": "Paris"}) and str(call["id"]).startswith("toolu_")
    answer = ToolMessage(content="sunny", tool_call_id=call["id"])
    second = llm.invoke([question, first, answer])
    assert isinstance(second, AIMessage) and second.tool_calls == [] and "It is sunny in Paris." in str(second.content)
    argvs = [json.loads(line)["argv"] for line in (tmp_path / "calls.jsonl").read_text().splitlines()]
    assert len(argvs) == 2 and "--resume" in argvs[1]  # the second run continued the first's session
