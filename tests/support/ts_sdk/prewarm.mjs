// TS SDK prewarm() + claim() against caliban-claude, for tests/shim/test_shim_claim.py.
// Usage: node prewarm.mjs SDK_ENTRY @SPEC_PATH
//   SPEC: {"options": {...prewarm's options...}, "claim": {...claim's options: cwd, permissionMode, ...},
//          "prompt": "text", "allow": true? (a canUseTool that allows every call: the drive backend)}
// stdout: one JSON object a line, {"kind": "msg" | "claimed" | "refused" | "exception" | "stderr" | "done", "data": ...}
const [entry, specText] = process.argv.slice(2);
const { prewarm } = await import(entry);
const { readFileSync } = await import('node:fs');
const spec = JSON.parse(readFileSync(specText.slice(1), 'utf8'));
const emit = (kind, data) => process.stdout.write(JSON.stringify({ kind, data: data ?? null }) + '\n');
setTimeout(() => { emit('exception', 'no end after 60 s'); process.exit(124); }, 60000).unref();
try {
  const options = { ...spec.options, stderr: (d) => emit('stderr', String(d)) };
  if (spec.allow) options.canUseTool = async (name, input) => ({ behavior: 'allow', updatedInput: input });
  const spare = await prewarm({ options });
  const claimed = spare.claimed.then((c) => emit('claimed', c), (e) => emit('refused', String(e?.message ?? e)));
  const q = spare.claim({ prompt: spec.prompt, options: spec.claim });
  for await (const m of q) emit('msg', m);
  await claimed;
} catch (e) {
  emit('exception', String(e?.message ?? e));
}
emit('done', null);
