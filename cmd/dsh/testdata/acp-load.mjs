// A third-party ACP client (the TypeScript SDK) continuing a dsh session
// across processes: it creates a session in one `dsh acp`, prompts it, ends
// that process, starts a new `dsh acp`, loads the session (recording the
// replayed conversation) and prompts it again. It prints one JSON object.
//
// usage: node acp-load.mjs SDK_ENTRY DSH_BINARY CWD
import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import { pathToFileURL } from "node:url";

const [sdkEntry, dsh, cwd] = process.argv.slice(2);
const acp = await import(pathToFileURL(sdkEntry).href);

async function withAgent(fn) {
  const proc = spawn(dsh, ["acp"], { stdio: ["pipe", "pipe", "inherit"] });
  const exited = new Promise((resolve) => proc.on("exit", (code, signal) => resolve({ code, signal })));
  const updates = [];
  const stream = acp.ndJsonStream(Writable.toWeb(proc.stdin), Readable.toWeb(proc.stdout));
  const conn = new acp.ClientSideConnection(() => ({
    async sessionUpdate(p) { updates.push(p.update); },
    async requestPermission() { return { outcome: { outcome: "cancelled" } }; },
  }), stream);
  const init = await conn.initialize({ protocolVersion: acp.PROTOCOL_VERSION, clientCapabilities: {} });
  const result = await fn(conn, init, updates);
  proc.stdin.end(); // the process ends with its client
  const exit = await exited;
  return { ...result, exit };
}

const text = (updates, kind) => updates.filter((u) => u.sessionUpdate === kind && u.content?.type === "text").map((u) => u.content.text).join("");

const first = await withAgent(async (conn, init, updates) => {
  const { sessionId } = await conn.newSession({ cwd, mcpServers: [] });
  const r = await conn.prompt({ sessionId, prompt: [{ type: "text", text: "first question" }] });
  return { sessionId, stop: r.stopReason, answer: text(updates, "agent_message_chunk") };
});

const second = await withAgent(async (conn, init, updates) => {
  const listed = await conn.listSessions({ cwd });
  await conn.loadSession({ sessionId: first.sessionId, cwd, mcpServers: [] });
  const replayUser = text(updates, "user_message_chunk");
  const replayAgent = text(updates, "agent_message_chunk");
  updates.length = 0;
  const r = await conn.prompt({ sessionId: first.sessionId, prompt: [{ type: "text", text: "second question" }] });
  return {
    loadSession: init.agentCapabilities?.loadSession === true,
    listed: listed.sessions.map((s) => s.sessionId),
    replayUser, replayAgent, stop: r.stopReason, answer: text(updates, "agent_message_chunk"),
  };
});

process.stdout.write(JSON.stringify({ first, second }) + "\n");
