// The TypeScript Agent SDK's session functions on caliban-claude's sessions:
// node session_functions.mjs SDK_ENTRY SHIM CWD prints, as JSON, what each gave (the shim on
// the fake caliban of the environment, the config dir its CLAUDE_CONFIG_DIR).
const [entry, shim, cwd] = process.argv.slice(2);
const sdk = await import(entry);
const dir = { dir: cwd };
const out = {};

async function result(q) {
  let last;
  for await (const m of q) if (m.type === 'result') last = m;
  return last;
}
const ask = (prompt, extra = {}) => result(sdk.query({ prompt, options: { pathToClaudeCodeExecutable: shim, cwd, ...extra } }));
const info = async (id) => {
  const s = await sdk.getSessionInfo(id, dir);
  return s && { summary: s.summary, customTitle: s.customTitle ?? null, tag: s.tag ?? null, archived: s.archived ?? false };
};

const id = (await ask('how many files are here?')).session_id;
out.listed = (await sdk.listSessions(dir)).map((s) => [s.sessionId === id, s.summary]);
out.messages = (await sdk.getSessionMessages(id, dir)).map((m) => m.type);
await sdk.renameSession(id, 'count files', dir);
await sdk.tagSession(id, 'work', dir);
await sdk.archiveSession(id, dir);
out.archived = await info(id);
out.resumed = (await ask('again', { resume: id })).subtype;
out.afterPrompt = await info(id);
await sdk.unarchiveSession(id, dir);
out.unarchived = await info(id);
out.subagents = await sdk.listSubagents(id, dir);
out.subagentMessages = await sdk.getSubagentMessages(id, 'agent-none', dir);
const fork = await sdk.forkSession(id, dir);
out.forkMessages = (await sdk.getSessionMessages(fork.sessionId, dir)).map((m) => m.type);
out.fork = await info(fork.sessionId);
const inFork = await ask('in the fork', { resume: fork.sessionId });
out.forkResumed = [inFork.subtype, inFork.session_id === fork.sessionId];
await sdk.deleteSession(id, dir);
out.afterDelete = (await sdk.listSessions(dir)).map((s) => s.sessionId === fork.sessionId);
const warm = await sdk.startup({ options: { pathToClaudeCodeExecutable: shim, cwd } });
out.startup = (await result(warm.query('hi'))).result;
process.stdout.write(JSON.stringify(out) + '\n');
