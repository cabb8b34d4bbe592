"""Caps per key ([[keys]] max_sessions, max_queued, max_processes, max_session_state_mb;
docs/api.md "Configuration"): the request past a key's cap gets 429 with a problem naming the cap,
requests under it succeed, another key is not held back, and /metrics shows each key's use. Each
cap has a key of its own here, so that the cases do not meet. The same refusal over MCP carries
the problem as structuredContent. The server runs one execution at a time (--max-running 1), so
that a key's second execution queues."""
import threading
import unittest

from harness import KEY_A, KEY_B, ApiTestCase, McpClient, Server, sha256_hex, tool_text, wait_until

TOKENS = {name: f"caps-{name}-0123456789abcdef" for name in ("sessions", "procs", "queue", "state")}
CAPS = {"sessions": "max_sessions = 2", "procs": "max_processes = 2", "queue": "max_queued = 1",
        "state": "max_session_state_mb = 1"}
CONFIG = "".join(f'[[keys]]\nid = "{name}"\nsha256 = "{sha256_hex(TOKENS[name])}"\n{CAPS[name]}\n\n'
                 for name in TOKENS)


class KeyCapsTest(ApiTestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Server(name="caps", config=CONFIG, flags=["--max-running", "1"]).start()

    @classmethod
    def tearDownClass(cls):
        code = cls.server.stop()
        if code != 0:
            raise AssertionError(f"exit status {code}; stderr:\n{cls.server.stderr_text()[-4000:]}")

    def session(self, token, status=201, **body):
        r = self.server.request("POST", "/v1/sessions", body, token=token)
        if status != 201:
            return r
        self.assertEqual(r.status, 201, repr(r))
        sid = r.json()["id"]
        self.addCleanup(self.server.request, "DELETE", f"/v1/sessions/{sid}", token=token)
        return sid

    def assertOverCap(self, r, type_slug, cap, key, limit):
        body = self.assertProblem(r, 429, type_slug)
        self.assertEqual((body["cap"], body["key"], body["limit"]), (cap, key, limit), body)
        self.assertIn(cap, body["detail"])
        self.assertTrue(r.header("retry-after"), repr(r))
        return body

    def key_metric(self, name, key):
        return self.server.metrics().get(f'{name}{{key="{key}"}}', 0)

    def test_max_sessions(self):
        token = TOKENS["sessions"]
        first = self.session(token)
        self.session(token)
        self.assertEqual(self.key_metric("execbox_key_sessions", "sessions"), 2)
        body = self.assertOverCap(self.session(token, 429), "key-sessions", "max_sessions", "sessions", 2)
        self.assertEqual(body["in_use"], 2)
        # A fork would be a third session: refused the same way.
        self.assertOverCap(self.server.request("POST", f"/v1/sessions/{first}/fork", token=token),
                           "key-sessions", "max_sessions", "sessions", 2)
        # Another key is not held back.
        self.session(KEY_A)
        # Over MCP: a tool error whose structuredContent is the same problem.
        mcp = McpClient(self.server, token)
        mcp.initialize()
        self.addCleanup(mcp.delete)
        result = mcp.call("create_session", {})
        self.assertTrue(result.get("isError"), result)
        self.assertTrue(tool_text(result).startswith("[execbox] refused (key-sessions): "), result)
        problem = result["structuredContent"]
        self.assertEqual((problem["type"], problem["status"], problem["cap"], problem["limit"]),
                         ("urn:execbox:problem:key-sessions", 429, "max_sessions", 2), problem)
        # One closed: the key may open one again.
        self.assertEqual(self.server.request("DELETE", f"/v1/sessions/{first}", token=token).status, 204)
        self.session(token)

    def test_max_processes(self):
        token = TOKENS["procs"]
        sid = self.session(token)
        path = f"/v1/sessions/{sid}/processes"
        started = [self.server.request("POST", path, {"argv": ["sleep", "100"]}, token=token) for _ in range(2)]
        for r in started:
            self.assertEqual(r.status, 201, repr(r))
        self.assertEqual(self.key_metric("execbox_key_session_processes", "procs"), 2)
        # The cap is the key's, across its sessions: a second session's start is refused too.
        other = self.session(token)
        for s in (sid, other):
            self.assertOverCap(self.server.request("POST", f"/v1/sessions/{s}/processes", {"argv": ["true"]},
                                                   token=token),
                               "key-processes", "max_processes", "procs", 2)
        # One ended: room for one more.
        pid = started[0].json()["pid"]
        self.assertEqual(self.server.request("POST", f"{path}/{pid}/signal", {"signal": 9}, token=token).status, 204)
        self.assertTrue(wait_until(lambda: not self.server.request("GET", f"{path}/{pid}", token=token)
                                   .json()["running"], 30))
        r = self.server.request("POST", f"/v1/sessions/{other}/processes", {"argv": ["true"]}, token=token)
        self.assertEqual(r.status, 201, repr(r))

    def test_max_queued(self):
        token = TOKENS["queue"]
        results = {}

        def run(name, tok, code):
            results[name] = self.server.execute(code, token=tok)

        # A long one runs (the server runs one at a time) and the key's second one queues.
        running = threading.Thread(target=run, args=("running", token, "import time\ntime.sleep(4)\nprint('a')"))
        running.start()
        self.assertTrue(wait_until(lambda: self.key_metric("execbox_key_running_executions", "queue") == 1, 60))
        queued = threading.Thread(target=run, args=("queued", token, "print('b')"))
        queued.start()
        self.assertTrue(wait_until(lambda: self.key_metric("execbox_key_queued_executions", "queue") == 1, 60))
        # Its third is past max_queued = 1; another key still queues, and runs.
        self.assertOverCap(self.server.execute("print('c')", token=token), "key-queue", "max_queued", "queue", 1)
        other = threading.Thread(target=run, args=("other", KEY_A, "print('d')"))
        other.start()
        for t in (running, queued, other):
            t.join(120)
        for name, out in (("running", "a\n"), ("queued", "b\n"), ("other", "d\n")):
            self.assertResult(results[name], "ok")
            self.assertEqual(results[name].json()["stdout"], out)
        # Nothing queued: the key may queue again.
        self.assertResult(self.server.execute("print('e')", token=token), "ok")

    def test_max_session_state_mb(self):
        token = TOKENS["state"]
        sid = self.session(token, checkpoint=True)
        path = f"/v1/sessions/{sid}/execute"
        # 2 MB of globals that do not compress; the checkpoint before the next execution holds them.
        self.assertResult(self.server.execute("import os\nx = os.urandom(2_000_000)", token=token, path=path), "ok")
        self.assertResult(self.server.execute("print(len(x))", token=token, path=path), "ok")
        self.assertGreaterEqual(self.key_metric("execbox_key_session_state_bytes", "state"), 2_000_000)
        body = self.assertOverCap(self.server.execute("print(1)", token=token, path=path),
                                  "key-session-state", "max_session_state_mb", "state", 1)
        self.assertGreaterEqual(body["in_use_bytes"], 2_000_000)
        self.assertOverCap(self.server.request("POST", f"/v1/sessions/{sid}/fork", token=token),
                           "key-session-state", "max_session_state_mb", "state", 1)
        # A session that keeps no state still runs; and with the big one closed, there is room again.
        plain = self.session(token)
        self.assertResult(self.server.execute("print(2)", token=token, path=f"/v1/sessions/{plain}/execute"), "ok")
        self.assertEqual(self.server.request("DELETE", f"/v1/sessions/{sid}", token=token).status, 204)
        again = self.session(token, checkpoint=True)
        self.assertResult(self.server.execute("print(3)", token=token, path=f"/v1/sessions/{again}/execute"), "ok")

    def test_a_flooding_key_waits_behind_itself(self):
        # Fair admission: key A (env-1) runs one and queues four; key B (env-2), with nothing
        # running, then starts at once in the light callers' slot, before any of A's queued.
        # Each reports when it began, in the sandbox.
        began, lock = {}, threading.Lock()

        def run(name, token, sleep):
            r = self.server.execute(f"import time\nprint(time.time())\ntime.sleep({sleep})", token=token)
            with lock:
                began[name] = float(r.json()["stdout"]) if r.status == 200 else r

        threads = [threading.Thread(target=run, args=("a0", KEY_A, 3))]
        threads[0].start()
        self.assertTrue(wait_until(lambda: self.key_metric("execbox_key_running_executions", "env-1") == 1, 60))
        for i in range(1, 5):
            threads.append(threading.Thread(target=run, args=(f"a{i}", KEY_A, 0.2)))
            threads[-1].start()
            self.assertTrue(wait_until(lambda: self.key_metric("execbox_key_queued_executions", "env-1") == i, 60))
        threads.append(threading.Thread(target=run, args=("b", KEY_B, 0)))
        threads[-1].start()
        threads[-1].join(120)
        for t in threads:
            t.join(120)
        for name, value in began.items():
            self.assertIsInstance(value, float, f"{name}: {value!r}")
        ahead = [f"a{i}" for i in range(1, 5) if began[f"a{i}"] < began["b"]]
        self.assertEqual(ahead, [], f"B waited behind {ahead}: {began}")

if __name__ == "__main__":
    unittest.main()
