// Drives `dsh a2a` with the A2A JavaScript SDK (1.x, its v0.3
// compatibility layer on): the card, a request refused without the token,
// a streamed task with a delegation inside, and a task cancelled while its
// child works. Prints one JSON object.
// Usage: node a2a-client.mjs SDK_DIR BASE_URL TOKEN
const [sdkDir, base, token] = process.argv.slice(2);
const { ClientFactory, JsonRpcTransportFactory, DefaultAgentCardResolver } = await import(sdkDir + "/dist/client/index.js");

const withToken = (input, init = {}) => {
  const headers = new Headers(init.headers);
  headers.set("Authorization", `Bearer ${token}`);
  return fetch(input, { ...init, headers });
};
const clientOf = (fetchImpl) =>
  new ClientFactory({
    transports: [new JsonRpcTransportFactory({ fetchImpl, legacyCompat: { enabled: true } })],
    cardResolver: new DefaultAgentCardResolver({ fetchImpl, legacyCompat: { enabled: true } }),
  }).createFromUrl(base);
const message = (text) => ({
  messageId: crypto.randomUUID(), contextId: "", taskId: "", role: 1,
  parts: [{ content: { $case: "text", value: text } }], metadata: undefined, extensions: [], referenceTaskIds: [],
});
const request = (text) => ({ tenant: "", message: message(text), configuration: undefined, metadata: undefined });
const texts = (parts) => (parts ?? []).map((p) => (p.content?.$case === "text" ? p.content.value : "")).join("");

const out = {};
out.card = await (await fetch(base + "/.well-known/agent-card.json")).json();

try {
  const anonymous = await clientOf(fetch);
  await anonymous.sendMessage(request("hi"));
  out.unauthorized = "accepted";
} catch (e) {
  out.unauthorized = String(e?.message ?? e);
}

const client = await clientOf(withToken);
const follow = async (text, onEvent) => {
  const seen = { states: [], statusTexts: [], artifacts: [], taskId: "" };
  for await (const ev of client.sendMessageStream(request(text))) {
    const p = ev.payload;
    if (!p) continue;
    if (p.$case === "task") seen.taskId = p.value.id;
    if (p.$case === "statusUpdate") {
      seen.taskId = p.value.taskId;
      seen.states.push(p.value.status?.state);
      const t = texts(p.value.status?.message?.parts);
      if (t) seen.statusTexts.push(t);
    }
    if (p.$case === "artifactUpdate") seen.artifacts.push(texts(p.value.artifact?.parts));
    if (onEvent) await onEvent(seen);
  }
  return seen;
};
out.delegation = await follow("delegate: fix it");

let cancelled = false;
out.cancel = await follow("delegate: hang", async (seen) => {
  if (!cancelled && seen.taskId && seen.statusTexts.some((t) => t.includes("started"))) {
    cancelled = true;
    await client.cancelTask({ tenant: "", id: seen.taskId, metadata: undefined });
  }
});
out.cancel.afterwards = (await client.getTask({ tenant: "", id: out.cancel.taskId })).status?.state;
console.log(JSON.stringify(out));
