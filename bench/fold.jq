# The translator's default fold, written in jq, for the peer benchmark:
#   jq -c -n --arg sid SESSION -f bench/fold.jq < events.ndjson
# Same frames and result keys as `translator --clock estimated` (bundled Claude list prices).
def dur: if . == null then 0 else .secs + .nanos / 1e9 end;
def rate($m):
  if ($m | test("^claude-opus-")) then {i: 15, o: 75, r: 1.5, w: 18.75}
  elif ($m | test("^claude-sonnet-")) then {i: 3, o: 15, r: 0.3, w: 3.75}
  elif ($m | test("^claude-haiku-")) then {i: 0.8, o: 4, r: 0.08, w: 1}
  else {i: 0, o: 0, r: 0, w: 0} end;
def cost($u; $r):
  (($u.cache_read_input_tokens // 0) as $read | ($u.cache_creation_input_tokens // 0) as $write
   | (($u.input_tokens - $read - $write) * $r.i + $read * $r.r + $write * $r.w
      + $u.output_tokens * $r.o) / 1e6);
def fresh: {turns: 0, cost: 0, api: 0, deltas: 0, answer: null, fallback: "", tools: {}, calls: 0,
             model: null, usage: {input_tokens: 0, output_tokens: 0}};
def subtype:
  if . == "EndOfTurn" then ["success", null]
  elif . == "Cancelled" then ["cancelled", null]
  elif . == "MaxTokensExhausted" then ["max_tokens", null]
  elif type == "object" and has("MaxTurnsReached") then ["max_turns", null]
  elif type == "object" then ["error", (to_entries[0].value | tostring)]
  else ["error", "stopped for \(.)"] end;
foreach inputs as $e ({s: fresh, out: [], model: null, init: false};
  .out = []
  | if $e.type == "TurnStart" then
      .s.model = $e.model | .s.deltas = 0 | .model //= $e.model
      | if .init then . else .init = true
          | .out += [{type: "system", subtype: "init", session_id: $sid, model: $e.model}] end
    elif $e.type == "AssistantTextDelta" then
      .s.deltas += 1 | if .s.answer == null then .s.fallback += $e.text else . end
    elif $e.type == "AssistantThinkingDelta" then .s.deltas += 1
    elif $e.type == "ToolCallStart" then .s.tools[$e.tool_use_id] = {name: $e.name, json: ""}
    elif $e.type == "ToolCallInputDelta" then
      .s.deltas += 1 | .s.tools[$e.tool_use_id].json += $e.partial_json
    elif $e.type == "ToolCallEnd" then
      (.s.tools[$e.tool_use_id] // {name: null, json: ""}) as $t
      | .s.calls += 1 | del(.s.tools[$e.tool_use_id])
      | .out += [
          {type: "tool_use", id: $e.tool_use_id, name: $t.name,
           input: ($t.json | if . == "" then {} else (try fromjson catch .) end)},
          {type: "tool_result", tool_use_id: $e.tool_use_id, is_error: $e.is_error,
           content: $e.content}]
    elif $e.type == "TurnEnd" then
      ([$e.assistant_message.content[] | select(.type == "text") | .text] | add // "") as $text
      | .s.turns += 1
      | .s.cost += cost($e.usage; rate(.s.model // .model))
      | .s.api += ($e.ttft | dur) + ($e.tbt | dur) * ([.s.deltas - 1, 0] | max)
      | .s.usage = (reduce ($e.usage | to_entries[]) as $kv (.s.usage; .[$kv.key] += $kv.value))
      | (if $text != "" then .s.answer = $text else . end)
      | .s.deltas = 0
      | .out += [{type: "message"} + $e.assistant_message]
    elif $e.type == "RunEnd" then
      ($e.stopped_for | subtype) as [$sub, $err]
      | ((.s.api * 1000 | round)) as $ms
      | .out += [{type: "result", subtype: $sub}
          + (if $sub == "success" then {result: (.s.answer // .s.fallback)} else {} end)
          + {session_id: $sid, total_cost_usd: (.s.cost * 1e10 | round / 1e10),
             turns: $e.turn_count, total_input_tokens: $e.total_usage.input_tokens,
             total_output_tokens: $e.total_usage.output_tokens, num_turns: $e.turn_count,
             is_error: ($sub != "success"), duration_ms: $ms, duration_api_ms: $ms,
             duration_source: "estimated", usage: $e.total_usage}
          + (if $sub == "success" then {}
             else (if $err then {error: $err} else {} end)
               + (if .s.answer then {last_assistant_text: .s.answer} else {} end)
               + {tool_calls_seen: .s.calls} end)
          + {turns_without_edit: ($e.turns_without_edit // 0),
             no_edit_nudge_emitted: ($e.no_edit_nudge_emitted // false)}]
      | .s = fresh
    else .out += [$e] end;
  .out[])
