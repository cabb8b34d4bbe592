// The MCP process tools (start_process, list_processes, read_process_output, send_process_input,
// signal_process) through the official SDK client, for both transports: client_test.mjs (stdio,
// in-process or through a local server) and http_client_test.mjs (/mcp) run these steps.
export const processTools = ["list_processes", "read_process_output", "send_process_input", "signal_process", "start_process"];

// `t`: the calling test's { check, step, textOf, long }.
export async function processSteps(client, t) {
  const { check, step, textOf, long } = t;
  const call = (name, args) => client.callTool({ name, arguments: args }, undefined, long);
  // A refusal: isError, its text, and as structuredContent the problem HTTP would send.
  const refused = (r, type) => r.isError === true && r.structuredContent?.type === `urn:execbox:problem:${type}` &&
    typeof r.structuredContent?.status === "number" &&
    textOf(r).startsWith(`[execbox] refused (${type}): `);
  let id, other;

  await step("processes: tools/list", async () => {
    const { tools } = await client.listTools();
    const start = tools.find((x) => x.name === "start_process")?.inputSchema;
    check("processes: start_process's arguments are the request schema's",
      JSON.stringify(Object.keys(start?.properties ?? {}).sort()) ===
        JSON.stringify(["argv", "cols", "command", "cwd", "env", "pty", "rows", "session_id", "stdin", "tag", "wait_seconds"]) &&
      JSON.stringify(start?.required) === JSON.stringify(["session_id"]) && start?.properties?.wait_seconds?.maximum === 30,
      JSON.stringify(start));
    const read = tools.find((x) => x.name === "read_process_output")?.inputSchema;
    check("processes: read_process_output needs session_id and pid",
      JSON.stringify(read?.required) === JSON.stringify(["session_id", "pid"]) && read?.properties?.max_bytes?.default === 32768,
      JSON.stringify(read));
    const signal = tools.find((x) => x.name === "signal_process")?.inputSchema;
    check("processes: signal_process's signal defaults to SIGTERM", signal?.properties?.signal?.default === "SIGTERM",
      JSON.stringify(signal));
  });

  await step("processes: a signalled sleep", async () => {
    id = (await call("create_session", {})).structuredContent?.session_id;
    check("processes: session created", typeof id === "string", String(id));
    const started = await call("start_process", { session_id: id, command: "sleep 30", tag: "sleeper" });
    const pid = started.structuredContent?.pid;
    check("processes: sleep started", started.isError === false && Number.isInteger(pid) && started.structuredContent?.running === true &&
      started.structuredContent?.tag === "sleeper", JSON.stringify(started));
    const signalled = await call("signal_process", { session_id: id, pid });
    check("processes: signal_process sends SIGTERM", signalled.isError === false && signalled.structuredContent?.sent_signal === 15,
      JSON.stringify(signalled));
    const listed = await call("list_processes", { session_id: id });
    const entry = listed.structuredContent?.processes?.find((p) => p.pid === pid);
    check("processes: listed as ended by signal 15", entry?.running === false && entry?.signal === 15 && entry?.ended_by === "signal" &&
      entry?.exit_code === null && entry?.command === "sleep 30", JSON.stringify(listed.structuredContent));
    const read = await call("read_process_output", { session_id: id, pid, wait_seconds: 5 });
    check("processes: its output says it ended by SIGTERM", read.isError === false && read.structuredContent?.running === false &&
      read.structuredContent?.signal === 15 && read.structuredContent?.more === false && textOf(read).includes("signal 15 (SIGTERM)"),
      JSON.stringify(read));
  });

  await step("processes: cat fed on stdin", async () => {
    const started = await call("start_process", { session_id: id, argv: ["cat"], stdin: true });
    const pid = started.structuredContent?.pid;
    check("processes: cat started with stdin", started.structuredContent?.stdin_open === true, JSON.stringify(started));
    const sent = await call("send_process_input", { session_id: id, pid, input: "hello from stdin\n", close_stdin: true });
    check("processes: input written, stdin closed", sent.isError === false && sent.structuredContent?.written === 17 &&
      sent.structuredContent?.stdin_open === false, JSON.stringify(sent));
    const read = await call("read_process_output", { session_id: id, pid, wait_seconds: 10 });
    const out = read.structuredContent;
    check("processes: cat echoed it and exited 0", out?.stdout === "hello from stdin\n" && out?.stderr === "" && out?.exit_code === 0 &&
      out?.running === false && out?.more === false && out?.next_offset === 17, JSON.stringify(read));
    const again = await call("send_process_input", { session_id: id, pid, input: "late\n" });
    check("processes: input after the end is refused", again.isError === true && textOf(again).startsWith("[execbox] refused ("), textOf(again));
  });

  await step("processes: bash on a pty", async () => {
    const started = await call("start_process", { session_id: id, argv: ["bash", "--norc", "-i"], pty: true, rows: 30, cols: 100 });
    const pid = started.structuredContent?.pid;
    check("processes: bash started on a pty", started.isError === false && started.structuredContent?.pty === true &&
      started.structuredContent?.size?.rows === 30, JSON.stringify(started));
    const sent = await call("send_process_input", { session_id: id, pid, input: "stty size; echo pty-$((6*7))\n" });
    check("processes: typed into the pty", sent.isError === false, JSON.stringify(sent));
    let seen = "";
    for (let offset = 0, i = 0; i < 100 && !(seen.includes("pty-42") && seen.includes("30 100")); ++i) {
      const read = await call("read_process_output", { session_id: id, pid, offset });
      seen += read.structuredContent?.stdout ?? "";
      offset = read.structuredContent?.next_offset ?? offset;
      await new Promise((r) => setTimeout(r, 100));
    }
    check("processes: the terminal echoed and ran it at its size", seen.includes("pty-42") && seen.includes("30 100"), JSON.stringify(seen));
    const killed = await call("signal_process", { session_id: id, pid, signal: "KILL" });
    check("processes: the pty's bash killed", killed.structuredContent?.running === false, JSON.stringify(killed));
  });

  await step("processes: waiting for output", async () => {
    const started = await call("start_process", { session_id: id, command: "echo first; sleep 1; echo second >&2; echo third" });
    const pid = started.structuredContent?.pid;
    const t0 = Date.now();
    const read = await call("read_process_output", { session_id: id, pid, wait_seconds: 20 });
    const out = read.structuredContent;
    check("processes: read_process_output waited for the end", out?.stdout === "first\nthird\n" && out?.stderr === "second\n" &&
      out?.exit_code === 0 && out?.running === false && Date.now() - t0 < 15000, JSON.stringify(read));
    check("processes: the text has stdout, stderr and how it ended", textOf(read).includes("first\nthird\n--- stderr ---\nsecond\n") &&
      textOf(read).includes("exited with code 0"), textOf(read));
    const rest = await call("read_process_output", { session_id: id, pid, offset: out?.next_offset });
    check("processes: nothing more from next_offset", rest.structuredContent?.stdout === "" && rest.structuredContent?.more === false,
      JSON.stringify(rest));
    const waited = await call("start_process", { session_id: id, command: "echo waited; exit 3", wait_seconds: 10 });
    check("processes: start_process with wait_seconds returns the output and the exit", waited.structuredContent?.stdout === "waited\n" &&
      waited.structuredContent?.exit_code === 3 && waited.structuredContent?.running === false, JSON.stringify(waited));
  });

  await step("processes: refusals", async () => {
    const wrong = await call("read_process_output", { session_id: id, pid: 99999 });
    check("processes: a wrong pid is process-not-found", refused(wrong, "process-not-found") && textOf(wrong).includes("99999"), textOf(wrong));
    const signal = await call("signal_process", { session_id: id, pid: 99999, signal: "KILL" });
    check("processes: signalling a wrong pid is process-not-found", refused(signal, "process-not-found"), textOf(signal));
    const both = await call("start_process", { session_id: id, command: "true", argv: ["true"] });
    check("processes: command and argv: invalid-arguments", refused(both, "invalid-arguments"), textOf(both));
    const type = await call("read_process_output", { session_id: id, pid: "1" });
    check("processes: a pid of the wrong type: invalid-arguments", refused(type, "invalid-arguments") && textOf(type).includes("'pid'"), textOf(type));
    const bogus = await call("signal_process", { session_id: id, pid: 1, signal: "BOGUS" });
    check("processes: an unknown signal: invalid-arguments", refused(bogus, "invalid-arguments"), textOf(bogus));
    const unknown = await call("list_processes", { session_id: "no-such-session" });
    check("processes: an unknown session: session-not-found", refused(unknown, "session-not-found"), textOf(unknown));
  });

  await step("processes: another session's are not visible", async () => {
    const started = await call("start_process", { session_id: id, command: "sleep 30" });
    const pid = started.structuredContent?.pid;
    other = (await call("create_session", {})).structuredContent?.session_id;
    const listed = await call("list_processes", { session_id: other });
    check("processes: the other session lists none", listed.isError === false && listed.structuredContent?.processes?.length === 0,
      JSON.stringify(listed.structuredContent));
    const read = await call("read_process_output", { session_id: other, pid });
    check("processes: the first session's pid is not found in the other", refused(read, "process-not-found"), textOf(read));
    const signal = await call("signal_process", { session_id: other, pid, signal: 9 });
    check("processes: nor signalled there", refused(signal, "process-not-found"), textOf(signal));
    const still = await call("list_processes", { session_id: id });
    check("processes: it still runs in its own session", still.structuredContent?.processes?.find((p) => p.pid === pid)?.running === true,
      JSON.stringify(still.structuredContent));
    // A wait for it, cancelled: the call stops waiting at once (its thread is not held 30 s).
    const controller = new AbortController();
    const t0 = Date.now();
    const waiting = client.callTool({ name: "read_process_output", arguments: { session_id: id, pid, wait_seconds: 30 } },
      undefined, { signal: controller.signal, timeout: 60000 });
    setTimeout(() => controller.abort("test cancels"), 1000);
    let rejected = false;
    try { await waiting; } catch { rejected = true; }
    check("processes: a cancelled wait is rejected at once", rejected && Date.now() - t0 < 5000, `${Date.now() - t0} ms`);
    const killed = await call("signal_process", { session_id: id, pid, signal: "KILL" });
    check("processes: then SIGKILL ends it", killed.structuredContent?.running === false && killed.structuredContent?.signal === 9,
      JSON.stringify(killed.structuredContent));
  });
  return { id, other };
}
