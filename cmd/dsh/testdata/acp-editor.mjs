// A third-party ACP client (the TypeScript SDK) as an editor drives `dsh
// acp`: it offers fs (its buffers: notes.txt with an unsaved line) and
// terminal, reads the session's config options and commands, picks another
// model, prompts for a command and an edit (allowing each ask) and runs
// /cost. Every frame dsh writes is validated
// against the SDK's schema; the result is one JSON object on stdout.
//
// usage: node acp-editor.mjs SDK_ENTRY DSH_BINARY CWD MODEL
import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import { pathToFileURL } from "node:url";
import path from "node:path";

const [sdkEntry, dsh, cwd, model] = process.argv.slice(2);
const acp = await import(pathToFileURL(sdkEntry).href);
const z = await import(pathToFileURL(path.join(path.dirname(sdkEntry), "schema", "zod.gen.js")).href);

const proc = spawn(dsh, ["acp"], { stdio: ["pipe", "pipe", "inherit"] });
const exited = new Promise((resolve) => proc.on("exit", (code) => resolve(code)));

// Every frame both ways, to validate dsh's by the method it answers.
const sent = new Map(); // request id → method
const received = [];
const toAgent = Writable.toWeb(proc.stdin);
const tapOut = new WritableStream({
  async write(chunk) {
    for (const line of new TextDecoder().decode(chunk).split("\n").filter(Boolean)) {
      const m = JSON.parse(line);
      if (m.method && m.id !== undefined) sent.set(JSON.stringify(m.id), m.method);
    }
    const w = toAgent.getWriter();
    await w.write(chunk);
    w.releaseLock();
  },
  close() { return toAgent.close(); },
});
const fromAgent = Readable.toWeb(proc.stdout).pipeThrough(new TransformStream({
  transform(chunk, controller) {
    received.push(new TextDecoder().decode(chunk));
    controller.enqueue(chunk);
  },
}));

const updates = [];
const asks = [];
const reads = [];
const writes = [];
const buffers = { [path.join(cwd, "notes.txt")]: "old line\nunsaved line\n" };
const stream = acp.ndJsonStream(tapOut, fromAgent);
const conn = new acp.ClientSideConnection(() => ({
  async sessionUpdate(p) { updates.push(p.update); },
  async requestPermission(p) {
    asks.push(p);
    const allow = p.options.find((o) => o.kind === "allow_once");
    return { outcome: { outcome: "selected", optionId: allow.optionId } };
  },
  // The editor's buffers: notes.txt has an unsaved line.
  async readTextFile(p) {
    reads.push(p.path);
    if (!(p.path in buffers)) throw new Error("no such buffer");
    return { content: buffers[p.path] };
  },
  async writeTextFile(p) {
    writes.push({ path: p.path, content: p.content });
    buffers[p.path] = p.content;
    return {};
  },
}), stream);

await conn.initialize({ protocolVersion: acp.PROTOCOL_VERSION,
  clientCapabilities: { fs: { readTextFile: true, writeTextFile: true }, terminal: true } });
const created = await conn.newSession({ cwd, mcpServers: [] });
const { sessionId } = created;
const set = await conn.setSessionConfigOption({ sessionId, configId: "model", value: model });
const first = await conn.prompt({ sessionId, prompt: [{ type: "text", text: "Edit the notes\nplease" }] });
const cost = await conn.prompt({ sessionId, prompt: [{ type: "text", text: "/cost" }] });
let badModel = null;
try {
  await conn.setSessionConfigOption({ sessionId, configId: "model", value: "no-such-model" });
} catch (e) {
  badModel = e.message ?? String(e);
}
proc.stdin.end();
const exit = await exited;

// Validate dsh's frames: notifications and requests by method, responses
// by the method of the request they answer.
const invalid = [];
const byMethod = {
  "session/update": z.zSessionNotification,
  "session/request_permission": z.zRequestPermissionRequest,
  "fs/read_text_file": z.zReadTextFileRequest,
  "fs/write_text_file": z.zWriteTextFileRequest,
};
const byAnswer = {
  "initialize": z.zInitializeResponse,
  "session/new": z.zNewSessionResponse,
  "session/set_config_option": z.zSetSessionConfigOptionResponse,
  "session/prompt": z.zPromptResponse,
};
let frames = 0;
for (const line of received.join("").split("\n").filter(Boolean)) {
  const m = JSON.parse(line);
  frames++;
  let schema, value;
  if (m.method) {
    schema = byMethod[m.method];
    value = m.params;
  } else if (m.result !== undefined) {
    schema = byAnswer[sent.get(JSON.stringify(m.id))];
    value = m.result;
  }
  if (!schema) continue;
  const r = schema.safeParse(value);
  if (!r.success) invalid.push({ frame: line.slice(0, 400), error: String(r.error).slice(0, 400) });
}

const kinds = [...new Set(updates.map((u) => u.sessionUpdate))];
process.stdout.write(JSON.stringify({
  exit, frames, invalid, kinds,
  configOptions: created.configOptions,
  afterSet: set.configOptions,
  commands: updates.find((u) => u.sessionUpdate === "available_commands_update")?.availableCommands,
  title: updates.find((u) => u.sessionUpdate === "session_info_update")?.title,
  toolCalls: updates.filter((u) => u.sessionUpdate === "tool_call"),
  toolUpdates: updates.filter((u) => u.sessionUpdate === "tool_call_update"),
  asks: asks.map((a) => a.toolCall),
  stops: [first.stopReason, cost.stopReason],
  costText: updates.filter((u) => u.sessionUpdate === "agent_message_chunk").map((u) => u.content.text).join("|"),
  badModel, reads, writes,
}) + "\n");
