// The TypeScript Agent SDK's session readers on a Claude config dir (CLAUDE_CONFIG_DIR):
// node sessions.mjs SDK_ENTRY [DIR] prints {sessions, messages: {<id>: [...]}, inDir} as JSON.
const [entry, dir] = process.argv.slice(2);
const { listSessions, getSessionMessages } = await import(entry);
const sessions = await listSessions();
const messages = {};
for (const s of sessions) messages[s.sessionId] = await getSessionMessages(s.sessionId);
const inDir = dir ? await listSessions({ dir }) : null;
process.stdout.write(JSON.stringify({ sessions, messages, inDir }) + '\n');
