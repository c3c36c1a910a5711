// A scripted A2A agent written with the A2A JavaScript SDK (1.x, serving
// v0.3 JSON-RPC through its compatibility layer), for the a2a provider's
// conformance suite: "conformance: complete" completes with an artifact,
// "conformance: hang" works until cancelled, "conformance: fail" fails.
// Prints "listening PORT" once it serves on loopback.
// Usage: node a2a-agent.mjs SDK_DIR
import http from "node:http";

const [sdkDir] = process.argv.slice(2);
const { DefaultRequestHandler, InMemoryTaskStore, ServerCallContext } = await import(sdkDir + "/dist/server/index.js");
const { LegacyJsonRpcTransportHandler } = await import(sdkDir + "/dist/compat/v0_3/server/index.js");

const SUBMITTED = 1, WORKING = 2, COMPLETED = 3, FAILED = 4, CANCELED = 5;
const text = (parts) => (parts ?? []).map((p) => (p.content?.$case === "text" ? p.content.value : "")).join("");
const agentMessage = (s, taskId, contextId) => ({
  messageId: crypto.randomUUID(), contextId, taskId, role: 2,
  parts: [{ content: { $case: "text", value: s } }], metadata: undefined, extensions: [], referenceTaskIds: [],
});
const hung = new Map();

const executor = {
  async execute(rc, bus) {
    const { taskId, contextId } = rc;
    const status = (state, s) =>
      bus.publish({ kind: "statusUpdate", data: { taskId, contextId, metadata: undefined,
        status: { state, message: s ? agentMessage(s, taskId, contextId) : undefined, timestamp: new Date().toISOString() } } });
    bus.publish({ kind: "task", data: { id: taskId, contextId, history: [rc.userMessage], artifacts: [], metadata: undefined,
      status: { state: SUBMITTED, message: undefined, timestamp: new Date().toISOString() } } });
    status(WORKING, "js agent working");
    const prompt = text(rc.userMessage.parts);
    if (prompt === "conformance: hang") {
      await new Promise((resolve) => hung.set(taskId, resolve));
      status(CANCELED, "cancelled");
    } else if (prompt === "conformance: fail") {
      status(FAILED, "scripted failure");
    } else {
      bus.publish({ kind: "artifactUpdate", data: { taskId, contextId, append: false, lastChunk: true, metadata: undefined,
        artifact: { artifactId: crypto.randomUUID(), name: "answer", description: "", metadata: undefined, extensions: [],
          parts: [{ content: { $case: "text", value: "js done: " + prompt } }] } } });
      status(COMPLETED, "");
    }
    bus.finished();
  },
  async cancelTask(taskId) {
    hung.get(taskId)?.();
    hung.delete(taskId);
  },
};

const server = http.createServer();
server.listen(0, "127.0.0.1", () => {
  const url = `http://127.0.0.1:${server.address().port}`;
  const card = { name: "js-scripted", description: "a scripted agent of the A2A JavaScript SDK", version: "1",
    supportedInterfaces: [{ url: url + "/rpc", protocolBinding: "JSONRPC", protocolVersion: "0.3", tenant: "" }],
    provider: undefined, capabilities: { streaming: true, pushNotifications: false, extensions: [] },
    securitySchemes: {}, securityRequirements: [], defaultInputModes: ["text/plain"], defaultOutputModes: ["text/plain"],
    skills: [], signatures: [] };
  const legacyCard = { name: card.name, description: card.description, version: "1", protocolVersion: "0.3.0",
    url: url + "/rpc", preferredTransport: "JSONRPC", capabilities: { streaming: true },
    defaultInputModes: ["text/plain"], defaultOutputModes: ["text/plain"], skills: [] };
  const rpc = new LegacyJsonRpcTransportHandler(new DefaultRequestHandler(card, new InMemoryTaskStore(), executor));
  server.on("request", async (req, res) => {
    if (req.method === "GET" && req.url === "/.well-known/agent-card.json") {
      res.writeHead(200, { "Content-Type": "application/json" }).end(JSON.stringify(legacyCard));
      return;
    }
    let body = "";
    for await (const chunk of req) body += chunk;
    const result = await rpc.handle(body, new ServerCallContext());
    if (result && typeof result[Symbol.asyncIterator] === "function") {
      res.writeHead(200, { "Content-Type": "text/event-stream", "Cache-Control": "no-cache" });
      try {
        for await (const ev of result) res.write(`data: ${JSON.stringify(ev)}\n\n`);
      } finally {
        res.end();
      }
      return;
    }
    res.writeHead(200, { "Content-Type": "application/json" }).end(JSON.stringify(result));
  });
  console.log(`listening ${server.address().port}`);
});
