// MCP over Streamable HTTP (`execbox serve`, /mcp): the official TypeScript SDK client with its
// StreamableHTTPClientTransport (it validates our replies with its own schemas), then plain
// fetch for what a client library never sends: bad origins, missing keys and sessions, GET,
// batches, wrong headers.
// Usage: node http_client_test.mjs URL TOKEN [OTHER_TOKEN]   (URL ends in /mcp)
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { processSteps, processTools } from "./process_steps.mjs";

const [url, token, otherToken] = process.argv.slice(2);
let passed = 0, failed = 0;

function check(name, condition, detail = "") {
  if (condition) {
    passed++;
    console.log(`ok   ${name}`);
  } else {
    failed++;
    console.log(`FAIL ${name} ${detail}`);
  }
}

async function step(name, fn) {
  try {
    await fn();
  } catch (e) {
    failed++;
    console.log(`FAIL ${name}: threw ${e && e.stack ? e.stack : e}`);
  }
}

const textOf = (r) => r.content.filter((c) => c.type === "text").map((c) => c.text).join("\n");
const long = { timeout: 120000 };
const auth = (t = token) => ({ Authorization: `Bearer ${t}` });

// Every exchange the SDK makes, to check how each was answered.
const exchanges = [];
async function recordingFetch(input, init) {
  let rpc;
  try { rpc = JSON.parse(init?.body ?? "null")?.method; } catch { rpc = undefined; }
  const response = await fetch(input, init);
  exchanges.push({ method: init?.method ?? "GET", rpc, status: response.status, type: response.headers.get("content-type") ?? "" });
  return response;
}
const lastExchange = (rpc) => exchanges.filter((e) => e.rpc === rpc).at(-1);

function connect() {
  const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: auth() }, fetch: recordingFetch });
  const client = new Client({ name: "execbox-http-test", version: "1.0.0" });
  return { transport, client };
}

// A raw POST of one message. `headers` replace the defaults named the same.
const post = (body, headers = {}) => fetch(url, {
  method: "POST",
  headers: { ...auth(), "Content-Type": "application/json", Accept: "application/json, text/event-stream", ...headers },
  body: typeof body === "string" ? body : JSON.stringify(body),
});
const ping = (id = 900) => ({ jsonrpc: "2.0", id, method: "ping" });

const { transport, client } = connect();
let sessionId;

await step("initialize", async () => {
  await client.connect(transport);
  sessionId = transport.sessionId;
  check("initialize: Mcp-Session-Id issued, visible ASCII", typeof sessionId === "string" && /^[\x21-\x7e]{16,}$/.test(sessionId), String(sessionId));
  check("initialize: negotiates 2025-11-25", transport.protocolVersion === "2025-11-25", String(transport.protocolVersion));
  check("initialize: server name", client.getServerVersion()?.name === "execbox");
  check("initialize: answered as JSON", lastExchange("initialize")?.type.startsWith("application/json"), JSON.stringify(lastExchange("initialize")));
  check("initialized notification: 202", lastExchange("notifications/initialized")?.status === 202, JSON.stringify(lastExchange("notifications/initialized")));
  const get = exchanges.find((e) => e.method === "GET");
  check("GET stream the SDK tries: 405", get === undefined || get.status === 405, JSON.stringify(get));
});

await step("ping", async () => {
  check("ping answers", (await client.ping()) !== undefined);
});

await step("tools/list", async () => {
  const { tools } = await client.listTools();
  const names = tools.map((t) => t.name).sort();
  check("tools/list: the session and process tools", JSON.stringify(names) ===
    JSON.stringify(["check_python", "close_session", "create_session", "execute_python", "fork_session", "pause_session", "resume_session", ...processTools].sort()), JSON.stringify(names));
  const exec = tools.find((t) => t.name === "execute_python")?.inputSchema?.properties ?? {};
  check("tools/list: execute_python carries this server's defaults and maxima",
    exec.memory_mb?.default === 256 && exec.memory_mb?.maximum === 4096 && exec.timeout_seconds?.maximum === 300 &&
    exec.disk_mb?.default === 64 && exec.code?.type === "string", JSON.stringify(exec));
  check("tools/list: schemas", tools.every((t) => t.inputSchema?.type === "object" && t.outputSchema?.type === "object"));
});

await step("print", async () => {
  const r = await client.callTool({ name: "execute_python", arguments: { code: "print(6*7)" } }, undefined, long);
  check("print: text has 42", textOf(r).includes("42"), textOf(r));
  check("print: isError false, status ok", r.isError === false && r.structuredContent?.status === "ok", JSON.stringify(r.structuredContent));
  check("print: tools/call answered as an SSE stream", lastExchange("tools/call")?.type.startsWith("text/event-stream"), JSON.stringify(lastExchange("tools/call")));
});

await step("plot", async () => {
  const code = "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.show()";
  const r = await client.callTool({ name: "execute_python", arguments: { code } }, undefined, long);
  const display = r.structuredContent?.display ?? [];
  check("plot: one displayed output", display.length === 1, JSON.stringify(r.structuredContent));
  const block = display.length ? r.content[display[0].content_index] : undefined;
  check("plot: the PNG moved out of its bundle", display.length === 1 && !("image/png" in display[0].data), JSON.stringify(display));
  check("plot: an image/png block", block?.type === "image" && block?.mimeType === "image/png" && block.data.length > 100);
  check("plot: the block is a PNG", block !== undefined && Buffer.from(block.data, "base64").subarray(1, 4).toString() === "PNG");
});

await step("error", async () => {
  const r = await client.callTool({ name: "execute_python", arguments: { code: "1/0" } }, undefined, long);
  check("1/0: isError with ZeroDivisionError", r.isError === true && r.structuredContent?.error?.ename === "ZeroDivisionError", textOf(r));
});

async function createSession() {
  const created = await client.callTool({ name: "create_session", arguments: {} }, undefined, long);
  return created.structuredContent?.session_id;
}
const inSession = (id, code, options = long) =>
  client.callTool({ name: "execute_python", arguments: { code, session_id: id, timeout_seconds: 60 } }, undefined, options);

await step("session", async () => {
  const id = await createSession();
  check("session: created", typeof id === "string", String(id));
  await inSession(id, "x = 41");
  const r = await inSession(id, "x + 1");
  check("session: x + 1 is 42, state preserved", r.structuredContent?.result?.data?.["text/plain"] === "42" && r.structuredContent?.session?.state === "preserved", textOf(r));
  const closed = await client.callTool({ name: "close_session", arguments: { session_id: id } }, undefined, long);
  check("session: closed", closed.isError === false);
  const gone = await inSession(id, "1");
  check("session: closed session is a session-not-found refusal", gone.isError === true && textOf(gone).startsWith("[execbox] refused (session-not-found): "), textOf(gone));
});

// Sessions belong to the key: another key's own MCP session cannot use this one's.
await step("another key", async () => {
  if (!otherToken) return;
  const id = await createSession();
  await inSession(id, "secret = 'alpha-' + 'only'");
  const other = new Client({ name: "execbox-http-test-b", version: "1.0.0" });
  const otherTransport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: auth(otherToken) } });
  await other.connect(otherTransport);
  const r = await other.callTool({ name: "execute_python", arguments: { code: "print(secret)", session_id: id } }, undefined, long);
  check("another key: session-not-found, no secret", r.isError === true && r.structuredContent?.type === "urn:execbox:problem:session-not-found" &&
    textOf(r).startsWith("[execbox] refused (session-not-found): ") && !JSON.stringify(r).includes("alpha-only"), JSON.stringify(r));
  const closed = await other.callTool({ name: "close_session", arguments: { session_id: id } }, undefined, long);
  check("another key: cannot close it", closed.isError === true && textOf(closed).startsWith("[execbox] refused (session-not-found): "), textOf(closed));
  await otherTransport.terminateSession();
  await other.close();
  const mine = await inSession(id, "print(secret)");
  check("another key: still there for its owner", mine.structuredContent?.stdout === "alpha-only\n", textOf(mine));
  await client.callTool({ name: "close_session", arguments: { session_id: id } }, undefined, long);
});

// A session's processes, then: another key cannot reach them at all.
const processSessions = await processSteps(client, { check, step, textOf, long });
await step("processes: another key", async () => {
  if (!otherToken) return;
  const other = new Client({ name: "execbox-http-test-b", version: "1.0.0" });
  const otherTransport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: auth(otherToken) } });
  await other.connect(otherTransport);
  const listed = await other.callTool({ name: "list_processes", arguments: { session_id: processSessions.id } }, undefined, long);
  check("processes: another key's list is session-not-found", listed.isError === true &&
    textOf(listed).startsWith("[execbox] refused (session-not-found): "), textOf(listed));
  const started = await other.callTool({ name: "start_process", arguments: { session_id: processSessions.id, command: "true" } }, undefined, long);
  check("processes: nor can it start one there", started.isError === true &&
    textOf(started).startsWith("[execbox] refused (session-not-found): "), textOf(started));
  await otherTransport.terminateSession();
  await other.close();
  for (const id of [processSessions.id, processSessions.other])
    if (id) await client.callTool({ name: "close_session", arguments: { session_id: id } }, undefined, long);
});

await step("progress", async () => {
  const notes = [];
  const r = await client.callTool({ name: "execute_python", arguments: { code: "import time\ntime.sleep(3)\nprint('done')" } },
    undefined, { timeout: 120000, onprogress: (p) => notes.push(p) });
  check("progress: two or more notifications on the call's stream", notes.length >= 2, JSON.stringify(notes));
  check("progress: increasing", notes.every((n, i) => i === 0 || n.progress > notes[i - 1].progress), JSON.stringify(notes));
  check("progress: call completes", textOf(r).includes("done"), textOf(r));
});

// A cancelled execution must be killed, not left running: in an execbox session the next
// execution waits for the previous one, so a prompt reply, saying the state was lost, proves it.
await step("cancel (AbortSignal)", async () => {
  const id = await createSession();
  await inSession(id, "x = 1");
  const controller = new AbortController();
  const started = Date.now();
  const call = inSession(id, "while True: pass", { signal: controller.signal, timeout: 120000 });
  setTimeout(() => controller.abort("test cancels"), 1500);
  let rejected = false;
  try { await call; } catch { rejected = true; }
  check("cancel: call rejected quickly", rejected && Date.now() - started < 5000, `${Date.now() - started} ms`);
  const t0 = Date.now();
  const r = await inSession(id, "print('after')", { timeout: 30000 });
  check("cancel: the run was killed (next call in the session prompt, state lost)",
    Date.now() - t0 < 15000 && textOf(r).includes("after") && r.structuredContent?.session?.state === "lost",
    `${Date.now() - t0} ms ${JSON.stringify(r.structuredContent?.session)}`);
  // The SDK posts notifications/cancelled without waiting for it; by now it has been answered.
  check("cancel: notifications/cancelled accepted (202)", lastExchange("notifications/cancelled")?.status === 202, JSON.stringify(lastExchange("notifications/cancelled")));
  await client.callTool({ name: "close_session", arguments: { session_id: id } }, undefined, long);
});

// The client goes away without notifications/cancelled: nobody can receive the result (there is
// no resumption), so the run is killed too.
await step("client gone", async () => {
  const id = await createSession();
  await inSession(id, "x = 1");
  const controller = new AbortController();
  const response = await fetch(url, {
    method: "POST",
    headers: { ...auth(), "Content-Type": "application/json", Accept: "application/json, text/event-stream",
               "Mcp-Session-Id": sessionId, "MCP-Protocol-Version": "2025-11-25" },
    body: JSON.stringify({ jsonrpc: "2.0", id: "gone-1", method: "tools/call",
                           params: { name: "execute_python", arguments: { code: "while True: pass", session_id: id, timeout_seconds: 60 } } }),
    signal: controller.signal,
  });
  check("client gone: stream opened", response.status === 200 && (response.headers.get("content-type") ?? "").startsWith("text/event-stream"));
  await new Promise((resolve) => setTimeout(resolve, 1500));
  controller.abort();
  const t0 = Date.now();
  const r = await inSession(id, "print('after')", { timeout: 30000 });
  check("client gone: the run was killed (next call prompt, state lost)",
    Date.now() - t0 < 15000 && r.structuredContent?.session?.state === "lost",
    `${Date.now() - t0} ms ${JSON.stringify(r.structuredContent?.session)}`);
  await client.callTool({ name: "close_session", arguments: { session_id: id } }, undefined, long);
});

await step("plain HTTP", async () => {
  const session = { "Mcp-Session-Id": sessionId, "MCP-Protocol-Version": "2025-11-25" };
  let r = await post(ping(), { ...session, Origin: "http://evil.example.com" });
  const problem = await r.json().catch(() => null);
  check("bad Origin: 403 problem+json", r.status === 403 && (r.headers.get("content-type") ?? "").startsWith("application/problem+json") && problem?.status === 403 &&
    problem?.type === "urn:execbox:problem:forbidden-origin",
    `${r.status} ${r.headers.get("content-type")} ${JSON.stringify(problem)}`);
  r = await post(ping(), { ...session, Origin: "http://localhost:5173" });
  check("loopback Origin: allowed", r.status === 200, String(r.status));
  r = await post(ping(), { ...session, Origin: "http://localhost.evil.example.com" });
  check("localhost.evil.example.com: 403", r.status === 403, String(r.status));

  const noAuth = { "Content-Type": "application/json", Accept: "application/json, text/event-stream", ...session };
  r = await fetch(url, { method: "POST", headers: noAuth, body: JSON.stringify(ping()) });
  check("missing bearer: 401 with the bare challenge", r.status === 401 && r.headers.get("www-authenticate") === 'Bearer realm="execbox"',
    `${r.status} ${r.headers.get("www-authenticate")}`);
  for (const authorization of ["Basic x", "Bearer a b", "Bearer unknown-token-0123456789abcdef"]) {
    r = await fetch(url, { method: "POST", headers: { ...noAuth, Authorization: authorization }, body: JSON.stringify(ping()) });
    const problem = await r.json().catch(() => null);
    check(`${authorization}: 401 invalid_token`, r.status === 401 && problem?.type === "urn:execbox:problem:unauthorized" &&
      (r.headers.get("www-authenticate") ?? "").startsWith('Bearer realm="execbox", error="invalid_token", error_description="'),
      `${r.status} ${r.headers.get("www-authenticate")} ${JSON.stringify(problem)}`);
  }

  r = await post(ping());
  check("missing Mcp-Session-Id: 400 problem+json", r.status === 400 && (r.headers.get("content-type") ?? "").startsWith("application/problem+json"), String(r.status));
  r = await post(ping(), { "Mcp-Session-Id": "no-such-session" });
  check("unknown Mcp-Session-Id: 404", r.status === 404, String(r.status));
  if (otherToken) {
    r = await post(ping(), { ...session, ...auth(otherToken) });
    check("another key's MCP session: 404", r.status === 404, String(r.status));
  }
  r = await post(ping(), { ...session, "MCP-Protocol-Version": "1999-01-01" });
  check("unsupported MCP-Protocol-Version: 400", r.status === 400, String(r.status));
  r = await post(ping(), { ...session, Accept: "application/json" });
  check("Accept without text/event-stream: 400", r.status === 400, String(r.status));
  r = await post(ping(), { ...session, "Content-Type": "text/plain" });
  check("Content-Type not JSON: 415", r.status === 415, String(r.status));
  r = await post("[" + JSON.stringify(ping()) + "]", session);
  let body = await r.json().catch(() => null);
  check("batch: 400 with a JSON-RPC error", r.status === 400 && body?.error?.code === -32600, `${r.status} ${JSON.stringify(body)}`);
  r = await post("{not json", session);
  body = await r.json().catch(() => null);
  check("bad JSON: 400 with -32700", r.status === 400 && body?.error?.code === -32700, `${r.status} ${JSON.stringify(body)}`);
  r = await post({ jsonrpc: 2, id: 902, method: "ping" }, session);
  body = await r.json().catch(() => null);
  check("jsonrpc not \"2.0\": 400 with -32600", r.status === 400 && body?.error?.code === -32600, `${r.status} ${JSON.stringify(body)}`);
  r = await post({ jsonrpc: "2.0", id: { no: 1 }, method: "ping" }, session);
  check("id neither string nor integer: 400", r.status === 400, String(r.status));
  r = await post({ jsonrpc: "2.0", method: "notifications/whatever" }, session);
  check("notification: 202, no body", r.status === 202 && (await r.text()) === "", String(r.status));
  r = await post(ping(901), session);
  body = await r.json().catch(() => null);
  check("ping: 200 JSON", r.status === 200 && body?.id === 901 && JSON.stringify(body.result) === "{}", JSON.stringify(body));
  r = await fetch(url, { headers: { ...auth(), Accept: "text/event-stream", ...session } });
  check("GET: 405 with Allow: POST, DELETE", r.status === 405 && /POST/.test(r.headers.get("allow") ?? "") && /DELETE/.test(r.headers.get("allow") ?? ""),
    `${r.status} ${r.headers.get("allow")}`);
});

await step("DELETE", async () => {
  await transport.terminateSession();
  check("DELETE: 204", exchanges.at(-1)?.method === "DELETE" && exchanges.at(-1)?.status === 204, JSON.stringify(exchanges.at(-1)));
  const r = await post(ping(), { "Mcp-Session-Id": sessionId });
  check("after DELETE: 404", r.status === 404, String(r.status));
  await client.close();
});

// A second client starts its own MCP session.
await step("second session", async () => {
  const second = connect();
  await second.client.connect(second.transport);
  check("second session: new id", second.transport.sessionId && second.transport.sessionId !== sessionId);
  const r = await second.client.callTool({ name: "execute_python", arguments: { code: "print('again')" } }, undefined, long);
  check("second session: executes", textOf(r).includes("again"));
  await second.transport.terminateSession();
  await second.client.close();
});

console.log(`${passed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
