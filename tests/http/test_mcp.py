"""MCP through the gate, end to end: one `execbox serve` started with a config file
([limits.default] memory_mb = 512, [limits.max] timeout_seconds = 20, a key "flood" at one
execution a second), the two env keys, and an audit log; MCP over Streamable HTTP spoken with
the standard library (harness.McpClient), next to /v1 on the same server, and `execbox mcp` on
stdio as a second process. It proves that every transport passes the same rules: the server's
limits, bearer auth (RFC 6750), session ownership by the key (a session of key A does not exist
for key B on /v1 or over MCP; one created through MCP is A's on /v1 too and closes with its MCP
session), admission and the key's rate and concurrency, metrics and the audit log."""
import json
import os
import subprocess
import threading
import time
import unittest

from harness import (KEY_A, KEY_B, ApiTestCase, McpClient, Server, _die_with_parent, execbox_binary, read_audit,
                     sha256_hex, tool_text, wait_until)

KEY_FLOOD = "test-key-flood-0123456789abcdef"
CONFIG = f"""
[limits.default]
memory_mb = 512
timeout_seconds = 20

[limits.max]
timeout_seconds = 20

[[keys]]
id = "flood"
sha256 = "{sha256_hex(KEY_FLOOD)}"
rate_per_second = 1
burst = 2
max_concurrent = 2
"""
LIMIT_NAMES = {"timeout_seconds", "cpu_seconds", "memory_mb", "max_processes", "output_bytes", "disk_mb"}
REFUSED = "[execbox] refused ("


def refusal_type(result):
    """The TYPE of a tool result "[execbox] refused (TYPE): ...", or None."""
    text = tool_text(result)
    if not result.get("isError") or not text.startswith(REFUSED):
        return None
    return text[len(REFUSED):text.index(")")]


class McpGateTest(ApiTestCase):
    @classmethod
    def setUpClass(cls):
        server = Server(name="mcp-gate", config=CONFIG)
        cls.audit_log = os.path.join(server.tmp, "audit.jsonl")
        server.flags = ["--audit-log", cls.audit_log]
        cls.server = server.start()

    @classmethod
    def tearDownClass(cls):
        code = cls.server.stop()
        if code != 0:
            raise AssertionError(f"exit status {code}; stderr:\n{cls.server.stderr_text()[-4000:]}")
        wait_until(lambda: not cls.server.leftover_processes(), 10)
        left = cls.server.leftover_processes() + cls.server.leftover_cgroups()
        if left:
            raise AssertionError(f"the server left processes or cgroups behind: {left}")

    def mcp(self, token=KEY_A):
        client = McpClient(self.server, token)
        client.initialize()
        self.addCleanup(client.delete)
        return client

    def assertRefused(self, result, type_, *needles):
        """A tool result the gate refused: isError, the text "[execbox] refused (TYPE): ..."
        naming each needle, and as structuredContent the problem HTTP would send."""
        self.assertTrue(result.get("isError"), result)
        problem = result["structuredContent"]
        self.assertEqual(problem["type"], "urn:execbox:problem:" + type_, problem)
        self.assertIsInstance(problem["status"], int)
        self.assertTrue(problem["title"] and problem["detail"], problem)
        self.assertValid("Problem", problem)
        text = tool_text(result)
        self.assertTrue(text.startswith(f"{REFUSED}{type_}): "), text)
        for n in needles:
            self.assertIn(n, text)
        return text

    def assertNoHostPath(self, text):
        for path in ("/sys/fs/cgroup", "/proc/", "/tmp/execbox", self.server.tmp):
            self.assertNotIn(path, text)

    # -- the server's limits (c) --

    def test_tools_carry_the_servers_limits(self):
        tools = self.mcp().tools()
        # The process tools are offered because this server has sessions (a warm pool).
        processes = {"start_process", "list_processes", "read_process_output", "send_process_input", "signal_process"}
        self.assertEqual(set(tools), {"execute_python", "check_python", "create_session", "fork_session", "pause_session",
                                      "resume_session", "close_session"} | processes)
        schema = tools["execute_python"]["inputSchema"]
        # What the sandbox can import, as its interpreter listed it when the server started.
        description = tools["execute_python"]["description"]
        for module in ("numpy", "pandas", "matplotlib", "sklearn", "PIL"):
            self.assertIn(module, description)
        self.assertIn("no network", description)
        props = schema["properties"]
        # network: the same policy as /v1/execute's (tests/http/test_network.py uses it).
        self.assertEqual(set(props), LIMIT_NAMES | {"code", "session_id", "network", "guard"}, props)
        self.assertEqual(schema["required"], ["code"])
        self.assertEqual(props["memory_mb"]["default"], 512, props["memory_mb"])
        self.assertEqual(props["memory_mb"]["minimum"], 16, props["memory_mb"])
        self.assertEqual(props["memory_mb"]["maximum"], 4096, props["memory_mb"])
        self.assertEqual(props["timeout_seconds"]["maximum"], 20, props["timeout_seconds"])
        self.assertEqual(props["timeout_seconds"]["default"], 20, props["timeout_seconds"])
        self.assertEqual(props["disk_mb"]["default"], 64, props["disk_mb"])
        create = tools["create_session"]["inputSchema"]["properties"]
        self.assertEqual(set(create), LIMIT_NAMES | {"network"}, create)
        self.assertEqual(create["memory_mb"]["default"], 512)
        self.assertEqual(create["timeout_seconds"]["maximum"], 20)
        # The OpenAPI document of the same server says the same.
        doc = self.server.request("GET", "/v1/openapi.json").json()
        limits = doc["components"]["schemas"]["Limits"]["properties"]
        self.assertEqual((limits["memory_mb"]["default"], limits["timeout_seconds"]["maximum"]), (512, 20))

    def test_limit_above_the_maximum_is_refused(self):
        client = self.mcp()
        r = client.call("execute_python", {"code": "print('ran')", "timeout_seconds": 60})
        self.assertRefused(r, "limit-exceeded", "timeout_seconds", "20")
        self.assertNotIn("ran", json.dumps(r))
        r = client.call("create_session", {"timeout_seconds": 60})
        self.assertRefused(r, "limit-exceeded", "timeout_seconds", "20")
        # The same over /v1.
        p = self.assertProblem(self.server.execute("1", limits={"timeout_seconds": 60}), 422, "limit-exceeded")
        self.assertEqual((p["limit"], p["maximum"]), ("timeout_seconds", 20), p)

    def test_invalid_arguments_are_tool_errors(self):
        client = self.mcp()
        cases = [
            ("execute_python", {}, "invalid-arguments"),
            ("execute_python", {"code": 5}, "invalid-arguments"),
            ("execute_python", {"code": "1", "bogus": 1}, "invalid-arguments"),
            ("execute_python", {"code": "1", "session_id": ""}, "invalid-arguments"),
            ("execute_python", {"code": "1", "memory_mb": "big"}, "wrong-type"),
            ("execute_python", {"code": "1", "memory_mb": 100.5}, "wrong-type"),
            ("execute_python", {"code": "1", "memory_mb": 0}, "invalid-value"),
            ("execute_python", {"code": "1", "memory_mb": 8}, "invalid-value"),
            ("execute_python", {"code": "1", "timeout_seconds": -1}, "invalid-value"),
            ("create_session", {"bogus": 1}, "unknown-field"),
            ("create_session", {"disk_mb": "x"}, "wrong-type"),
        ]
        for tool, arguments, type_ in cases:
            with self.subTest(tool=tool, arguments=arguments):
                self.assertRefused(client.call(tool, arguments), type_)
        # A tool that does not exist is a protocol error, not a tool result.
        for name in ("nope",):
            answer = client.rpc("tools/call", {"name": name, "arguments": {"session_id": "x"}})
            self.assertEqual(answer.get("error", {}).get("code"), -32602, answer)
            self.assertIn("unknown tool", answer["error"]["message"])

    def test_close_session_invalid_arguments_are_refusals(self):
        # Like every tool's: "[execbox] refused (invalid-arguments): ...", with isError.
        client = self.mcp()
        for arguments in ({}, {"session_id": 7}):
            with self.subTest(arguments=arguments):
                self.assertRefused(client.call("close_session", arguments), "invalid-arguments", "session_id")

    def test_session_keeps_300_mb_under_the_configured_memory(self):
        client = self.mcp()
        created = client.call("create_session", {})
        self.assertFalse(created["isError"], created)
        sid = created["structuredContent"]["session_id"]
        self.addCleanup(client.call, "close_session", {"session_id": sid})
        r = client.call("execute_python", {"code": "x = bytearray(300 << 20)\nlen(x)", "session_id": sid})
        self.assertNoHostPath(tool_text(r))
        self.assertFalse(r["isError"], tool_text(r))
        s = r["structuredContent"]
        self.assertEqual(s["status"], "ok", s)
        self.assertEqual(s["result"]["data"]["text/plain"], str(300 << 20))
        self.assertEqual(s["limits"]["memory_mb"], {"value": 512, "enforced_by": s["limits"]["memory_mb"]["enforced_by"]})
        self.assertEqual(s["limits"]["timeout_seconds"]["value"], 20, s["limits"])
        self.assertEqual(s["session"]["id"], sid)
        r = client.call("execute_python", {"code": "x[-1] = 7\n(len(x), x[-1])", "session_id": sid})
        self.assertFalse(r["isError"], tool_text(r))
        s = r["structuredContent"]
        self.assertEqual(s["result"]["data"]["text/plain"], f"({300 << 20}, 7)")
        self.assertEqual(s["session"]["state"], "preserved", s["session"])
        self.assertEqual(s["limits"]["memory_mb"]["value"], 512)
        # A one-shot call gets the same default.
        r = client.call("execute_python", {"code": "len(bytearray(300 << 20))"})
        self.assertNoHostPath(tool_text(r))
        self.assertEqual(r["structuredContent"]["status"], "ok", tool_text(r))
        self.assertEqual(r["structuredContent"]["limits"]["memory_mb"]["value"], 512)

    # -- structuredContent is the Result (item 7) --

    def test_structured_content_is_the_result(self):
        client = self.mcp()
        code = ("import matplotlib.pyplot as plt\n"
                "print('out')\n"
                "plt.plot([1, 2, 3], [3, 1, 2])\n"
                "plt.show()\n"
                "open('note.txt', 'w').write('hello')\n"
                "6 * 7\n")
        r = client.call("execute_python", {"code": code})
        self.assertFalse(r["isError"], tool_text(r))
        s = r["structuredContent"]
        for name in ("status", "exit_code", "stdout", "stderr", "result", "display", "error", "files", "usage",
                     "limits"):
            self.assertIn(name, s)
        self.assertEqual(set(s["limits"]), LIMIT_NAMES)
        self.assertEqual((s["status"], s["exit_code"], s["stdout"], s["error"]), ("ok", 0, "out\n", None))
        self.assertEqual(s["result"]["data"]["text/plain"], "42")
        self.assertNotIn("result_text", s)
        self.assertNotIn("images", s)
        # The figure left its bundle for a content block; the bundle points at it.
        self.assertEqual(len(s["display"]), 1, s["display"])
        figure = s["display"][0]
        self.assertNotIn("image/png", figure["data"])
        self.assertIn("text/plain", figure["data"])
        block = r["content"][figure["content_index"]]
        self.assertEqual((block["type"], block["mimeType"]), ("image", "image/png"))
        import base64
        self.assertTrue(base64.b64decode(block["data"]).startswith(b"\x89PNG\r\n\x1a\n"))
        self.assertEqual(r["content"][0]["type"], "text")
        # Files without their bytes.
        self.assertEqual(s["files"], [{"name": "note.txt", "size": 5, "mime_type": "text/plain"}])
        text = tool_text(r)
        for needle in ("out", "[figure 640x480 PNG, ", "42", "[file note.txt, 5 bytes, text/plain]"):
            self.assertIn(needle, text)
        # An error and a timeout.
        r = client.call("execute_python", {"code": "def f():\n    return 1 / 0\nf()"})
        self.assertTrue(r["isError"])
        s = r["structuredContent"]
        self.assertEqual((s["status"], s["error"]["ename"]), ("error", "ZeroDivisionError"), s)
        self.assertIsInstance(s["error"]["traceback"], list)
        self.assertIn("ZeroDivisionError", tool_text(r))
        self.assertIn("return 1 / 0", tool_text(r))
        r = client.call("execute_python", {"code": "while True: pass", "timeout_seconds": 1})
        self.assertTrue(r["isError"])
        self.assertEqual(r["structuredContent"]["status"], "timeout")
        self.assertEqual(r["structuredContent"]["limits"]["timeout_seconds"]["value"], 1)
        self.assertIn("[execbox] timeout: TimeoutError", tool_text(r))

    # -- auth (e) --

    def test_401_on_v1_and_mcp(self):
        rejected = 'execbox_rejected_requests_total{transport="http",reason="unauthorized"}'
        before = self.server.metrics().get(rejected, 0)
        initialize = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                 "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                                            "clientInfo": {"name": "t", "version": "0"}}}).encode()
        mcp_headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        requests = [("POST", "/v1/execute", json.dumps({"code": "print(1)"}).encode(),
                     {"Content-Type": "application/json"}),
                    ("POST", "/v1/sessions", b"{}", {"Content-Type": "application/json"}),
                    ("GET", "/v1/sessions", None, {}),
                    ("POST", "/mcp", initialize, mcp_headers),
                    ("DELETE", "/mcp", None, {"Mcp-Session-Id": "0" * 32})]
        credentials = [(None, None), ("Basic x", "invalid_token"), ("Bearer a b", "invalid_token"),
                       ("Bearer " + "unknown-token-0123456789abcdef", "invalid_token"), ("Bearer", "invalid_token")]
        n = 0
        for method, path, body, headers in requests:
            for authorization, error in credentials:
                with self.subTest(method=method, path=path, authorization=authorization):
                    h = dict(headers)
                    if authorization is not None:
                        h["Authorization"] = authorization
                    r = self.server.request(method, path, body, headers=h, auth=False)
                    n += 1
                    self.assertProblem(r, 401, "unauthorized")
                    challenge = r.header("www-authenticate")
                    if error is None:
                        self.assertEqual(challenge, 'Bearer realm="execbox"', r.headers)
                    else:
                        self.assertTrue(challenge.startswith(
                            'Bearer realm="execbox", error="invalid_token", error_description="'), challenge)
                        self.assertTrue(challenge.endswith('"'), challenge)
        after = self.server.metrics().get(rejected, 0)
        self.assertEqual(after - before, n)
        # 403 is only for a disallowed Origin, with a valid key.
        r = self.server.request("POST", "/mcp", initialize, headers={**mcp_headers, "Origin": "http://evil.example.com"})
        self.assertProblem(r, 403, "forbidden-origin")

    # -- sessions belong to the key, on every transport (a, f) --

    def test_a_session_belongs_to_its_key_on_every_transport(self):
        secret_v1 = "alpha-v1-" + os.urandom(6).hex()
        secret_mcp = "alpha-mcp-" + os.urandom(6).hex()
        # Key A: one session over /v1, one through MCP.
        r = self.server.request("POST", "/v1/sessions", {}, token=KEY_A)
        self.assertEqual(r.status, 201, repr(r))
        sid_v1 = r.json()["id"]
        self.addCleanup(self.server.request, "DELETE", f"/v1/sessions/{sid_v1}", token=KEY_A)
        self.assertResult(self.server.execute(f"secret = {secret_v1!r}", token=KEY_A,
                                              path=f"/v1/sessions/{sid_v1}/execute"), "ok")
        self.assertEqual(self.server.request("PUT", f"/v1/sessions/{sid_v1}/files/s.txt", secret_v1.encode(),
                                             token=KEY_A).status, 204)
        a = self.mcp(KEY_A)
        created = a.call("create_session", {})
        self.assertFalse(created["isError"], created)
        sid_mcp = created["structuredContent"]["session_id"]
        r = a.call("execute_python", {"code": f"secret = {secret_mcp!r}\nopen('s.txt', 'w').write(secret)",
                                      "session_id": sid_mcp})
        self.assertFalse(r["isError"], tool_text(r))
        # Both are A's on both transports.
        r = a.call("execute_python", {"code": "print(secret)", "session_id": sid_v1})
        self.assertEqual(r["structuredContent"]["stdout"], secret_v1 + "\n", tool_text(r))
        self.assertEqual(r["structuredContent"]["session"]["id"], sid_v1)
        r = self.assertResult(self.server.execute("secret", token=KEY_A, path=f"/v1/sessions/{sid_mcp}/execute"), "ok")
        self.assertEqual(r["result"]["data"]["text/plain"], repr(secret_mcp))
        listing = self.server.request("GET", "/v1/sessions", token=KEY_A).json()
        self.assertTrue({sid_v1, sid_mcp} <= {s["id"] for s in listing["sessions"]}, listing)

        # Key B cannot reach either, on /v1 ...
        for sid in (sid_v1, sid_mcp):
            checks = [("GET", f"/v1/sessions/{sid}", None),
                      ("POST", f"/v1/sessions/{sid}/execute", {"code": "print(secret)"}),
                      ("POST", "/v1/execute", {"code": "print(secret)", "session_id": sid}),
                      ("GET", f"/v1/sessions/{sid}/files/s.txt", None),
                      ("PUT", f"/v1/sessions/{sid}/files/t.txt", b"bravo"),
                      ("POST", f"/v1/sessions/{sid}/fork", None),
                      ("POST", f"/v1/sessions/{sid}/undo", None),
                      ("DELETE", f"/v1/sessions/{sid}", None)]
            for method, path, body in checks:
                with self.subTest(transport="http", method=method, path=path):
                    r = self.server.request(method, path, body, token=KEY_B)
                    self.assertProblem(r, 404, "session-not-found")
                    self.assertNotIn(b"alpha-", r.body)
        listing = self.server.request("GET", "/v1/sessions", token=KEY_B).json()
        self.assertFalse({sid_v1, sid_mcp} & {s["id"] for s in listing["sessions"]}, listing)
        # ... nor through its own MCP session.
        b = self.mcp(KEY_B)
        for sid in (sid_v1, sid_mcp):
            with self.subTest(transport="mcp_http", session=sid):
                for arguments in ({"code": "print(secret)", "session_id": sid},
                                  {"code": "print(open('s.txt').read())", "session_id": sid}):
                    r = b.call("execute_python", arguments)
                    self.assertRefused(r, "session-not-found")
                    self.assertNotIn("alpha-", json.dumps(r))
                for tool in ("fork_session", "pause_session", "resume_session", "close_session"):
                    r = b.call(tool, {"session_id": sid})
                    self.assertRefused(r, "session-not-found")
        # Nor can B use A's MCP session itself.
        r = self.server.request("POST", "/mcp", json.dumps({"jsonrpc": "2.0", "id": 5, "method": "ping"}).encode(),
                                headers=a.headers(), token=KEY_B)
        self.assertEqual(r.status, 404, repr(r))

        # Untouched for A.
        r = a.call("execute_python", {"code": "print(secret)", "session_id": sid_mcp})
        self.assertEqual(r["structuredContent"]["stdout"], secret_mcp + "\n", tool_text(r))
        r = self.assertResult(self.server.execute("secret", token=KEY_A, path=f"/v1/sessions/{sid_v1}/execute"), "ok")
        self.assertEqual(r["result"]["data"]["text/plain"], repr(secret_v1))
        self.assertProblem(self.server.request("GET", f"/v1/sessions/{sid_v1}/files/t.txt", token=KEY_A), 404,
                           "file-not-found")

        # The audit log has B's refused MCP calls, and A's MCP executions, as mcp_http.
        def lines():
            found = [l for l in read_audit(self.audit_log) if l["session_id"] in (sid_v1, sid_mcp)]
            refused = [l for l in found if l["key_id"] == "env-2" and l["transport"] == "mcp_http"
                       and l["route"] == "session"]
            return found if len(refused) >= 4 else None

        found = wait_until(lines, 10) or []
        b_mcp = [l["status"] for l in found if l["key_id"] == "env-2" and l["transport"] == "mcp_http"
                 and l["route"] == "session"]
        self.assertEqual(b_mcp, ["refused:session-not-found"] * 4, found)
        a_mcp = [(l["route"], l["status"]) for l in found if l["key_id"] == "env-1" and l["transport"] == "mcp_http"]
        self.assertIn(("session_create", "created"), a_mcp)
        self.assertIn(("session", "ok"), a_mcp)
        self.assertTrue(all(l["peer"] for l in found if l["transport"] == "mcp_http"), found)

    def test_stdio_callers_sessions_are_its_own(self):
        """`execbox mcp` on stdio, as a second process: a session id that key A made over HTTP is
        unknown to it, and the sessions it makes are unknown to the HTTP server."""
        r = self.server.request("POST", "/v1/sessions", {}, token=KEY_A)
        self.assertEqual(r.status, 201, repr(r))
        sid_http = r.json()["id"]
        self.addCleanup(self.server.request, "DELETE", f"/v1/sessions/{sid_http}", token=KEY_A)
        secret = "stdio-secret-" + os.urandom(6).hex()
        self.assertResult(self.server.execute(f"secret = {secret!r}", path=f"/v1/sessions/{sid_http}/execute"), "ok")

        proc = subprocess.Popen([execbox_binary(), "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, preexec_fn=_die_with_parent)
        self.addCleanup(lambda: proc.poll() is None and proc.kill())
        replies = {}
        cv = threading.Condition()

        def read():
            for line in proc.stdout:
                m = json.loads(line)
                with cv:
                    replies[m.get("id")] = m
                    cv.notify_all()

        threading.Thread(target=read, daemon=True).start()

        def rpc(rid, method, params):
            proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}).encode()
                             + b"\n")
            proc.stdin.flush()
            with cv:
                self.assertTrue(cv.wait_for(lambda: rid in replies, 180), f"no reply to {method}")
                return replies[rid]

        def call(rid, tool, arguments):
            answer = rpc(rid, "tools/call", {"name": tool, "arguments": arguments})
            self.assertIn("result", answer, answer)
            return answer["result"]

        rpc(1, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                              "clientInfo": {"name": "t", "version": "0"}})
        r = call(2, "execute_python", {"code": "print(secret)", "session_id": sid_http})
        self.assertRefused(r, "session-not-found")
        self.assertNotIn(secret, json.dumps(r))
        r = call(3, "create_session", {})
        self.assertFalse(r["isError"], r)
        sid_stdio = r["structuredContent"]["session_id"]
        r = call(4, "execute_python", {"code": "x = 41", "session_id": sid_stdio})
        self.assertFalse(r["isError"], r)
        r = call(5, "execute_python", {"code": "x + 1", "session_id": sid_stdio})
        self.assertEqual(r["structuredContent"]["result"]["data"]["text/plain"], "42", r)
        # The HTTP server knows nothing of it, for any key or transport.
        for token in (KEY_A, KEY_B):
            self.assertProblem(self.server.request("GET", f"/v1/sessions/{sid_stdio}", token=token), 404,
                               "session-not-found")
        self.assertRefused(self.mcp(KEY_A).call("execute_python", {"code": "x", "session_id": sid_stdio}),
                           "session-not-found")
        proc.stdin.close()
        self.assertEqual(proc.wait(timeout=90), 0)
        # Still A's, untouched, on the HTTP server.
        r = self.assertResult(self.server.execute("secret", path=f"/v1/sessions/{sid_http}/execute"), "ok")
        self.assertEqual(r["result"]["data"]["text/plain"], repr(secret))

    def test_mcp_session_end_closes_its_sessions(self):
        # A session made over /v1 and used through MCP is not the MCP session's to close.
        r = self.server.request("POST", "/v1/sessions", {}, token=KEY_A)
        self.assertEqual(r.status, 201, repr(r))
        sid_v1 = r.json()["id"]
        self.addCleanup(self.server.request, "DELETE", f"/v1/sessions/{sid_v1}", token=KEY_A)
        client = McpClient(self.server, KEY_A)
        client.initialize()
        created = client.call("create_session", {})
        self.assertFalse(created["isError"], created)
        sid = created["structuredContent"]["session_id"]
        self.assertFalse(client.call("execute_python", {"code": "y = 1", "session_id": sid})["isError"])
        self.assertFalse(client.call("execute_python", {"code": "y = 2", "session_id": sid_v1})["isError"])
        r = self.server.request("GET", f"/v1/sessions/{sid}", token=KEY_A)
        self.assertEqual(r.status, 200, repr(r))
        self.assertValid("SessionInfo", r.json())
        self.assertEqual(r.json()["executions"], 1)

        d = client.delete()
        self.assertEqual(d.status, 204, repr(d))
        gone = wait_until(lambda: self.server.request("GET", f"/v1/sessions/{sid}", token=KEY_A).status == 404, 15)
        self.assertTrue(gone, "the MCP session's session outlived its DELETE")
        self.assertProblem(self.server.request("GET", f"/v1/sessions/{sid}", token=KEY_A), 404, "session-not-found")
        r = self.server.request("GET", f"/v1/sessions/{sid_v1}", token=KEY_A)
        self.assertEqual(r.status, 200, repr(r))
        closed = wait_until(lambda: [l for l in read_audit(self.audit_log)
                                     if l["session_id"] == sid and l["route"] == "session_close"], 10)
        self.assertEqual([(l["transport"], l["status"], l["key_id"]) for l in closed or []],
                         [("mcp_http", "closed", "env-1")], closed)

    # -- admission and the key's rate, over MCP (b) --

    def test_flood_over_mcp_is_admitted_like_http(self):
        metrics = self.server.metrics()
        ok_key = 'execbox_executions_total{transport="mcp_http",route="execute",status="ok"}'
        refused_keys = ['execbox_rejected_requests_total{transport="mcp_http",reason="rate_limited"}',
                        'execbox_rejected_requests_total{transport="mcp_http",reason="key_concurrency"}']
        ok_before = metrics.get(ok_key, 0)
        refused_before = sum(metrics.get(k, 0) for k in refused_keys)
        client = self.mcp(KEY_FLOOD)
        code = ("import time\n"
                "t0 = time.time()\n"
                "time.sleep(4)\n"
                "print(t0, time.time())\n")
        answers = {}
        lock = threading.Lock()

        def one(i):
            t0 = time.monotonic()
            try:
                r = client.call("execute_python", {"code": f"# call {i}\n" + code})
            except Exception as e:  # noqa: BLE001 - a lost call is what this test looks for
                r = e
            with lock:
                answers[i] = (r, time.monotonic() - t0)

        # Wave 1: 8 at once against burst = 2; wave 2, 1.5 s later (a token is back, but both
        # admitted calls still run): 4 more, and the same key's /v1 requests.
        wave1 = [threading.Thread(target=one, args=(i,)) for i in range(8)]
        for t in wave1:
            t.start()
        time.sleep(1.5)
        wave2 = [threading.Thread(target=one, args=(i,)) for i in range(8, 12)]
        for t in wave2:
            t.start()
        http_execute = self.server.execute("print('http')", token=KEY_FLOOD)
        http_session = self.server.request("POST", "/v1/sessions", {}, token=KEY_FLOOD)
        mcp_session = client.call("create_session", {})
        for t in wave1 + wave2:
            t.join(timeout=120)
        self.assertEqual(sorted(answers), list(range(12)), "calls without an answer")
        ran, refused = [], []
        for i, (r, took) in sorted(answers.items()):
            self.assertNotIsInstance(r, Exception, f"call {i}: {r}")
            type_ = refusal_type(r)
            if type_ is None:
                self.assertFalse(r["isError"], tool_text(r))
                self.assertEqual(r["structuredContent"]["status"], "ok", tool_text(r))
                ran.append(tuple(float(x) for x in r["structuredContent"]["stdout"].split()))
            else:
                self.assertIn(type_, ("rate-limited", "key-concurrency"), tool_text(r))
                self.assertEqual(r["structuredContent"]["type"], "urn:execbox:problem:" + type_, r)
                self.assertEqual(r["structuredContent"]["status"], 429, r)
                self.assertIn("retry after", tool_text(r))
                # At once: long before the admitted calls (4 s of sleep) end.
                self.assertLess(took, 3, f"call {i} was refused only after {took:.1f} s")
                refused.append((i, type_))
        # What the key allows: burst 2, at most 2 at once (the token back at 1 s finds 2 running).
        self.assertEqual(len(ran), 2, (ran, refused))
        self.assertEqual(len(refused), 10, refused)
        self.assertIn("rate-limited", {t for _, t in refused}, refused)
        self.assertEqual({t for i, t in refused if i >= 8}, {"key-concurrency"}, refused)
        for start, _ in ran:
            self.assertLessEqual(sum(1 for s, e in ran if s <= start < e), 2, ran)
        # The key's /v1 requests and its session creation count against the same limits.
        self.assertProblem(http_execute, 429, "key-concurrency")
        self.assertProblem(http_session, 429, "key-concurrency")
        self.assertRefused(mcp_session, "key-concurrency")

        metrics = self.server.metrics()
        self.assertEqual(metrics.get(ok_key, 0) - ok_before, 2)
        # The refused calls, and the refused create_session.
        self.assertEqual(sum(metrics.get(k, 0) for k in refused_keys) - refused_before, len(refused) + 1)
        self.assertIn('execbox_execution_duration_seconds_count{transport="mcp_http",route="execute"}', metrics)

        def flood_lines():
            lines = [l for l in read_audit(self.audit_log) if l["key_id"] == "flood"]
            return lines if len(lines) >= 15 else None

        lines = wait_until(flood_lines, 10) or []
        mcp = sorted(l["status"] for l in lines if l["transport"] == "mcp_http" and l["route"] == "execute")
        self.assertEqual(mcp, sorted(["ok", "ok"] + ["refused:" + t for _, t in refused]), lines)
        self.assertIn(("mcp_http", "session_create", "refused:key-concurrency"),
                      [(l["transport"], l["route"], l["status"]) for l in lines])
        self.assertIn(("http", "execute", "refused:key-concurrency"),
                      [(l["transport"], l["route"], l["status"]) for l in lines])
        self.assertIn(("http", "session_create", "refused:key-concurrency"),
                      [(l["transport"], l["route"], l["status"]) for l in lines])


if __name__ == "__main__":
    unittest.main()
