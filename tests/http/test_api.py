"""The HTTP API end to end on one shared `execbox serve` (two API keys, an audit log): every
endpoint, SSE, sessions and their files, the OpenAPI document (every JSON answer is validated
against its schema), health, metrics, the audit log, and bad input of every kind while another
client keeps being served."""
import base64
import hashlib
import json
import os
import re
import socket
import subprocess
import threading
import time
import unittest

import jsonschema

import harness
from harness import (KEY_A, KEY_B, ApiTestCase, Response, Server, b64, parse_raw_response, read_audit,
                     read_sse, sha256_hex, wait_until)

SHARED = None
AUDIT_LOG = None


def setUpModule():
    global SHARED, AUDIT_LOG
    server = Server(name="shared")
    AUDIT_LOG = os.path.join(server.tmp, "audit.jsonl")
    server.flags = ["--audit-log", AUDIT_LOG]
    SHARED = server.start()


def tearDownModule():
    if SHARED is None:
        return
    code = SHARED.stop()
    if code != 0:
        raise AssertionError(f"the shared server exited {code}; stderr:\n{SHARED.stderr_text()[-4000:]}")
    wait_until(lambda: not SHARED.leftover_processes(), 10)
    left = SHARED.leftover_processes() + SHARED.leftover_cgroups()
    if left:
        raise AssertionError(f"the shared server left processes or cgroups behind: {left}")


class SharedCase(ApiTestCase):
    @property
    def server(self):
        return SHARED


# ---- POST /v1/execute and /v1/check ---------------------------------------------------------------


class ExecuteTest(SharedCase):
    def test_print(self):
        r = self.assertResult(self.server.execute("print('hello, world')"), "ok")
        self.assertEqual(r["stdout"], "hello, world\n")
        self.assertEqual(r["stderr"], "")
        self.assertEqual(r["exit_code"], 0)
        self.assertIsNone(r["signal"])
        self.assertIsNone(r["error"])
        self.assertEqual(r["streams"], [{"name": "stdout", "text": "hello, world\n"}])
        # The limits in force, by the request's names and units: this server's defaults.
        limits = r["limits"]
        self.assertEqual(set(limits), {"timeout_seconds", "cpu_seconds", "memory_mb", "max_processes",
                                       "output_bytes", "disk_mb"}, limits)
        self.assertEqual({k: v["value"] for k, v in limits.items()},
                         {"timeout_seconds": 30, "cpu_seconds": 30, "memory_mb": 256, "max_processes": 64,
                          "output_bytes": 1048576, "disk_mb": 64}, limits)
        self.assertEqual(limits["timeout_seconds"]["enforced_by"], "supervisor", limits)
        self.assertTrue(all(isinstance(v["enforced_by"], str) and v["enforced_by"] for v in limits.values()),
                        limits)

    def test_last_expression_is_the_result(self):
        r = self.assertResult(self.server.execute("x = 6\nx * 7"), "ok")
        self.assertEqual(r["result"]["data"]["text/plain"], "42")
        self.assertEqual(r["stdout"], "")

    def test_python_error_is_200_with_a_traceback(self):
        r = self.assertResult(self.server.execute("def f():\n    return 1 / 0\n\nf()\n"), "error")
        self.assertEqual(r["error"]["ename"], "ZeroDivisionError")
        self.assertIn("division by zero", r["error"]["evalue"])
        tb = "\n".join(r["error"]["traceback"])
        self.assertIn("line 2", tb)
        self.assertIn("return 1 / 0", tb)
        self.assertEqual(r["exit_code"], 1)

    def test_syntax_error(self):
        r = self.assertResult(self.server.execute("x = (1,\n"), "syntax_error")
        self.assertEqual(r["error"]["line"], 1)

    def test_stdin(self):
        code = "a = input()\nb = input()\nprint(b[::-1], a.upper())"
        r = self.assertResult(self.server.execute(code, stdin="first\nsecond\n"), "ok")
        self.assertEqual(r["stdout"], "dnoces FIRST\n")

    def test_input_files_round_trip(self):
        blob = bytes(range(256)) * 4
        code = ("import os, hashlib\n"
                "print(os.getcwd())\n"
                "text = open('in/notes.txt').read()\n"
                "data = open('in/blob.bin', 'rb').read()\n"
                "os.makedirs('out', exist_ok=True)\n"
                "open('out/upper.txt', 'w').write(text.upper())\n"
                "open('copy.bin', 'wb').write(data[::-1])\n"
                "hashlib.sha256(data).hexdigest()\n")
        files = [{"name": "in/notes.txt", "content_base64": b64("some notes\n".encode())},
                 {"name": "in/blob.bin", "content_base64": b64(blob)}]
        r = self.assertResult(self.server.execute(code, files=files), "ok")
        self.assertEqual(r["stdout"], "/home/user\n")
        self.assertEqual(r["result"]["data"]["text/plain"], repr(hashlib.sha256(blob).hexdigest()))
        by_name = {f["name"]: f for f in r["files"]}
        self.assertIn("out/upper.txt", by_name, r["files"])
        self.assertIn("copy.bin", by_name, r["files"])
        self.assertEqual(base64.b64decode(by_name["out/upper.txt"]["content_base64"]), b"SOME NOTES\n")
        self.assertEqual(by_name["out/upper.txt"]["size"], 11)
        self.assertEqual(base64.b64decode(by_name["copy.bin"]["content_base64"]), blob[::-1])
        self.assertEqual(by_name["copy.bin"]["size"], len(blob))

    def test_timeout_limit(self):
        t0 = time.monotonic()
        r = self.assertResult(self.server.execute("while True:\n    pass\n", limits={"timeout_seconds": 1}),
                              "timeout")
        self.assertEqual(r["error"]["ename"], "TimeoutError")
        self.assertLess(time.monotonic() - t0, 30)

    def test_limits_are_applied(self):
        code = ("x = b'a' * (300 * 1024 * 1024)\n"
                "print('allocated')\n")
        r = self.assertResult(self.server.execute(code, limits={"memory_mb": 64}))
        self.assertIn(r["status"], ("memory_limit", "error"), r)
        self.assertEqual(r["limits"]["memory_mb"]["value"], 64, r["limits"])
        self.assertEqual(r["error"]["ename"], "MemoryError")
        self.assertNotIn("allocated", r["stdout"])

    def test_matplotlib_figure_in_display(self):
        code = ("import matplotlib.pyplot as plt\n"
                "plt.plot([1, 2, 3], [3, 1, 2])\n"
                "plt.show()\n")
        r = self.assertResult(self.server.execute(code), "ok")
        self.assertEqual(len(r["display"]), 1, r["display"])
        png = r["display"][0]["data"]["image/png"]
        self.assertTrue(base64.b64decode(png).startswith(b"\x89PNG\r\n\x1a\n"))

    def test_output_is_decoded_safely(self):
        code = ("import sys\n"
                "print('héllo ✓ 𝄞')\n"
                "sys.stdout.flush()\n"
                "sys.stdout.buffer.write(b'bad \\xff\\xfe bytes\\x00 nul\\n')\n"
                "'ünï'\n")
        r = self.assertResult(self.server.execute(code), "ok")
        self.assertTrue(r["stdout"].startswith("héllo ✓ 𝄞\n"), r["stdout"])
        self.assertIn("bad \ufffd\ufffd bytes\x00 nul\n", r["stdout"])
        self.assertEqual(r["result"]["data"]["text/plain"], "'ünï'")

    def test_output_is_capped_head_and_tail(self):
        code = "print('HEAD')\nprint('x' * 200000)\nprint('TAIL')\n"
        r = self.assertResult(self.server.execute(code, limits={"output_bytes": 4096}), "ok")
        self.assertTrue(r["stdout_truncated"])
        self.assertGreater(r["stdout_bytes"], 200000)
        self.assertLess(len(r["stdout"]), 20000)
        self.assertTrue(r["stdout"].startswith("HEAD\n"), r["stdout"][:100])
        self.assertTrue(r["stdout"].endswith("TAIL\n"), r["stdout"][-100:])

    def test_chunked_request_body(self):
        conn = self.server.connection()
        try:
            headers = {"Content-Type": "application/json", **self.server.auth()}
            conn.request("POST", "/v1/execute", body=iter([b'{"code": ', b'"print(\'chunked\')"', b"}"]),
                         headers=headers, encode_chunked=True)
            resp = conn.getresponse()
            r = Response(resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read())
        finally:
            conn.close()
        self.assertEqual(self.assertResult(r, "ok")["stdout"], "chunked\n")

    def test_keep_alive_executions(self):
        conn = self.server.connection()
        try:
            for i in range(3):
                conn.request("POST", "/v1/execute", body=json.dumps({"code": f"print({i})"}),
                             headers={"Content-Type": "application/json", **self.server.auth()})
                resp = conn.getresponse()
                self.assertEqual(resp.status, 200)
                self.assertEqual(json.loads(resp.read())["stdout"], f"{i}\n")
        finally:
            conn.close()

    def test_content_types_accepted(self):
        for ctype in ("application/json", "application/json; charset=utf-8", None):
            with self.subTest(content_type=ctype):
                headers = {"Content-Type": ctype} if ctype else {}
                r = self.server.request("POST", "/v1/execute", b'{"code": "print(7)"}', headers=headers)
                self.assertEqual(self.assertResult(r, "ok")["stdout"], "7\n")

    def test_raise_memory_error_is_an_error(self):
        # A MemoryError the code raises itself is the code's error, not the memory limit: only the
        # cgroup's own OOM counter says "memory_limit".
        r = self.assertResult(self.server.execute("print('before')\nraise MemoryError('made up')\n"), "error")
        self.assertEqual(r["error"]["ename"], "MemoryError", r["error"])
        self.assertIn("made up", r["error"]["evalue"])
        self.assertEqual(r["exit_code"], 1)
        self.assertEqual(r["stdout"], "before\n")

    def test_non_ascii_file_name(self):
        r = self.assertResult(self.server.execute('open("données.csv", "w").write("a")'), "ok")
        self.assertEqual([f["name"] for f in r["files"]], ["données.csv"], r["files"])
        self.assertEqual(base64.b64decode(r["files"][0]["content_base64"]), b"a")
        # An input file with such a name reaches the code under it.
        files = [{"name": "entrée/naïve.txt", "content_base64": b64("ça va".encode())}]
        r = self.assertResult(self.server.execute('open("entrée/naïve.txt").read()', files=files), "ok")
        self.assertEqual(r["result"]["data"]["text/plain"], repr("ça va"))

    def test_lint_block_refuses_the_run_before_any_code_runs(self):
        code = "open('ran.txt', 'w').write('ran')\nprint(missing)\n"
        r = self.assertResult(self.server.execute(code, lint={"block": ["F821"]}), "policy_violation")
        self.assertEqual(r["error"]["ename"], "PolicyViolation")
        self.assertIn("lint.block", r["error"]["evalue"])
        self.assertEqual(r["files"], [])
        self.assertIn(("pyflakes", "F821"), [(f.get("tool"), f.get("code")) for f in r["findings"]])
        # Not blocked (another code; nothing asked): the code runs.
        r = self.assertResult(self.server.execute(code, lint={"block": ["B602"]}), "error")
        self.assertEqual(r["error"]["ename"], "NameError")
        r = self.assertResult(self.server.execute("print(1)", analyzers=["pyflakes"]), "ok")
        self.assertEqual(r["stdout"], "1\n")

    def test_the_guard_refuses_what_the_sandbox_forbids_and_leaves_ordinary_code_alone(self):
        # The scientific stack under the guard (warm, one-shot): fits, frames, a figure, a file.
        code = ("import numpy as np, pandas as pd, matplotlib.pyplot as plt\n"
                "from sklearn.cluster import KMeans\n"
                "from sklearn.linear_model import LogisticRegression\n"
                "from sklearn.datasets import load_iris\n"
                "X, y = load_iris(return_X_y=True)\n"
                "model = LogisticRegression(max_iter=500).fit(X, y)\n"
                "labels = KMeans(n_clusters=3, n_init=3, random_state=0).fit_predict(X)\n"
                "df = pd.DataFrame(X[:, :2], columns=['a', 'b']).assign(label=labels)\n"
                "df.to_csv('iris.csv')\n"
                "plt.scatter(df.a, df.b, c=df.label)\n"
                "plt.show()\n"
                "print(round(model.score(X, y), 2), sorted(set(labels)))\n"
                "df.groupby('label').size().sum()\n")
        r = self.assertResult(self.server.execute(code, guard="audit", limits={"timeout_seconds": 120}), "ok")
        self.assertEqual(r["stdout"], "0.97 [0, 1, 2]\n", r["stderr"])
        self.assertEqual(r["result"]["data"]["text/plain"], "150")
        self.assertEqual(len([d for d in r["display"] if "image/png" in d["data"]]), 1, r["display"])
        self.assertEqual([f["name"] for f in r["files"]], ["iris.csv"])
        self.assertEqual(r["guard"]["mode"], "audit")
        # What it refused, if anything, is only a program a library tried (find_library's ldconfig).
        self.assertEqual({e["event"] for e in r["guard"]["refused"]} - {"subprocess.Popen"}, set(), r["guard"])
        # What the sandbox forbids fails in the code as PermissionError, and is listed.
        code = f"# guarded {os.urandom(8).hex()}\nimport os\nos.system('id')"
        r = self.assertResult(self.server.execute(code, guard="audit"), "error")
        self.assertEqual(r["error"]["ename"], "PermissionError")
        self.assertIn("execbox guard: os.system refused", r["error"]["evalue"])
        # The detail says where: the code's own line here, a library's for what a library did.
        self.assertEqual(r["guard"]["refused"],
                         [{"event": "os.system", "detail": "running programs is not allowed, by <cell> line 3"}])
        # The audit log's line says what the guard refused.
        line = wait_until(lambda: [l for l in read_audit(AUDIT_LOG) if l.get("code_sha256") == sha256_hex(code)], 10)
        self.assertEqual(line[0]["guard"], r["guard"], line)
        # Without it, no guard in the result; another value is the request's error.
        r = self.assertResult(self.server.execute("import os\nos.system('true')"), "ok")
        self.assertNotIn("guard", r)
        self.assertProblem(self.server.request("POST", "/v1/execute", {"code": "1", "guard": "strict"}), 400,
                           "invalid-value")

    def test_execute_with_the_second_key(self):
        r = self.assertResult(self.server.execute("print(2 ** 10)", token=KEY_B), "ok")
        self.assertEqual(r["stdout"], "1024\n")


class CheckTest(SharedCase):
    def test_syntax_error_found(self):
        r = self.server.request("POST", "/v1/check", {"code": "def f(:\n    pass\n"})
        self.assertEqual(r.status, 200, repr(r))
        body = r.json()
        self.assertValid("CheckResult", body)
        self.assertEqual(body["status"], "syntax_error", body)
        self.assertEqual(body["error"]["line"], 1, body)

    def test_ok_code(self):
        r = self.server.request("POST", "/v1/check", {"code": "import os\nprint(os.getcwd())\n"})
        self.assertEqual(r.status, 200, repr(r))
        body = r.json()
        self.assertValid("CheckResult", body)
        self.assertEqual(body["status"], "ok", body)
        self.assertIsNone(body["error"])

    def test_code_never_runs(self):
        r = self.server.request("POST", "/v1/check", {"code": "print('ran')\n1/0\n"})
        body = r.json()
        self.assertEqual(body["status"], "ok", body)
        self.assertNotIn("ran", body.get("stdout", ""))

    def test_strict_policy(self):
        r = self.server.request("POST", "/v1/check", {"code": "import subprocess\n", "policy": "strict"})
        self.assertEqual(r.status, 200, repr(r))
        body = r.json()
        self.assertValid("CheckResult", body)
        self.assertEqual(body["status"], "policy_violation", body)
        self.assertTrue(body["findings"], body)

    def test_the_seeds_linters(self):
        code = "import os\nimport subprocess\nsubprocess.call('ls', shell=True)\nprint(undefined_name)\n"
        r = self.server.request("POST", "/v1/check", {"code": code, "analyzers": ["pyflakes", "flake8", "bandit"]})
        self.assertEqual(r.status, 200, repr(r))
        body = r.json()
        self.assertValid("CheckResult", body)
        self.assertEqual(body["status"], "ok", body)
        found = {(f["tool"], f["code"], f["line"]) for f in body["findings"] if "tool" in f}
        for want in [("pyflakes", "F401", 1), ("pyflakes", "F821", 4), ("bandit", "B602", 3)]:
            self.assertIn(want, found, body["findings"])
        self.assertFalse([f for f in body["findings"] if f.get("code") == "unavailable"], body["findings"])
        # Blocked: refused as a policy's refusal, naming lint.block.
        r = self.server.request("POST", "/v1/check", {"code": code, "lint": {"block": ["B602"]}})
        body = r.json()
        self.assertValid("CheckResult", body)
        self.assertEqual(body["status"], "policy_violation", body)
        self.assertIn("lint.block", body["error"]["evalue"])
        self.assertEqual([(f["code"], f["severity"]) for f in body["findings"] if f["severity"] == "error"],
                         [("B602", "error")], body["findings"])
        # Nothing asked: no linter runs.
        r = self.server.request("POST", "/v1/check", {"code": code})
        self.assertFalse([f for f in r.json()["findings"] if "tool" in f], r.json())
        self.assertProblem(self.server.request("POST", "/v1/check", {"code": "1", "analyzers": ["pylint"]}), 400,
                           "invalid-value")
        self.assertProblem(self.server.request("POST", "/v1/check", {"code": "1", "lint": {"block": ["F 1"]}}),
                           400, "invalid-value")
        self.assertProblem(self.server.request("POST", "/v1/check", {"code": "1", "lint": {"allow": []}}), 400,
                           "invalid-value")

    def test_bad_check_body(self):
        self.assertProblem(self.server.request("POST", "/v1/check", {"code": "1", "limits": {}}), 400,
                           "unknown-field")
        self.assertProblem(self.server.request("POST", "/v1/check", {}), 400, "missing-field")
        self.assertProblem(self.server.request("GET", "/v1/check"), 405, "method-not-allowed")


# ---- SSE ----------------------------------------------------------------------------------------


class StreamTest(SharedCase):
    def open_stream(self, code, token=None, **fields):
        conn = self.server.connection()
        body = {"code": code}
        body.update(fields)
        headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        headers.update(self.server.auth(token))
        conn.request("POST", "/v1/execute", body=json.dumps(body).encode(), headers=headers)
        return conn, conn.getresponse()

    def test_events_in_order(self):
        code = ("import sys, time\n"
                "print('one', flush=True)\n"
                "time.sleep(0.6)\n"
                "print('two', file=sys.stderr, flush=True)\n"
                "time.sleep(0.6)\n"
                "print('three', flush=True)\n"
                "time.sleep(0.3)\n"
                "import matplotlib.pyplot as plt\n"
                "plt.plot([1, 2, 3])\n"
                "plt.show()\n"
                "time.sleep(1)\n"
                "print('four', flush=True)\n"
                "21 * 2\n")
        conn, resp = self.open_stream(code)
        try:
            self.assertEqual(resp.status, 200)
            self.assertTrue(resp.getheader("Content-Type", "").startswith("text/event-stream"),
                            resp.getheaders())
            arrivals = []
            events = read_sse(resp, lambda name, data: arrivals.append(time.monotonic()) and False)
        finally:
            conn.close()
        names = [e[0] for e in events]
        # Consecutive chunks of one stream collapse into one run.
        runs = [n for i, n in enumerate(names) if i == 0 or names[i - 1] != n]
        # The figure as it is shown, between what was printed before and after it.
        self.assertEqual(runs, ["stdout", "stderr", "stdout", "display", "stdout", "result"], names)
        self.assertGreater(arrivals[-1] - arrivals[names.index("display")], 0.5, "the figure came at the end")
        out = "".join(d["text"] for n, d in events if n == "stdout")
        err = "".join(d["text"] for n, d in events if n == "stderr")
        self.assertEqual(out, "one\nthree\nfour\n")
        self.assertEqual(err, "two\n")
        for n, d in events:
            if n in ("stdout", "stderr"):
                self.assertValid("StreamChunk", d)
            elif n == "display":
                self.assertValid("MimeBundle", d)
                self.assertIn("image/png", d["data"])
        result = events[-1][1]
        self.assertValid("Result", result)
        self.assertEqual(result["status"], "ok", result)
        self.assertEqual(result["stdout"], "one\nthree\nfour\n")
        self.assertEqual(result["stderr"], "two\n")
        self.assertEqual(result["result"]["data"]["text/plain"], "42")
        self.assertEqual(len(result["display"]), 1)
        self.assertEqual(result["display"][0]["data"]["image/png"], events[names.index("display")][1]["data"]["image/png"])
        # Live: the first chunk arrived well before the end (0.6 + 0.6 s of sleeps between).
        first = arrivals[0]
        last = arrivals[-1]
        self.assertGreater(last - first, 0.8, "the output was not streamed as it was written")

    def test_a_client_far_behind_loses_output_events_but_never_the_result(self):
        # 24 MiB printed while the client reads nothing: what cannot be queued of the live output
        # is dropped, the result event (with the capped output) still comes.
        code = "import sys\nfor _ in range(24 * 16):\n    sys.stdout.write('x' * 65535 + '\\n')\n'end'"
        conn, resp = self.open_stream(code)
        try:
            self.assertEqual(resp.status, 200)
            time.sleep(4)
            events = read_sse(resp)
        finally:
            conn.close()
        self.assertEqual(events[-1][0], "result", [e[0] for e in events[-3:]])
        result = events[-1][1]
        self.assertEqual(result["status"], "ok", result["error"])
        self.assertEqual(result["result"]["data"]["text/plain"], "'end'")
        live = sum(len(d["text"]) for n, d in events if n == "stdout")
        self.assertLess(live, 24 << 20, "nothing was dropped: the client was not behind")

    def test_session_stream(self):
        r = self.server.request("POST", "/v1/sessions", {})
        self.assertEqual(r.status, 201, repr(r))
        sid = r.json()["id"]
        self.addCleanup(self.server.request, "DELETE", f"/v1/sessions/{sid}")
        self.assertResult(self.server.execute("n = 20", path=f"/v1/sessions/{sid}/execute"), "ok")
        conn = self.server.connection()
        try:
            conn.request("POST", f"/v1/sessions/{sid}/execute", body=json.dumps({"code": "print(n)\nn + 1"}),
                         headers={"Content-Type": "application/json", "Accept": "text/event-stream",
                                  **self.server.auth()})
            resp = conn.getresponse()
            self.assertEqual(resp.status, 200)
            events = read_sse(resp)
        finally:
            conn.close()
        names = [e[0] for e in events]
        self.assertEqual(names[-1], "result", names)
        self.assertEqual(set(names[:-1]), {"stdout"}, names)  # a write may come in several chunks
        self.assertEqual("".join(d["text"] for _, d in events[:-1]), "20\n")
        result = events[-1][1]
        self.assertValid("Result", result)
        self.assertEqual(result["result"]["data"]["text/plain"], "21")
        self.assertEqual(result["session"]["id"], sid)

    def test_heartbeat(self):
        body = json.dumps({"code": "import time\nprint('a', flush=True)\ntime.sleep(12)\nprint('b')"}).encode()
        s = socket.create_connection((self.server.host, self.server.port), timeout=90)
        data = b""
        try:
            s.sendall(b"POST /v1/execute HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + KEY_A.encode() +
                      b"\r\nContent-Type: application/json\r\nAccept: text/event-stream\r\n"
                      b"Connection: close\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
            while True:
                b = s.recv(65536)
                if not b:
                    break
                data += b
        finally:
            s.close()
        self.assertIn(b"\r\nTransfer-Encoding: chunked\r\n", data.split(b"\r\n\r\n", 1)[0] + b"\r\n")
        self.assertIn(b": heartbeat", data)
        self.assertLess(data.index(b"event: stdout"), data.index(b": heartbeat"))
        self.assertLess(data.index(b": heartbeat"), data.index(b"event: result"))
        self.assertTrue(data.endswith(b"0\r\n\r\n"), data[-50:])

    def test_error_status_over_sse(self):
        conn, resp = self.open_stream("print('before')\nraise ValueError('boom')\n")
        try:
            events = read_sse(resp)
        finally:
            conn.close()
        self.assertEqual(events[-1][0], "result")
        result = events[-1][1]
        self.assertValid("Result", result)
        self.assertEqual(result["status"], "error")
        self.assertEqual(result["error"]["ename"], "ValueError")

    def test_bad_request_is_a_problem_not_a_stream(self):
        conn, resp = self.open_stream("1", limits={"timeout_seconds": 100000})
        try:
            body = resp.read()
        finally:
            conn.close()
        r = Response(resp.status, {k.lower(): v for k, v in resp.getheaders()}, body)
        self.assertProblem(r, 422, "limit-exceeded")

    def test_client_disconnect_kills_the_execution(self):
        before = self.server.metrics()
        killed_key = 'execbox_executions_total{transport="http",route="execute",status="killed"}'
        killed_before = before.get(killed_key, 0)
        marker = "started-" + os.urandom(4).hex()
        code = f"import time\nprint({marker!r}, flush=True)\ntime.sleep(30)\nprint('never')\n"
        body = json.dumps({"code": code}).encode()
        s = socket.create_connection((self.server.host, self.server.port), timeout=60)
        try:
            s.sendall(b"POST /v1/execute HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + KEY_A.encode() +
                      b"\r\nContent-Type: application/json\r\nAccept: text/event-stream\r\nContent-Length: " +
                      str(len(body)).encode() + b"\r\n\r\n" + body)
            seen = b""
            deadline = time.monotonic() + 60
            while marker.encode() not in seen and time.monotonic() < deadline:
                chunk = s.recv(65536)
                if not chunk:
                    break
                seen += chunk
            self.assertIn(b"event: stdout", seen)
            self.assertIn(marker.encode(), seen)
            running = self.server.metrics().get("execbox_running_executions")
            self.assertEqual(running, 1, "the execution should be running while the client is connected")
        finally:
            s.close()
        t0 = time.monotonic()

        def stopped():
            m = self.server.metrics()
            return m.get("execbox_running_executions") == 0 and m.get(killed_key, 0) == killed_before + 1

        self.assertTrue(wait_until(stopped, 15), f"still running 15 s after the client left: "
                        f"{ {k: v for k, v in self.server.metrics().items() if 'running' in k or 'executions_total' in k} }")
        self.assertLess(time.monotonic() - t0, 15)


    def test_client_disconnect_kills_a_json_execution(self):
        killed_key = 'execbox_executions_total{transport="http",route="execute",status="killed"}'
        killed_before = self.server.metrics().get(killed_key, 0)
        body = json.dumps({"code": "import time\ntime.sleep(30)\n"}).encode()
        s = socket.create_connection((self.server.host, self.server.port), timeout=60)
        try:
            s.sendall(b"POST /v1/execute HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + KEY_A.encode() +
                      b"\r\nContent-Type: application/json\r\nContent-Length: " + str(len(body)).encode() +
                      b"\r\n\r\n" + body)
            self.assertTrue(wait_until(lambda: self.server.metrics().get("execbox_running_executions") == 1, 60),
                            "the execution never started")
        finally:
            s.close()

        def stopped():
            m = self.server.metrics()
            return m.get("execbox_running_executions") == 0 and m.get(killed_key, 0) == killed_before + 1

        self.assertTrue(wait_until(stopped, 15), "still running 15 s after the client left")


# ---- Sessions -----------------------------------------------------------------------------------


class SessionTest(SharedCase):
    def create(self, token=None):
        r = self.server.request("POST", "/v1/sessions", {}, token=token)
        self.assertEqual(r.status, 201, repr(r))
        info = r.json()
        self.assertValid("SessionInfo", info)
        self.assertEqual(info["state"], "preserved")
        self.addCleanup(self.server.request, "DELETE", f"/v1/sessions/{info['id']}", token=token)
        return info["id"]

    def run_in(self, sid, code, token=None, status="ok"):
        r = self.server.request("POST", f"/v1/sessions/{sid}/execute", {"code": code}, token=token)
        return self.assertResult(r, status)

    def test_lifecycle(self):
        sid = self.create()
        r1 = self.run_in(sid, "x = 41")
        self.assertEqual(r1["session"]["id"], sid)
        self.assertEqual(r1["session"]["state"], "preserved")
        r2 = self.run_in(sid, "x + 1")
        self.assertEqual(r2["result"]["data"]["text/plain"], "42")
        self.assertEqual(r2["session"]["state"], "preserved")
        self.assertEqual(r2["usage"]["engine"], "session")
        # The same session through /v1/execute with session_id.
        r3 = self.assertResult(self.server.execute("x * 2", session_id=sid), "ok")
        self.assertEqual(r3["result"]["data"]["text/plain"], "82")

        info = self.server.request("GET", f"/v1/sessions/{sid}")
        self.assertEqual(info.status, 200, repr(info))
        self.assertValid("SessionInfo", info.json())
        self.assertEqual(info.json()["id"], sid)
        self.assertEqual(info.json()["executions"], 3)
        self.assertFalse(info.json()["checkpoint"])

        listing = self.server.request("GET", "/v1/sessions")
        self.assertEqual(listing.status, 200, repr(listing))
        self.assertValid("SessionList", listing.json())
        self.assertIn(sid, [s["id"] for s in listing.json()["sessions"]])

        fork = self.server.request("POST", f"/v1/sessions/{sid}/fork")
        self.assertEqual(fork.status, 201, repr(fork))
        self.assertValid("ForkedSession", fork.json())
        copy = fork.json()["id"]
        self.addCleanup(self.server.request, "DELETE", f"/v1/sessions/{copy}")
        self.assertNotEqual(copy, sid)
        self.assertEqual(fork.json()["not_copied"], [])
        self.assertEqual(self.run_in(copy, "x = x + 100\nx")["result"]["data"]["text/plain"], "141")
        self.assertEqual(self.run_in(sid, "x")["result"]["data"]["text/plain"], "41")

        d = self.server.request("DELETE", f"/v1/sessions/{sid}")
        self.assertEqual(d.status, 204, repr(d))
        self.assertEqual(d.body, b"")
        self.assertProblem(self.server.request("GET", f"/v1/sessions/{sid}"), 404, "session-not-found")
        self.assertProblem(self.server.request("POST", f"/v1/sessions/{sid}/execute", {"code": "x"}), 404,
                           "session-not-found")
        self.assertProblem(self.server.request("DELETE", f"/v1/sessions/{sid}"), 404, "session-not-found")
        listing = self.server.request("GET", "/v1/sessions").json()
        self.assertNotIn(sid, [s["id"] for s in listing["sessions"]])

    def test_fork_lists_what_it_could_not_copy(self):
        sid = self.create()
        self.run_in(sid, "import numpy as np\nfrom collections import Counter\na = np.ones(4)\n"
                         "def total(): return a.sum()\nc = Counter('abca')\ngen = (i for i in [1])\n"
                         "fh = open('out.txt', 'w')\nopen('in.txt', 'w').write('kept')")
        fork = self.server.request("POST", f"/v1/sessions/{sid}/fork")
        self.assertEqual(fork.status, 201, repr(fork))
        body = fork.json()
        self.assertValid("ForkedSession", body)
        self.addCleanup(self.server.request, "DELETE", f"/v1/sessions/{body['id']}")
        left = {e["name"]: e for e in body["not_copied"]}
        self.assertEqual(set(left), {"gen", "fh"}, body)
        self.assertEqual(left["gen"]["type"], "generator")
        self.assertIn("pickle", left["gen"]["reason"])
        r = self.run_in(body["id"], "total(), c['a'], open('in.txt').read()")
        self.assertEqual(r["result"]["data"]["text/plain"], "(4.0, 2, 'kept')")

    def test_undo(self):
        plain = self.create()
        self.run_in(plain, "x = 1")
        self.assertProblem(self.server.request("POST", f"/v1/sessions/{plain}/undo"), 409, "nothing-to-undo")
        bad = self.server.request("POST", "/v1/sessions", {"checkpoint": "yes"})
        self.assertProblem(bad, 400, "wrong-type")
        r = self.server.request("POST", "/v1/sessions", {"checkpoint": True})
        self.assertEqual(r.status, 201, repr(r))
        sid = r.json()["id"]
        self.addCleanup(self.server.request, "DELETE", f"/v1/sessions/{sid}")
        self.assertTrue(r.json()["checkpoint"])
        self.assertFalse(r.json()["can_undo"])
        self.run_in(sid, "rows = [1, 2, 3]")
        self.run_in(sid, "rows.clear()\nlog = open('log.txt', 'w')")
        undo = self.server.request("POST", f"/v1/sessions/{sid}/undo")
        self.assertEqual(undo.status, 200, repr(undo))
        self.assertValid("UndoneSession", undo.json())
        self.assertEqual(undo.json()["not_restored"], [])
        self.assertEqual(undo.json()["state"], "preserved")
        r = self.run_in(sid, "rows, 'log' in globals()")
        self.assertEqual(r["result"]["data"]["text/plain"], "([1, 2, 3], False)")
        self.assertEqual(r["session"]["state"], "preserved")

    def test_delete_while_an_execution_runs(self):
        # docs/sessions.md, "Sessions", says: "Delete: frees the process tree, the cgroup and the mounts at once." A running
        # cell must not hold the DELETE up for the rest of its time limit.
        sid = self.create()
        box = {}

        def run():
            box["r"] = self.server.request("POST", f"/v1/sessions/{sid}/execute",
                                           {"code": "import time\ntime.sleep(30)\nprint('finished')"})
            box["at"] = time.monotonic()

        t = threading.Thread(target=run)
        t.start()
        self.assertTrue(wait_until(lambda: self.server.metrics().get("execbox_running_executions") == 1, 60),
                        "the execution never started")
        time.sleep(0.5)
        t0 = time.monotonic()
        d = self.server.request("DELETE", f"/v1/sessions/{sid}")
        delete_took = time.monotonic() - t0
        t.join(timeout=90)
        self.assertEqual(d.status, 204, repr(d))
        self.assertLess(delete_took, 10, f"DELETE waited {delete_took:.1f} s for the running execution")
        r = box["r"]
        if r.status == 200:
            result = self.assertResult(r)
            self.assertNotEqual(result["status"], "ok", "the execution ran to its end after the DELETE")
            self.assertNotIn("finished", result["stdout"])
        else:
            self.assertProblem(r, r.status)
        self.assertLess(box["at"] - t0, 15, "the running execution was not stopped by the DELETE")
        self.assertProblem(self.server.request("GET", f"/v1/sessions/{sid}"), 404, "session-not-found")

    def test_state_lost_after_a_timeout(self):
        sid = self.create()
        self.run_in(sid, "y = 1")
        r = self.server.request("POST", f"/v1/sessions/{sid}/execute",
                                {"code": "while True: pass", "limits": {"timeout_seconds": 1}})
        r = self.assertResult(r, "timeout")
        self.assertEqual(r["session"]["state"], "lost", r["session"])
        self.assertTrue(r["session"].get("files_kept"), r["session"])
        r = self.run_in(sid, "'y' in globals()")
        self.assertEqual(r["result"]["data"]["text/plain"], "False")
        self.assertTrue(r["session"].get("files_kept"), r["session"])

    def test_binary_file_round_trip(self):
        sid = self.create()
        blob = bytes(range(256))
        put = self.server.request("PUT", f"/v1/sessions/{sid}/files/data/blob.bin", blob,
                                  headers={"Content-Type": "application/octet-stream"})
        self.assertEqual(put.status, 204, repr(put))
        r = self.run_in(sid, "d = open('data/blob.bin', 'rb').read()\n(len(d), d == bytes(range(256)))")
        self.assertEqual(r["result"]["data"]["text/plain"], "(256, True)")
        get = self.server.request("GET", f"/v1/sessions/{sid}/files/data/blob.bin")
        self.assertEqual(get.status, 200, repr(get))
        self.assertEqual(get.header("content-type"), "application/octet-stream")
        self.assertEqual(get.body, blob)
        # A file the code writes can be read back too.
        self.run_in(sid, "open('made.bin', 'wb').write(bytes(range(255, -1, -1)))")
        get = self.server.request("GET", f"/v1/sessions/{sid}/files/made.bin")
        self.assertEqual(get.status, 200, repr(get))
        self.assertEqual(get.body, blob[::-1])

    def test_missing_file(self):
        sid = self.create()
        self.assertProblem(self.server.request("GET", f"/v1/sessions/{sid}/files/no/such.txt"), 404,
                           "file-not-found")

    def test_planted_symlinks_are_not_followed(self):
        sid = self.create()
        self.run_in(sid, "import os\nos.symlink('/etc/passwd', 'link')\nos.symlink('/etc', 'etcdir')\n"
                         "os.symlink('/proc/self/environ', 'env')")
        for name in ("link", "etcdir/passwd", "env"):
            r = self.server.request("GET", f"/v1/sessions/{sid}/files/{name}")
            self.assertProblem(r, 404)
            self.assertNotIn(b"root:", r.body)
        # Writing through a planted directory symlink is refused, never done on the host.
        put = self.server.request("PUT", f"/v1/sessions/{sid}/files/etcdir/evil", b"x")
        self.assertIn(put.status, (404, 409), repr(put))
        self.assertProblem(put, put.status)
        self.assertFalse(os.path.exists("/etc/evil"))
        # An upload onto a planted link replaces the link rather than writing through it.
        with open("/etc/passwd", "rb") as f:
            host_passwd = f.read()
        put = self.server.request("PUT", f"/v1/sessions/{sid}/files/link", b"replaced")
        self.assertEqual(put.status, 204, repr(put))
        r = self.run_in(sid, "import os\n(os.path.islink('link'), open('link').read())")
        self.assertEqual(r["result"]["data"]["text/plain"], "(False, 'replaced')")
        self.assertEqual(self.server.request("GET", f"/v1/sessions/{sid}/files/link").body, b"replaced")
        with open("/etc/passwd", "rb") as f:
            self.assertEqual(f.read(), host_passwd)

    def test_path_traversal(self):
        sid = self.create()
        for path in ("..%2F..%2Fetc%2Fpasswd", "../../etc/passwd", "a/../../b", "%2Fetc%2Fpasswd",
                     "a%00b", "x/./y"):
            r = self.server.request("GET", f"/v1/sessions/{sid}/files/{path}")
            body = self.assertProblem(r, 400, "invalid-path")
            self.assertNotIn("root:", json.dumps(body))
            r = self.server.request("PUT", f"/v1/sessions/{sid}/files/{path}", b"data")
            self.assertProblem(r, 400, "invalid-path")

    def test_another_keys_session_does_not_exist(self):
        sid = self.create(token=KEY_A)
        self.run_in(sid, "secret = 'alpha'", token=KEY_A)
        self.server.request("PUT", f"/v1/sessions/{sid}/files/f.txt", b"alpha", token=KEY_A)
        checks = [("GET", f"/v1/sessions/{sid}", None),
                  ("POST", f"/v1/sessions/{sid}/execute", {"code": "secret"}),
                  ("POST", f"/v1/sessions/{sid}/fork", None),
                  ("POST", f"/v1/sessions/{sid}/undo", None),
                  ("GET", f"/v1/sessions/{sid}/files/f.txt", None),
                  ("PUT", f"/v1/sessions/{sid}/files/g.txt", b"bravo"),
                  ("DELETE", f"/v1/sessions/{sid}", None),
                  ("POST", "/v1/execute", {"code": "secret", "session_id": sid})]
        for method, path, body in checks:
            r = self.server.request(method, path, body, token=KEY_B)
            with self.subTest(method=method, path=path):
                b = self.assertProblem(r, 404, "session-not-found")
                self.assertNotIn("alpha", json.dumps(b))
        listing = self.server.request("GET", "/v1/sessions", token=KEY_B).json()
        self.assertNotIn(sid, [s["id"] for s in listing["sessions"]])
        # Untouched for its owner.
        r = self.run_in(sid, "secret", token=KEY_A)
        self.assertEqual(r["result"]["data"]["text/plain"], "'alpha'")
        self.assertEqual(self.server.request("GET", f"/v1/sessions/{sid}/files/f.txt", token=KEY_A).body,
                         b"alpha")
        self.assertProblem(self.server.request("GET", f"/v1/sessions/{sid}/files/g.txt", token=KEY_A), 404)

    def test_create_with_unknown_field(self):
        self.assertProblem(self.server.request("POST", "/v1/sessions", {"bogus": 1}), 400, "unknown-field")
        self.assertProblem(self.server.request("POST", "/v1/sessions", {"limits": {"gpu": 1}}), 400, "unknown-field")
        self.assertProblem(self.server.request("POST", "/v1/sessions", {"limits": {"memory_mb": "x"}}), 400,
                           "wrong-type")
        p = self.assertProblem(self.server.request("POST", "/v1/sessions", {"limits": {"disk_mb": 5000}}), 422,
                               "limit-exceeded")
        self.assertEqual(p.get("limit"), "disk_mb", p)
        self.assertEqual(p.get("maximum"), 1024, p)

    def test_creation_limits(self):
        """POST /v1/sessions {"limits": ...}: the session's own defaults for its executions;
        disk_mb is fixed for its life (another value is 422 limit-fixed, naming the limit)."""
        r = self.server.request("POST", "/v1/sessions", {"limits": {"disk_mb": 8, "memory_mb": 128}})
        self.assertEqual(r.status, 201, repr(r))
        self.assertValid("SessionInfo", r.json())
        sid = r.json()["id"]
        self.addCleanup(self.server.request, "DELETE", f"/v1/sessions/{sid}")
        ex = f"/v1/sessions/{sid}/execute"
        p = self.assertProblem(self.server.execute("x = 1", path=ex, limits={"disk_mb": 16}), 422, "limit-fixed")
        self.assertEqual(p.get("limit"), "disk_mb", p)
        self.assertIn("disk_mb", p["detail"])
        # The same through /v1/execute with session_id.
        p = self.assertProblem(self.server.execute("x = 1", session_id=sid, limits={"disk_mb": 16}), 422,
                               "limit-fixed")
        self.assertEqual(p.get("limit"), "disk_mb", p)
        # The refused execution did not run.
        r = self.assertResult(self.server.execute("'x' in globals()", path=ex), "ok")
        self.assertEqual(r["result"]["data"]["text/plain"], "False")
        self.assertEqual(r["limits"]["disk_mb"]["value"], 8, r["limits"])
        self.assertEqual(r["limits"]["memory_mb"]["value"], 128, r["limits"])
        self.assertEqual(r["limits"]["timeout_seconds"]["value"], 30, r["limits"])
        r = self.assertResult(self.server.execute("x = 1", path=ex, limits={"disk_mb": 8}), "ok")
        self.assertEqual(r["limits"]["disk_mb"]["value"], 8, r["limits"])
        r = self.assertResult(self.server.execute("x + 1", path=ex), "ok")
        self.assertEqual(r["result"]["data"]["text/plain"], "2")
        self.assertEqual(r["limits"]["disk_mb"]["value"], 8, r["limits"])
        # And the work dir really is 8 MiB: 12 MiB do not fit.
        r = self.assertResult(self.server.execute(
            "try:\n    open('big.bin', 'wb').write(b'x' * (12 << 20))\n    print('fits')\n"
            "except OSError as e:\n    print('refused', e.errno)\n", path=ex))
        self.assertIn("refused", r["stdout"], r)
        self.assertNotIn("fits", r["stdout"])

    def test_memory_is_per_execution_in_a_session(self):
        """memory_mb is set per execution (only disk_mb is fixed at creation): an execution in a
        session may ask more or less than the session's default, and the next one is back at the
        default, with the session's state kept throughout."""
        r = self.server.request("POST", "/v1/sessions", {"limits": {"memory_mb": 128}})
        self.assertEqual(r.status, 201, repr(r))
        sid = r.json()["id"]
        self.addCleanup(self.server.request, "DELETE", f"/v1/sessions/{sid}")
        ex = f"/v1/sessions/{sid}/execute"
        self.assertResult(self.server.execute("x = 1", path=ex), "ok")
        for asked, want in ((200, 200), (None, 128), (100, 100), (None, 128)):
            limits = {"limits": {"memory_mb": asked}} if asked else {}
            r = self.server.execute("x += 1\nx", path=ex, **limits)
            self.assertEqual(r.status, 200, f"memory_mb {asked} (expecting {want}): {r!r}")
            r = self.assertResult(r, "ok")
            self.assertEqual(r["limits"]["memory_mb"]["value"], want, r["limits"])
            self.assertEqual(r["session"]["state"], "preserved", r["session"])
        r = self.assertResult(self.server.execute("x", path=ex), "ok")
        self.assertEqual(r["result"]["data"]["text/plain"], "5")

    def test_non_ascii_file_names(self):
        sid = self.create()
        data = "première ligne\n".encode() + bytes(range(256))
        put = self.server.request("PUT", f"/v1/sessions/{sid}/files/r%C3%A9sum%C3%A9.txt", data)
        self.assertEqual(put.status, 204, repr(put))
        get = self.server.request("GET", f"/v1/sessions/{sid}/files/r%C3%A9sum%C3%A9.txt")
        self.assertEqual(get.status, 200, repr(get))
        self.assertEqual(get.body, data)
        r = self.run_in(sid, "import os\nd = open('résumé.txt', 'rb').read()\n(len(d), 'résumé.txt' in os.listdir('.'))")
        self.assertEqual(r["result"]["data"]["text/plain"], f"({len(data)}, True)")
        # A file the code names so comes back by that name, and can be downloaded.
        r = self.run_in(sid, "open('données.csv', 'w').write('a,b')")
        self.assertEqual([f["name"] for f in r["files"]], ["données.csv"], r["files"])
        get = self.server.request("GET", f"/v1/sessions/{sid}/files/donn%C3%A9es.csv")
        self.assertEqual(get.status, 200, repr(get))
        self.assertEqual(get.body, b"a,b")


# ---- OpenAPI, health, metrics, audit ------------------------------------------------------------


class ServiceTest(SharedCase):
    def test_openapi_document(self):
        r = self.server.request("GET", "/v1/openapi.json")
        self.assertEqual(r.status, 200, repr(r))
        self.assertTrue(r.header("content-type").startswith("application/json"))
        doc = r.json()
        self.assertTrue(doc["openapi"].startswith("3.1"), doc["openapi"])
        for path in ("/v1/execute", "/v1/check", "/v1/sessions", "/v1/sessions/{id}", "/v1/sessions/{id}/execute",
                     "/v1/sessions/{id}/fork", "/v1/sessions/{id}/undo", "/v1/sessions/{id}/snapshot", "/v1/sessions/import",
                     "/v1/sessions/{id}/files/{path}", "/livez", "/readyz", "/metrics"):
            self.assertIn(path, doc["paths"])
        for name in ("Result", "SessionInfo", "SessionList", "Problem", "CheckResult", "Livez", "Readyz"):
            self.assertIn(name, doc["components"]["schemas"])
        for name, schema in doc["components"]["schemas"].items():
            with self.subTest(schema=name):
                jsonschema.Draft202012Validator.check_schema(schema)
        # The Limits schema carries this server's defaults and maxima (here the built-in ones).
        limits = doc["components"]["schemas"]["Limits"]["properties"]
        self.assertEqual({k: (v["default"], v["maximum"]) for k, v in limits.items()},
                         {"timeout_seconds": (30, 300), "cpu_seconds": (30, 300), "memory_mb": (256, 4096),
                          "max_processes": (64, 1024), "output_bytes": (1048576, 16777216),
                          "disk_mb": (64, 1024)}, limits)
        # The Result's limits are named as the request's.
        result_limits = doc["components"]["schemas"]["Result"]["properties"]["limits"]
        self.assertEqual(set(result_limits["properties"]), set(limits), result_limits)

    def test_packages_are_what_the_sandbox_can_import(self):
        r = self.server.request("GET", "/v1/packages")
        self.assertEqual(r.status, 200, repr(r))
        self.assertValid("Packages", r.json())
        packages = {p["name"].lower(): p for p in r.json()["packages"]}
        self.assertTrue(r.json()["python"].startswith("3."), r.json()["python"])
        for name, module in (("numpy", "numpy"), ("pandas", "pandas"), ("scikit-learn", "sklearn"),
                             ("pillow", "PIL"), ("matplotlib", "matplotlib")):
            self.assertIn(name, packages)
            self.assertIn(module, packages[name]["modules"], packages[name])
            self.assertRegex(packages[name]["version"], r"^\d")
        # Every module listed imports in the sandbox (a few, to keep this quick).
        code = "import importlib\n[importlib.import_module(m).__name__ for m in ('numpy', 'sklearn', 'PIL')]"
        self.assertResult(self.server.execute(code), "ok")
        self.assertProblem(self.server.request("GET", "/v1/packages", auth=False), 401, "unauthorized")
        self.assertProblem(self.server.request("POST", "/v1/packages", {}), 405, "method-not-allowed")
        # `execbox packages` lists the same, from a cold jail.
        out = subprocess.run([harness.execbox_binary(), "packages", "--json"], capture_output=True, timeout=120)
        self.assertEqual(out.returncode, 0, out.stderr.decode(errors="replace"))
        self.assertEqual(json.loads(out.stdout)["packages"], r.json()["packages"])

    def test_openapi_needs_auth(self):
        self.assertProblem(self.server.request("GET", "/v1/openapi.json", auth=False), 401, "unauthorized")

    def test_livez(self):
        r = self.server.request("GET", "/livez", auth=False)
        self.assertEqual(r.status, 200, repr(r))
        self.assertEqual(r.json(), {"status": "ok"})
        self.assertValid("Livez", r.json())

    def test_readyz(self):
        r = wait_until(lambda: (lambda x: x if x.status == 200 else None)(
            self.server.request("GET", "/readyz", auth=False)), 60, 0.5)
        self.assertIsNotNone(r, "/readyz never became 200")
        self.assertValid("Readyz", r.json())
        self.assertEqual(r.json()["status"], "ready")
        self.assertGreater(r.json()["warm_workers"], 0)

    def test_metrics(self):
        self.assertResult(self.server.execute("print(1)"), "ok")
        self.server.request("GET", "/v1/nothing-here")  # something rejected
        self.server.request("POST", "/v1/execute", b"{", headers={"Content-Type": "application/json"})
        r = self.server.request("GET", "/metrics")
        self.assertEqual(r.status, 200, repr(r))
        self.assertTrue(r.header("content-type").startswith("text/plain"), r.header("content-type"))
        text = r.body.decode()
        for needle in ('execbox_executions_total{transport="http",route="execute",status="ok"}',
                       'execbox_execution_duration_seconds_bucket{transport="http",route="execute",le="300"}',
                       'execbox_execution_duration_seconds_bucket{transport="http",route="execute",le="+Inf"}',
                       'execbox_execution_duration_seconds_count{transport="http",route="execute"}',
                       "execbox_queue_depth ", "execbox_warm_workers ", "execbox_sessions ",
                       "execbox_running_executions ", "execbox_rejected_requests_total",
                       "# TYPE execbox_executions_total counter",
                       "# TYPE execbox_execution_duration_seconds histogram"):
            self.assertIn(needle, text)
        m = self.server.metrics()
        self.assertGreaterEqual(m['execbox_executions_total{transport="http",route="execute",status="ok"}'], 1)
        self.assertGreaterEqual(m.get('execbox_rejected_requests_total{transport="http",reason="bad_request"}', 0), 1)
        # Every execution and refusal is labelled with its transport.
        for name in m:
            if name.startswith(("execbox_executions_total{", "execbox_execution_duration_seconds",
                                "execbox_rejected_requests_total{")):
                self.assertRegex(name, r'\{transport="(http|mcp_http)",', name)
        self.assertGreater(m["execbox_warm_workers"], 0)
        # print(1) took a child of the lean zygote, or of a full one while the lean was starting.
        served = sum(m.get(f'execbox_warm_children_served_total{{zygote="{kind}"}}', 0) for kind in ("full", "lean"))
        self.assertGreaterEqual(served, 1, m)
        self.assertIn('execbox_zygote_memory_peak_bytes{zygote="lean"}', m)
        # The warm child that ran print(1) is ended in the background, and its CPU counted by phase.
        ended = lambda: self.server.metrics().get("execbox_warm_children_ended_total", 0) >= 1
        self.assertTrue(wait_until(ended, 30), self.server.metrics())
        m = self.server.metrics()
        for phase in ("zygote", "setup", "execution"):
            self.assertGreater(m[f'execbox_warm_cpu_seconds_total{{phase="{phase}"}}'], 0, phase)
        self.assertGreaterEqual(m['execbox_warm_cpu_seconds_total{phase="exit"}'], 0)
        # Every line is a comment or "name{labels} value".
        for line in text.splitlines():
            self.assertRegex(line, re.compile(r'^(#.*|[a-z_]+(\{[a-z_]+="[^"]*"(,[a-z_]+="[^"]*")*\})? '
                                              r'[-+0-9.eInfNa]+)$'))

    def test_metrics_needs_auth(self):
        self.assertProblem(self.server.request("GET", "/metrics", auth=False), 401)

    def test_audit_log(self):
        code = f"# audit {os.urandom(8).hex()}\nprint('audited')\n"
        self.assertResult(self.server.execute(code, token=KEY_B), "ok")
        want = sha256_hex(code)

        def find():
            try:
                with open(AUDIT_LOG) as f:
                    lines = [json.loads(l) for l in f if l.strip()]
            except FileNotFoundError:
                return None
            return [l for l in lines if l.get("code_sha256") == want]

        found = wait_until(find, 10)
        self.assertTrue(found, "no audit line with the code's SHA-256")
        self.assertEqual(len(found), 1, found)
        line = found[0]
        self.assertNotIn("code", line)
        self.assertEqual(list(line), ["time", "key_id", "transport", "session_id", "route", "code_sha256",
                                      "code_bytes", "status", "usage", "peer"], line)
        self.assertRegex(line["time"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
        self.assertEqual(line["key_id"], "env-2")
        self.assertEqual(line["transport"], "http")
        self.assertIsNone(line["session_id"])
        self.assertEqual(line["route"], "execute")
        self.assertEqual(line["status"], "ok")
        self.assertEqual(line["code_bytes"], len(code.encode()))
        self.assertIsInstance(line["usage"], dict)
        self.assertIn("wall_ms", line["usage"])
        self.assertTrue(line["peer"].startswith("127.0.0.1"), line)
        with open(AUDIT_LOG) as f:
            self.assertNotIn(KEY_B, f.read())
        # A session's execution names the session.
        r = self.server.request("POST", "/v1/sessions", {})
        sid = r.json()["id"]
        self.addCleanup(self.server.request, "DELETE", f"/v1/sessions/{sid}")
        code = f"# session audit {os.urandom(8).hex()}\n1 + 1\n"
        self.assertResult(self.server.execute(code, path=f"/v1/sessions/{sid}/execute"), "ok")
        want = sha256_hex(code)
        found = wait_until(find, 10)
        self.assertEqual(len(found or []), 1, found)
        self.assertEqual(found[0]["route"], "session")
        self.assertEqual(found[0]["session_id"], sid)
        self.assertEqual(found[0]["key_id"], "env-1")
        self.assertEqual(found[0]["transport"], "http")
        self.assertEqual(found[0]["status"], "ok")
        self.assertNotIn("code", found[0])
        # Creating and closing the session are audited too, and a refusal says why.
        self.assertEqual(self.server.request("DELETE", f"/v1/sessions/{sid}").status, 204)
        self.assertProblem(self.server.execute("1", path=f"/v1/sessions/{sid}/execute"), 404, "session-not-found")

        def session_lines():
            lines = [l for l in read_audit(AUDIT_LOG) if l.get("session_id") == sid]
            return lines if len(lines) >= 4 else None

        lines = wait_until(session_lines, 10) or []
        self.assertEqual([(l["route"], l["status"]) for l in lines],
                         [("session_create", "created"), ("session", "ok"), ("session_close", "closed"),
                          ("session", "refused:session-not-found")], lines)
        self.assertTrue(all(l["transport"] == "http" and l["key_id"] == "env-1" for l in lines), lines)
        # Every line parses, one per execution.
        with open(AUDIT_LOG) as f:
            for l in f:
                json.loads(l)


# ---- Bad input while another client is served ---------------------------------------------------


class BadInputTest(SharedCase):
    """Each bad request gets its status and a problem body while a second client (the other key)
    keeps getting 200s from /v1/execute."""

    def setUp(self):
        self.stop = threading.Event()
        self.ok = 0
        self.failures = []
        self.client = threading.Thread(target=self.keep_executing, daemon=True)
        self.client.start()
        # The other client is being served before the first bad request.
        self.assertTrue(wait_until(lambda: self.ok > 0 or self.failures, 120), "the parallel client got nothing")

    def keep_executing(self):
        n = 0
        while not self.stop.is_set():
            n += 1
            try:
                r = self.server.execute(f"print({n} * 2)", token=KEY_B)
                if r.status != 200 or r.json().get("stdout") != f"{n * 2}\n":
                    self.failures.append(repr(r))
                else:
                    self.ok += 1
            except Exception as e:  # noqa: BLE001 - any failure of the parallel client counts
                self.failures.append(f"{type(e).__name__}: {e}")
            time.sleep(0.1)

    def tearDown(self):
        # One more success after the last bad request, then stop.
        seen = self.ok
        wait_until(lambda: self.ok > seen or self.failures, 120)
        self.stop.set()
        self.client.join(timeout=150)
        self.assertEqual(self.failures, [], "the parallel client failed")
        self.assertGreater(self.ok, seen, "the parallel client was not served after the bad requests")

    def post(self, body, path="/v1/execute", content_type="application/json", **kw):
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
        return self.server.request("POST", path, body, headers={"Content-Type": content_type}, **kw)

    def test_bad_json_bodies(self):
        cases = [
            ("malformed JSON", b'{"code": "print(1)"', 400, "malformed-json"),
            ("trailing garbage", b'{"code": "1"} x', 400, "malformed-json"),
            ("empty body", b"", 400, "malformed-json"),
            ("not an object", b'["print(1)"]', 400, "invalid-body"),
            ("invalid UTF-8", b'{"code": "print(\'\xff\xfe\')"}', 400, "invalid-utf8"),
            ("overlong UTF-8", b'{"code": "\xc0\xaf"}', 400, "invalid-utf8"),
            ("deep nesting", b'{"code": "1", "x": ' + b"[" * 200 + b"]" * 200 + b"}", 400, "too-deep"),
            ("very deep nesting", b"[" * 100000 + b"]" * 100000, 400, "too-deep"),
            ("duplicate key", b'{"code": "1", "code": "2"}', 400, "duplicate-key"),
            ("too many values", b'{"code": "1", "x": [' + b"0," * 150000 + b'0]}', 413, "too-many-values"),
            ("missing code", {}, 400, "missing-field"),
            ("missing code, other fields", {"stdin": "x"}, 400, "missing-field"),
            ("code not a string", {"code": 5}, 400, "wrong-type"),
            ("code null", {"code": None}, 400, "wrong-type"),
            ("stdin not a string", {"code": "1", "stdin": ["a"]}, 400, "wrong-type"),
            ("limits not an object", {"code": "1", "limits": 5}, 400, "wrong-type"),
            ("limit a string", {"code": "1", "limits": {"timeout_seconds": "10"}}, 400, "wrong-type"),
            ("integer limit a fraction", {"code": "1", "limits": {"memory_mb": 100.5}}, 400, "wrong-type"),
            ("negative limit", {"code": "1", "limits": {"timeout_seconds": -1}}, 400, "invalid-value"),
            ("zero limit", {"code": "1", "limits": {"memory_mb": 0}}, 400, "invalid-value"),
            ("files not an array", {"code": "1", "files": {}}, 400, "wrong-type"),
            ("unknown field", {"code": "1", "bogus": True}, 400, "unknown-field"),
            ("unknown limit", {"code": "1", "limits": {"gpu": 1}}, 400, "unknown-field"),
            ("unknown file field", {"code": "1", "files": [{"name": "a", "content_base64": "", "mode": 7}]},
             400, "unknown-field"),
            ("unknown policy", {"code": "1", "policy": "lenient"}, 400, "unknown-policy"),
            ("NUL in a file name", {"code": "1", "files": [{"name": "a\u0000b", "content_base64": "eA=="}]},
             400, "invalid-path"),
            ("traversal in a file name", {"code": "1", "files": [{"name": "../../etc/x", "content_base64": "eA=="}]},
             400, "invalid-path"),
            ("traversal in the middle", {"code": "1", "files": [{"name": "a/../../x", "content_base64": "eA=="}]},
             400, "invalid-path"),
            ("absolute file name", {"code": "1", "files": [{"name": "/etc/passwd", "content_base64": "eA=="}]},
             400, "invalid-path"),
            ("empty file name", {"code": "1", "files": [{"name": "", "content_base64": "eA=="}]},
             400, "invalid-path"),
            ("duplicate file", {"code": "1", "files": [{"name": "a", "content_base64": ""},
                                                      {"name": "a", "content_base64": ""}]},
             400, "duplicate-file"),
            ("invalid base64", {"code": "1", "files": [{"name": "a", "content_base64": "!!!"}]},
             400, "invalid-base64"),
            ("timeout above the maximum", {"code": "1", "limits": {"timeout_seconds": 301}}, 422, "limit-exceeded"),
            ("memory above the maximum", {"code": "1", "limits": {"memory_mb": 1 << 20}}, 422, "limit-exceeded"),
            ("processes above the maximum", {"code": "1", "limits": {"max_processes": 100000}}, 422,
             "limit-exceeded"),
            ("output above the maximum", {"code": "1", "limits": {"output_bytes": 1 << 60}}, 422, "limit-exceeded"),
            ("huge integer limit", {"code": "1", "limits": {"output_bytes": 10 ** 30}}, 422, "limit-exceeded"),
        ]
        for name, body, status, slug in cases:
            with self.subTest(name):
                r = self.post(body)
                p = self.assertProblem(r, status, slug)
                if slug == "limit-exceeded":
                    self.assertIn("limit", p)
                    self.assertIn("maximum", p)

    def test_unknown_session(self):
        self.assertProblem(self.post({"code": "1"}, path="/v1/sessions/no-such-session/execute"), 404,
                           "session-not-found")
        self.assertProblem(self.post({"code": "1", "session_id": "no-such-session"}), 404, "session-not-found")
        self.assertProblem(self.server.request("GET", "/v1/sessions/no-such-session"), 404, "session-not-found")
        self.assertProblem(self.server.request("DELETE", "/v1/sessions/no-such-session"), 404, "session-not-found")
        self.assertProblem(self.server.request("GET", "/v1/sessions/no-such-session/files/a"), 404,
                           "session-not-found")

    def test_auth(self):
        # RFC 6750 3.1: no credentials is a bare challenge; a malformed or unknown token is
        # invalid_token. Both 401; 403 is only for a disallowed Origin on /mcp.
        r = self.server.request("POST", "/v1/execute", {"code": "print(1)"}, auth=False)
        self.assertProblem(r, 401, "unauthorized")
        self.assertEqual(r.header("www-authenticate"), 'Bearer realm="execbox"', r.headers)
        r = self.server.request("POST", "/v1/execute", {"code": "print(1)"},
                                headers={"Authorization": "Basic dXNlcjpwYXNz"}, auth=False)
        self.assertProblem(r, 401, "unauthorized")
        self.assertTrue(r.header("www-authenticate").startswith(
            'Bearer realm="execbox", error="invalid_token", error_description="'), r.headers)
        r = self.server.request("POST", "/v1/execute", {"code": "print(1)"}, token="not-a-key-0123456789abcdef")
        self.assertProblem(r, 401, "unauthorized")
        self.assertTrue(r.header("www-authenticate").startswith(
            'Bearer realm="execbox", error="invalid_token", error_description="'), r.headers)
        for path in ("/v1/sessions", "/metrics", "/v1/openapi.json", "/v1/sessions/x/files/y"):
            with self.subTest(path=path):
                r = self.server.request("GET", path, token="wrong-wrong-wrong-wrong")
                self.assertProblem(r, 401, "unauthorized")
                self.assertIn('error="invalid_token"', r.header("www-authenticate") or "", r.headers)
                r = self.server.request("GET", path, auth=False)
                self.assertProblem(r, 401, "unauthorized")
                self.assertEqual(r.header("www-authenticate"), 'Bearer realm="execbox"', r.headers)

    def test_method_route_and_media_type(self):
        r = self.server.request("GET", "/v1/execute")
        self.assertProblem(r, 405, "method-not-allowed")
        self.assertIn("POST", r.header("allow") or "", r.headers)
        self.assertProblem(self.server.request("DELETE", "/v1/openapi.json"), 405, "method-not-allowed")
        self.assertProblem(self.server.request("POST", "/livez", auth=False), 405, "method-not-allowed")
        self.assertProblem(self.server.request("PATCH", "/v1/sessions"), 405, "method-not-allowed")
        self.assertProblem(self.server.request("GET", "/v1/nothing"), 404, "not-found")
        self.assertProblem(self.server.request("GET", "/"), 404, "not-found")
        self.assertProblem(self.server.request("GET", "/v2/execute"), 404, "not-found")
        self.assertProblem(self.post(b"print(1)", content_type="text/plain"), 415, "unsupported-media-type")
        self.assertProblem(self.post(b"code=1", content_type="application/x-www-form-urlencoded"), 415,
                           "unsupported-media-type")
        self.assertProblem(self.post(b'{"code": "1"}', path="/v1/check", content_type="text/plain"), 415,
                           "unsupported-media-type")
        self.assertProblem(self.server.request("GET", "/v1/%zz"), 400, "malformed-path")

    def test_body_over_the_limit(self):
        # Content-Length above max_body_bytes (48 MiB by default): refused before the body is read.
        head = (b"POST /v1/execute HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + KEY_A.encode() +
                b"\r\nContent-Type: application/json\r\nContent-Length: 60000000\r\n\r\n")
        data = self.server.raw(head + b'{"code": "' + b"a" * 1000)
        self.assertTrue(data.startswith(b"HTTP/1.1 413"), data[:300])
        self.assertProblem(parse_raw_response(data), 413, "body-too-large")

    def test_header_over_the_limit(self):
        head = (b"GET /livez HTTP/1.1\r\nHost: x\r\nX-Filler: " + b"a" * (20 << 10) + b"\r\n\r\n")
        data = self.server.raw(head)
        self.assertTrue(data.startswith(b"HTTP/1.1 431"), data[:300])
        self.assertProblem(parse_raw_response(data), 431, "header-too-large")
        # Through http.client as well.
        r = self.server.request("GET", "/v1/sessions", headers={"X-Filler": "b" * (20 << 10)})
        self.assertProblem(r, 431, "header-too-large")

    def test_malformed_http(self):
        data = self.server.raw(b"NOT HTTP AT ALL\r\n\r\n")
        self.assertTrue(data.startswith(b"HTTP/1.1 400"), data[:300])
        self.assertProblem(parse_raw_response(data), 400)

    def test_bad_file_requests(self):
        r = self.server.request("POST", "/v1/sessions", {})
        self.assertEqual(r.status, 201, repr(r))
        sid = r.json()["id"]
        try:
            self.assertProblem(self.server.request("PUT", f"/v1/sessions/{sid}/files/a%00b", b"x"), 400,
                               "invalid-path")
            self.assertProblem(self.server.request("PUT", f"/v1/sessions/{sid}/files/..%2Fx", b"x"), 400,
                               "invalid-path")
            self.assertProblem(self.server.request("PUT", f"/v1/sessions/{sid}/files/%ff", b"x"), 400,
                               "invalid-path")
            self.assertProblem(self.server.request("POST", f"/v1/sessions/{sid}/files/a", b"x"), 405,
                               "method-not-allowed")
            self.assertProblem(self.server.request("GET", f"/v1/sessions/{sid}/execute"), 405,
                               "method-not-allowed")
            self.assertProblem(self.server.request("GET", f"/v1/sessions/{sid}/nothing"), 404, "not-found")
            # The body of a session's execute is checked as /v1/execute's, but session_id is no field.
            ex = f"/v1/sessions/{sid}/execute"
            self.assertProblem(self.post({"code": "1", "session_id": sid}, path=ex), 400, "unknown-field")
            self.assertProblem(self.post(b'{"code": ', path=ex), 400, "malformed-json")
            self.assertProblem(self.post({"code": "1", "limits": {"timeout_seconds": 1000}}, path=ex), 422,
                               "limit-exceeded")
            self.assertProblem(self.post(b'{"code": "1"}', path=ex, content_type="text/plain"), 415,
                               "unsupported-media-type")
        finally:
            self.server.request("DELETE", f"/v1/sessions/{sid}")


if __name__ == "__main__":
    unittest.main()
