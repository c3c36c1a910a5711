// A third-party ACP client (the TypeScript SDK) as an editor with a
// terminal drives `dsh acp`: it offers terminal/* and runs what dsh asks in
// its own processes, allowing each ask. Every frame dsh writes is
// validated against the SDK's schema; the result is one JSON object on
// stdout.
//
// With MODE "cancel", the client cancels the prompt once a tool call shows
// a terminal; with "flood", its terminals answer more output than asked.
//
// usage: node acp-terminal.mjs SDK_ENTRY DSH_BINARY CWD [MODE]
import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import { pathToFileURL } from "node:url";
import path from "node:path";

const [sdkEntry, dsh, cwd, mode] = process.argv.slice(2);
const acp = await import(pathToFileURL(sdkEntry).href);
const z = await import(pathToFileURL(path.join(path.dirname(sdkEntry), "schema", "zod.gen.js")).href);

const proc = spawn(dsh, ["acp"], { stdio: ["pipe", "pipe", "inherit"] });
const exited = new Promise((resolve) => proc.on("exit", (code) => resolve(code)));
const received = [];
const fromAgent = Readable.toWeb(proc.stdout).pipeThrough(new TransformStream({
  transform(chunk, controller) {
    received.push(new TextDecoder().decode(chunk));
    controller.enqueue(chunk);
  },
}));

// The editor's terminals: real processes, their output kept.
const terminals = new Map();
const calls = [];
let next = 0;
const updates = [];
let cancelled = false;
let conn;
const conn0 = new acp.ClientSideConnection(() => ({
  async sessionUpdate(p) {
    updates.push(p.update);
    if (mode === "cancel" && !cancelled && (p.update.content ?? []).some((c) => c.type === "terminal")) {
      cancelled = true;
      await conn.cancel({ sessionId: p.sessionId });
    }
  },
  async requestPermission(p) {
    const allow = p.options.find((o) => o.kind === "allow_once");
    return { outcome: { outcome: "selected", optionId: allow.optionId } };
  },
  async createTerminal(p) {
    const id = `term-${++next}`;
    calls.push({ method: "create", id, command: p.command, args: p.args, cwd: p.cwd, limit: p.outputByteLimit });
    const child = spawn(p.command, p.args ?? [], { cwd: p.cwd, stdio: ["ignore", "pipe", "pipe"] });
    const t = { output: "", exit: null };
    t.done = new Promise((resolve) => child.on("exit", (code, signal) => { t.exit = { exitCode: code, signal }; resolve(); }));
    child.stdout.on("data", (d) => { t.output += d; });
    child.stderr.on("data", (d) => { t.output += d; });
    t.child = child;
    terminals.set(id, t);
    return { terminalId: id };
  },
  async waitForTerminalExit(p) {
    calls.push({ method: "wait_for_exit", id: p.terminalId });
    const t = terminals.get(p.terminalId);
    await t.done;
    return t.exit;
  },
  async terminalOutput(p) {
    calls.push({ method: "output", id: p.terminalId });
    const t = terminals.get(p.terminalId);
    const output = mode === "flood" ? "é".repeat(p.outputByteLimit ?? 10) + "x".repeat(100000) + t.output : t.output;
    return { output, truncated: false, ...(t.exit ? { exitStatus: t.exit } : {}) };
  },
  async killTerminal(p) {
    calls.push({ method: "kill", id: p.terminalId });
    terminals.get(p.terminalId).child.kill("SIGKILL");
    return {};
  },
  async releaseTerminal(p) {
    calls.push({ method: "release", id: p.terminalId });
    const t = terminals.get(p.terminalId);
    if (t.exit === null) t.child.kill("SIGKILL");
    terminals.delete(p.terminalId);
    return {};
  },
}), acp.ndJsonStream(Writable.toWeb(proc.stdin), fromAgent));
conn = conn0;

await conn.initialize({ protocolVersion: acp.PROTOCOL_VERSION, clientCapabilities: { terminal: true } });
const { sessionId } = await conn.newSession({ cwd, mcpServers: [] });
const res = await conn.prompt({ sessionId, prompt: [{ type: "text", text: "run it" }] });
proc.stdin.end();
const exit = await exited;

const invalid = [];
const byMethod = {
  "session/update": z.zSessionNotification,
  "session/request_permission": z.zRequestPermissionRequest,
  "terminal/create": z.zCreateTerminalRequest,
  "terminal/output": z.zTerminalOutputRequest,
  "terminal/wait_for_exit": z.zWaitForTerminalExitRequest,
  "terminal/kill": z.zKillTerminalRequest,
  "terminal/release": z.zReleaseTerminalRequest,
};
let frames = 0;
for (const line of received.join("").split("\n").filter(Boolean)) {
  const m = JSON.parse(line);
  frames++;
  const schema = m.method && byMethod[m.method];
  if (!schema) continue;
  const r = schema.safeParse(m.params);
  if (!r.success) invalid.push({ frame: line.slice(0, 400), error: String(r.error).slice(0, 400) });
}
process.stdout.write(JSON.stringify({
  exit, frames, invalid, stop: res.stopReason, calls, left: terminals.size,
  toolUpdates: updates.filter((u) => u.sessionUpdate === "tool_call_update"),
}) + "\n");
