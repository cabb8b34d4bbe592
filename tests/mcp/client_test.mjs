// The official MCP TypeScript SDK client against `execbox mcp` over stdio: if the SDK accepts
// our replies (it validates them with its own schemas), other clients should too.
//   node client_test.mjs EXECBOX [--server never|always]
// With EXECBOX_SOCKET set, `execbox mcp` is given it: --server always then serves through that
// local server's /mcp, and the executions must have run on its warm pool.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport, getDefaultEnvironment } from "@modelcontextprotocol/sdk/client/stdio.js";
import { processSteps, processTools } from "./process_steps.mjs";

const execbox = process.argv[2];
const mcpArgs = ["mcp", ...process.argv.slice(3)];
const throughServer = mcpArgs.includes("always");
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

const env = getDefaultEnvironment();
if (process.env.EXECBOX_SOCKET) env.EXECBOX_SOCKET = process.env.EXECBOX_SOCKET;
const transport = new StdioClientTransport({ command: execbox, args: mcpArgs, env, stderr: "inherit" });
const client = new Client({ name: "execbox-test", version: "1.0.0" });
// The client hands the negotiated revision to transports that want it (HTTP does); catch it here.
let negotiated;
transport.setProtocolVersion = (version) => { negotiated = version; };
const long = { timeout: 120000 };

await step("initialize", async () => {
  await client.connect(transport);
  check("negotiates 2025-11-25", negotiated === "2025-11-25", String(negotiated));
  check("server name", client.getServerVersion()?.name === "execbox");
  check("tools capability", client.getServerCapabilities()?.tools !== undefined);
});

await step("ping", async () => {
  check("ping answers", (await client.ping()) !== undefined);
});

await step("tools/list", async () => {
  const { tools } = await client.listTools();
  const names = tools.map((t) => t.name).sort();
  check("the session and process tools", JSON.stringify(names) ===
    JSON.stringify(["check_python", "close_session", "create_session", "execute_python", "fork_session", "pause_session", "resume_session", ...processTools].sort()), JSON.stringify(names));
  check("schemas", tools.every((t) => t.inputSchema?.type === "object" && t.outputSchema?.type === "object"));
  const exec = tools.find((t) => t.name === "execute_python")?.inputSchema;
  const limits = ["timeout_seconds", "cpu_seconds", "memory_mb", "max_processes", "output_bytes", "disk_mb"];
  check("execute_python: code, session_id, network, guard and the six limits, flat",
    JSON.stringify(Object.keys(exec?.properties ?? {}).sort()) === JSON.stringify([...limits, "code", "session_id", "network", "guard"].sort()),
    JSON.stringify(exec?.properties));
  check("execute_python: the built-in defaults and maxima",
    exec?.properties?.memory_mb?.default === 256 && exec?.properties?.memory_mb?.maximum === 4096 &&
    exec?.properties?.timeout_seconds?.default === 30 && exec?.properties?.timeout_seconds?.maximum === 300 &&
    exec?.properties?.memory_mb?.minimum === 16, JSON.stringify(exec?.properties));
  const create = tools.find((t) => t.name === "create_session")?.inputSchema;
  check("create_session: the same limits, and network", JSON.stringify(Object.keys(create?.properties ?? {}).sort()) === JSON.stringify([...limits, "network"].sort()),
    JSON.stringify(create?.properties));
});

await step("print", async () => {
  const r = await client.callTool({ name: "execute_python", arguments: { code: "print(6*7)" } }, undefined, long);
  check("print: text has 42", textOf(r).includes("42"), textOf(r));
  check("print: isError false", r.isError === false);
  check("print: status ok", r.structuredContent?.status === "ok", JSON.stringify(r.structuredContent));
  check("print: structuredContent is the Result", r.structuredContent?.stdout === "42\n" && r.structuredContent?.exit_code === 0 &&
    r.structuredContent?.error === null && r.structuredContent?.result === null && Array.isArray(r.structuredContent?.display) &&
    r.structuredContent?.limits?.memory_mb?.value === 256 && r.structuredContent?.limits?.timeout_seconds?.value === 30,
    JSON.stringify(r.structuredContent));
  if (throughServer) check("print: on the local server's warm pool", r.structuredContent?.usage?.engine === "warm",
    JSON.stringify(r.structuredContent?.usage));
});

await step("guard", async () => {
  const r = await client.callTool({ name: "execute_python", arguments: { code: "import os\nos.system('id')", guard: "audit" } },
    undefined, long);
  check("guard: the code's PermissionError, listed", r.isError === true && r.structuredContent?.error?.ename === "PermissionError" &&
    r.structuredContent?.guard?.refused?.[0]?.event === "os.system", JSON.stringify(r.structuredContent));
});

await step("check_python", async () => {
  const code = "import os\nimport subprocess\nsubprocess.call('ls', shell=True)\nprint(nowhere)\n";
  const r = await client.callTool({ name: "check_python", arguments: { code, analyzers: ["pyflakes", "bandit"] } }, undefined, long);
  const found = (r.structuredContent?.findings ?? []).map((f) => `${f.tool} ${f.code}`);
  check("check_python: pyflakes F821 and F401, bandit B602", ["pyflakes F821", "pyflakes F401", "bandit B602"].every((f) => found.includes(f)),
    JSON.stringify(r.structuredContent));
  check("check_python: the text names them", textOf(r).includes("F821") && r.structuredContent?.status === "ok", textOf(r));
  const blocked = await client.callTool({ name: "check_python", arguments: { code, lint: { block: ["B602"] } } }, undefined, long);
  check("check_python: lint.block refuses", blocked.isError === true && blocked.structuredContent?.status === "policy_violation" &&
    /lint\.block/.test(blocked.structuredContent?.error?.evalue ?? ""), JSON.stringify(blocked.structuredContent));
  const bad = await client.callTool({ name: "check_python", arguments: { code, analyzers: ["pylint"] } }, undefined, long);
  check("check_python: an unknown analyzer is a refusal naming it", bad.isError === true && textOf(bad).includes("pylint"), textOf(bad));
});

await step("plot", async () => {
  const code = "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.show()";
  const r = await client.callTool({ name: "execute_python", arguments: { code } }, undefined, long);
  const display = r.structuredContent?.display ?? [];
  check("plot: one displayed output", display.length === 1, JSON.stringify(r.structuredContent));
  const block = display.length ? r.content[display[0].content_index] : undefined;
  check("plot: content_index points at an image/png block", block?.type === "image" && block?.mimeType === "image/png" && block.data.length > 100);
  check("plot: the PNG moved out of the bundle", display.length === 1 && !("image/png" in display[0].data) && typeof display[0].data["text/plain"] === "string",
    JSON.stringify(display));
  check("plot: the text names the figure", /\[figure \d+x\d+ PNG, [0-9.]+ KiB\]/.test(textOf(r)), textOf(r));
});

await step("error", async () => {
  const r = await client.callTool({ name: "execute_python", arguments: { code: "1/0" } }, undefined, long);
  check("1/0: isError", r.isError === true);
  check("1/0: ZeroDivisionError", textOf(r).includes("ZeroDivisionError") && r.structuredContent?.error?.ename === "ZeroDivisionError", textOf(r));
});

await step("session", async () => {
  const created = await client.callTool({ name: "create_session", arguments: {} }, undefined, long);
  const id = created.structuredContent?.session_id;
  check("session: created", typeof id === "string" && created.isError === false, JSON.stringify(created));
  await client.callTool({ name: "execute_python", arguments: { code: "x = 41", session_id: id } }, undefined, long);
  const r = await client.callTool({ name: "execute_python", arguments: { code: "x + 1", session_id: id } }, undefined, long);
  check("session: x + 1 is 42", textOf(r).includes("42") && r.structuredContent?.result?.data?.["text/plain"] === "42", textOf(r));
  check("session: state preserved", r.structuredContent?.session?.state === "preserved" && r.structuredContent?.session?.id === id);
  // fork_session: a new session with a copy of the state, independent from then on.
  await client.callTool({ name: "execute_python", arguments: { code: "g = (i for i in range(2))", session_id: id } }, undefined, long);
  const forked = await client.callTool({ name: "fork_session", arguments: { session_id: id } }, undefined, long);
  const copy = forked.structuredContent?.session_id;
  check("session: forked", forked.isError === false && typeof copy === "string" && copy !== id, JSON.stringify(forked));
  check("session: the generator was not copied", forked.structuredContent?.not_copied?.length === 1 &&
    forked.structuredContent.not_copied[0].name === "g" && forked.structuredContent.not_copied[0].type === "generator", JSON.stringify(forked));
  const inCopy = await client.callTool({ name: "execute_python", arguments: { code: "x = x * 2\nx", session_id: copy } }, undefined, long);
  check("session: the copy has x", inCopy.structuredContent?.result?.data?.["text/plain"] === "82", textOf(inCopy));
  const inOriginal = await client.callTool({ name: "execute_python", arguments: { code: "x", session_id: id } }, undefined, long);
  check("session: the original's x is its own", inOriginal.structuredContent?.result?.data?.["text/plain"] === "41", textOf(inOriginal));
  await client.callTool({ name: "close_session", arguments: { session_id: copy } }, undefined, long);
  // pause_session keeps the state and ends the process; the next execution restores it.
  const paused = await client.callTool({ name: "pause_session", arguments: { session_id: id } }, undefined, long);
  check("session: paused", paused.isError === false && paused.structuredContent?.paused === true &&
    paused.structuredContent?.changed === true, JSON.stringify(paused));
  const again = await client.callTool({ name: "pause_session", arguments: { session_id: id } }, undefined, long);
  check("session: paused already", again.structuredContent?.changed === false, JSON.stringify(again));
  const back = await client.callTool({ name: "execute_python", arguments: { code: "x", session_id: id } }, undefined, long);
  check("session: restored with x", back.structuredContent?.result?.data?.["text/plain"] === "41" &&
    back.structuredContent?.session?.state === "restored", textOf(back));
  const resumed = await client.callTool({ name: "resume_session", arguments: { session_id: id } }, undefined, long);
  check("session: running already", resumed.isError === false && resumed.structuredContent?.paused === false &&
    resumed.structuredContent?.changed === false, JSON.stringify(resumed));
  const closed = await client.callTool({ name: "close_session", arguments: { session_id: id } }, undefined, long);
  check("session: closed", closed.isError === false && closed.structuredContent?.session_id === id, JSON.stringify(closed));
  const gone = await client.callTool({ name: "execute_python", arguments: { code: "1", session_id: id } }, undefined, long);
  check("session: closed session is a session-not-found refusal", gone.isError === true && gone.structuredContent?.type === "urn:execbox:problem:session-not-found" &&
    textOf(gone).startsWith("[execbox] refused (session-not-found): "), textOf(gone));
});

// A session's processes; the sessions are closed with the MCP session (at the end of input).
await processSteps(client, { check, step, textOf, long });

await step("refusals", async () => {
  const above = await client.callTool({ name: "execute_python", arguments: { code: "print('ran')", memory_mb: 5000 } }, undefined, long);
  check("memory_mb above the maximum: refused naming it", above.isError === true && above.structuredContent?.type === "urn:execbox:problem:limit-exceeded" &&
    above.structuredContent?.status === 422 && above.structuredContent?.limit === "memory_mb" &&
    textOf(above).startsWith("[execbox] refused (limit-exceeded): ") && textOf(above).includes("memory_mb") && !textOf(above).includes("ran"), textOf(above));
  const wrong = await client.callTool({ name: "execute_python", arguments: { code: "1", timeout_seconds: "5" } }, undefined, long);
  check("a limit of the wrong type: wrong-type", wrong.isError === true && textOf(wrong).startsWith("[execbox] refused (wrong-type): "), textOf(wrong));
  const missing = await client.callTool({ name: "execute_python", arguments: {} }, undefined, long);
  check("no code: invalid-arguments", missing.isError === true && textOf(missing).startsWith("[execbox] refused (invalid-arguments): "), textOf(missing));
  const unknown = await client.callTool({ name: "execute_python", arguments: { code: "1", session_id: "no-such-session" } }, undefined, long);
  check("unknown session: session-not-found", unknown.isError === true && textOf(unknown).startsWith("[execbox] refused (session-not-found): "), textOf(unknown));
});

await step("cancel", async () => {
  const controller = new AbortController();
  const started = Date.now();
  const call = client.callTool({ name: "execute_python", arguments: { code: "while True: pass", timeout_seconds: 60 } },
    undefined, { signal: controller.signal, timeout: 120000 });
  setTimeout(() => controller.abort("test cancels"), 1000);
  let rejected = false;
  try { await call; } catch { rejected = true; }
  check("cancel: call rejected quickly", rejected && Date.now() - started < 5000, `${Date.now() - started} ms`);
  const t0 = Date.now();
  await client.ping();
  check("cancel: ping still answers", Date.now() - t0 < 5000);
  // The server must have killed it: a new execution gets through promptly.
  const r = await client.callTool({ name: "execute_python", arguments: { code: "print('after')" } }, undefined, long);
  check("cancel: server keeps executing", textOf(r).includes("after"));
});

await step("progress", async () => {
  let notes = 0;
  const r = await client.callTool({ name: "execute_python", arguments: { code: "import time\ntime.sleep(2.5)\nprint('done')" } },
    undefined, { timeout: 120000, onprogress: () => { notes++; } });
  check("progress: at least one notification", notes >= 1, `${notes}`);
  check("progress: call completes", textOf(r).includes("done"));
});

await client.close();
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
