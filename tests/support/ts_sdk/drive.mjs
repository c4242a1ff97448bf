// Drives the real @anthropic-ai/claude-agent-sdk against caliban-claude, for tests/shim/test_shim_ts_sdk.py.
// Usage: node drive.mjs SDK_ENTRY SPEC_JSON   (or @PATH: the spec in a file, for one too large for argv)
//   SPEC_JSON: {"prompt": "text" | [user message texts, each sent after the previous result],
//               "options": {...query options...}, "hooks": true?, "blockingHook": true?,
//               "interrupt": true? (once the first run is under way), "setModel": name? (after the first
//               result), "abort": true? (abort the query once the first run is under way)}
// stdout: one JSON object a line, {"kind": "msg" | "init_result" | "exception" | "hook" | "done", "data": ...}
const [entry, specText] = process.argv.slice(2);
const { query } = await import(entry);
const { readFileSync } = await import('node:fs');
const spec = JSON.parse(specText.startsWith('@') ? readFileSync(specText.slice(1), 'utf8') : specText);
const emit = (kind, data) => process.stdout.write(JSON.stringify({ kind, data: data ?? null }) + '\n');
setTimeout(() => { emit('exception', 'no end after 60 s'); process.exit(124); }, 60000).unref();
const options = { ...spec.options, stderr: (d) => emit('stderr', String(d)) };
const abort = new AbortController();
if (spec.abort) options.abortController = abort;
if (spec.hooks) {
  const hook = async (input) => { emit('hook', input.hook_event_name); return {}; };
  options.hooks = { PreToolUse: [{ matcher: 'Bash', hooks: [hook], ...(spec.blockingHook ? { onFailure: 'block' } : {}) }] };
}
let prompt = spec.prompt;
const gates = [];  // one per message: opened by its result, then the next message is sent
let results = 0;
if (Array.isArray(spec.prompt)) {
  for (const _ of spec.prompt) { let open; gates.push({ wait: new Promise((r) => { open = r; }), open }); }
  prompt = (async function* () {
    for (const [i, text] of spec.prompt.entries()) {
      yield { type: 'user', message: { role: 'user', content: text }, parent_tool_use_id: null, session_id: '' };
      await gates[i].wait;
    }
  })();
}
const q = query({ prompt, options });
try {
  let first = true;
  for await (const m of q) {
    emit('msg', m);
    if (first) {
      first = false;
      emit('init_result', await q.initializationResult());
    }
    const underway = m.type === 'stream_event' || (m.type === 'system' && m.subtype === 'status');
    if (spec.interrupt && underway && !spec.interrupted) {
      spec.interrupted = true;
      emit('interrupt', await q.interrupt());
    }
    if (spec.abort && m.type === 'system' && m.subtype === 'init') abort.abort();
    if (m.type === 'result' && spec.setModel && results === 0) emit('set_model', await q.setModel(spec.setModel));
    if (m.type === 'result') gates[results++]?.open();
  }
} catch (e) {
  emit('exception', String(e?.message ?? e));
}
emit('done', null);
