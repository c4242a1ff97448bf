// Drives the real @anthropic-ai/claude-agent-sdk with canUseTool and hook callbacks against
// caliban-claude's drive backend, for tests/shim/test_shim_drive_ts.py.
// Usage: node callbacks.mjs SDK_ENTRY SPEC_JSON
//   SPEC_JSON: {"prompt": [user message texts, each sent after the previous result], "options": {...},
//               "deny": {toolUseID: {"message", "interrupt"?}}, "canUseTool": bool, "hookDeny": "substring"?,
//               "hookDecision": a PreToolUse permissionDecision for every call?, "supportedModels": bool}
// stdout: one JSON object a line, {"kind": "msg" | "asked" | "hook" | "models" | "exception" | "done", "data": ...}
const [entry, specText] = process.argv.slice(2);
const { query } = await import(entry);
const spec = JSON.parse(specText);
const emit = (kind, data) => process.stdout.write(JSON.stringify({ kind, data }) + '\n');
setTimeout(() => { emit('exception', 'no end after 60 s'); process.exit(124); }, 60000).unref();
const options = { ...spec.options, stderr: (d) => emit('stderr', String(d)) };
if (spec.canUseTool) {
  options.canUseTool = async (toolName, input, { toolUseID }) => {
    emit('asked', { toolName, input, toolUseID });
    const deny = (spec.deny ?? {})[toolUseID];
    return deny ? { behavior: 'deny', ...deny } : { behavior: 'allow', updatedInput: input };
  };
}
if (spec.hookDeny !== undefined || spec.hookDecision !== undefined) {
  const hook = async (input) => {
    emit('hook', input);
    if (spec.hookDecision !== undefined) {
      return { hookSpecificOutput: { hookEventName: 'PreToolUse', permissionDecision: spec.hookDecision } };
    }
    const deny = JSON.stringify(input.tool_input ?? {}).includes(spec.hookDeny);
    return { hookSpecificOutput: { hookEventName: 'PreToolUse', permissionDecision: deny ? 'deny' : 'allow',
                                   permissionDecisionReason: deny ? 'hook denies' : 'hook allows' } };
  };
  options.hooks = { PreToolUse: [{ matcher: 'Bash', hooks: [hook] }] };
}
const gates = [];
let results = 0;
for (const _ of spec.prompt) { let open; gates.push({ wait: new Promise((r) => { open = r; }), open }); }
const prompt = (async function* () {
  for (const [i, text] of spec.prompt.entries()) {
    yield { type: 'user', message: { role: 'user', content: text }, parent_tool_use_id: null, session_id: '' };
    await gates[i].wait;
  }
})();
try {
  const q = query({ prompt, options });
  if (spec.supportedModels) emit('models', await q.supportedModels());
  for await (const m of q) {
    emit('msg', m);
    if (m.type === 'result') gates[results++]?.open();
  }
} catch (e) {
  emit('exception', String(e?.message ?? e));
}
emit('done', null);
