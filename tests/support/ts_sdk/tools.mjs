// Drives the real @anthropic-ai/claude-agent-sdk with in-process MCP servers (createSdkMcpServer +
// tool() with a zod schema) against caliban-claude, for tests/test_shim_sdk_mcp_ts.py.
// Usage: node tools.mjs SDK_ENTRY SPEC_JSON
//   SPEC_JSON: {"prompt": text, "options": {...}, "mode": "ok" | "is_error" | "throw", "canUseTool": bool,
//               "deny": [n...] (the calls asked about, counted from 0, that are denied)}
// stdout: one JSON object a line, {"kind": "msg" | "handler" | "asked" | "status" | "exception" | "done", "data": ...}
const [entry, specText] = process.argv.slice(2);
const { query, createSdkMcpServer, tool } = await import(entry);
const { z } = await import(new URL('../../zod/index.js', 'file://' + entry).href);  // (the SDK's peer)
const spec = JSON.parse(specText);
const emit = (kind, data) => process.stdout.write(JSON.stringify({ kind, data }) + '\n');
setTimeout(() => { emit('exception', 'no end after 60 s'); process.exit(124); }, 60000).unref();
const add = tool('add', 'Add two numbers', { a: z.number(), b: z.number() }, async (args, extra) => {
  emit('handler', { args, meta: extra?._meta ?? null });
  if (spec.mode === 'throw') throw new Error('add exploded');
  if (spec.mode === 'is_error') return { content: [{ type: 'text', text: 'add refused: demo error' }], isError: true };
  return { content: [{ type: 'text', text: String(args.a + args.b) }] };
});
const options = {
  ...spec.options,
  mcpServers: { calc: createSdkMcpServer({ name: 'calc', version: '1.0.0', tools: [add] }) },
  stderr: (d) => emit('stderr', String(d)),
};
if (spec.canUseTool) {
  let asked = 0;
  options.canUseTool = async (toolName, input, { toolUseID }) => {
    emit('asked', { toolName, input, toolUseID });
    return (spec.deny ?? []).includes(asked++) ? { behavior: 'deny', message: 'not today' } : { behavior: 'allow', updatedInput: input };
  };
}
let done;
const finished = new Promise((r) => { done = r; });
const prompt = (async function* () {
  yield { type: 'user', message: { role: 'user', content: spec.prompt }, parent_tool_use_id: null, session_id: '' };
  await finished;
})();
try {
  const q = query({ prompt, options });
  emit('status', await q.mcpServerStatus());
  for await (const m of q) {
    emit('msg', m);
    if (m.type === 'result') { emit('status', await q.mcpServerStatus()); done(); }
  }
} catch (e) {
  emit('exception', String(e?.message ?? e));
}
emit('done', null);
