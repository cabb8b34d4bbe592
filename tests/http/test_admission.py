"""Admission on a server with --max-running 1 --max-queue 1: a third execution gets 429 at once
with Retry-After, and the two admitted ones still finish (nothing lost). The same server writes
its audit log with --audit-code."""
import json
import os
import threading
import time
import unittest

from harness import KEY_A, ApiTestCase, Server, read_audit, sha256_hex, wait_until


class AdmissionTest(ApiTestCase):
    @classmethod
    def setUpClass(cls):
        server = Server(name="admission")
        cls.audit_log = os.path.join(server.tmp, "audit.jsonl")
        server.flags = ["--max-running", "1", "--max-queue", "1", "--audit-log", cls.audit_log, "--audit-code"]
        cls.server = server.start()

    @classmethod
    def tearDownClass(cls):
        code = cls.server.stop()
        if code != 0:
            raise AssertionError(f"exit status {code}; stderr:\n{cls.server.stderr_text()[-4000:]}")

    def test_queue_full_is_429(self):
        results = [None, None]

        def run(i):
            try:
                results[i] = self.server.execute(f"import time\ntime.sleep(5)\nprint('done {i}')")
            except Exception as e:  # noqa: BLE001
                results[i] = e

        threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
        threads[0].start()
        self.assertTrue(wait_until(lambda: self.server.metrics().get("execbox_running_executions") == 1, 60),
                        "the first execution never started running")
        threads[1].start()
        self.assertTrue(wait_until(lambda: self.server.metrics().get("execbox_queue_depth") == 1, 60),
                        "the second execution never queued")
        rejected_before = self.server.metrics().get('execbox_rejected_requests_total{transport="http",reason="queue_full"}', 0)

        t0 = time.monotonic()
        r = self.server.execute("print('third')")
        elapsed = time.monotonic() - t0
        body = self.assertProblem(r, 429, "queue-full")
        retry = r.header("retry-after")
        self.assertIsNotNone(retry, r.headers)
        self.assertTrue(retry.isdigit() and int(retry) >= 1, retry)
        self.assertIn("queued", body["detail"])
        # At once: not after waiting for a slot (the first execution sleeps 5 s, the second waits).
        self.assertTrue(threads[1].is_alive(), "the queued execution ended before the third was refused")
        self.assertLess(elapsed, 10)

        for t in threads:
            t.join(timeout=120)
        for i, res in enumerate(results):
            self.assertNotIsInstance(res, Exception, res)
            r = self.assertResult(res, "ok")
            self.assertEqual(r["stdout"], f"done {i}\n")
        m = self.server.metrics()
        self.assertEqual(m.get('execbox_rejected_requests_total{transport="http",reason="queue_full"}', 0), rejected_before + 1)
        self.assertEqual(m["execbox_running_executions"], 0)
        self.assertEqual(m["execbox_queue_depth"], 0)
        # The refusal is audited with its reason.
        third = sha256_hex("print('third')")
        found = wait_until(lambda: [l for l in read_audit(self.audit_log) if l["code_sha256"] == third], 10)
        self.assertEqual([(l["transport"], l["route"], l["status"]) for l in found or []],
                         [("http", "execute", "refused:queue-full")], found)
        # Served again once the slots are free.
        self.assertResult(self.server.execute("print('after')"), "ok")

    def test_check_takes_a_slot_too(self):
        """/v1/check starts a cold jail: a full server refuses it like an execution."""
        threads = [threading.Thread(target=self.server.execute, args=("import time\ntime.sleep(4)\n",))
                   for _ in range(2)]
        threads[0].start()
        self.assertTrue(wait_until(lambda: self.server.metrics().get("execbox_running_executions") == 1, 60))
        threads[1].start()
        self.assertTrue(wait_until(lambda: self.server.metrics().get("execbox_queue_depth") == 1, 60))
        r = self.server.request("POST", "/v1/check", {"code": "x = (1,"})
        self.assertProblem(r, 429, "queue-full")
        for t in threads:
            t.join(timeout=120)
        r = self.server.request("POST", "/v1/check", {"code": "x = (1,"})
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json()["status"], "syntax_error")

    def test_sse_queue_full_is_429_too(self):
        results = []

        def run():
            results.append(self.server.execute("import time\ntime.sleep(4)\n"))

        threads = [threading.Thread(target=run) for _ in range(2)]
        threads[0].start()
        self.assertTrue(wait_until(lambda: self.server.metrics().get("execbox_running_executions") == 1, 60))
        threads[1].start()
        self.assertTrue(wait_until(lambda: self.server.metrics().get("execbox_queue_depth") == 1, 60))
        r = self.server.request("POST", "/v1/execute", {"code": "print(3)"},
                                headers={"Accept": "text/event-stream"})
        self.assertProblem(r, 429, "queue-full")
        self.assertIsNotNone(r.header("retry-after"))
        for t in threads:
            t.join(timeout=120)
        for res in results:
            self.assertResult(res, "ok")

    def test_audit_code(self):
        code = f"# {os.urandom(8).hex()}\nprint('with code')\n"
        self.assertResult(self.server.execute(code), "ok")
        want = sha256_hex(code)

        def find():
            with open(self.audit_log) as f:
                return [json.loads(l) for l in f if l.strip() and json.loads(l).get("code_sha256") == want]

        found = wait_until(find, 10)
        self.assertEqual(len(found), 1, found)
        self.assertEqual(found[0]["code"], code)
        self.assertEqual(list(found[0]), ["time", "key_id", "transport", "session_id", "route", "code_sha256",
                                          "code_bytes", "status", "usage", "peer", "code"], found[0])
        self.assertEqual(found[0]["key_id"], "env-1")
        self.assertEqual(found[0]["transport"], "http")
        self.assertEqual(found[0]["route"], "execute")
        self.assertEqual(found[0]["status"], "ok")
        with open(self.audit_log) as f:
            self.assertNotIn(KEY_A, f.read())

    def test_the_sweeps_closes_and_pauses_at_expiry_are_audited_as_the_servers(self):
        made = {}
        for auto_pause in (False, True):
            r = self.server.request("POST", "/sandboxes", {"templateID": "base", "timeout": 1, "autoPause": auto_pause})
            self.assertEqual(r.status, 201, repr(r))
            made[auto_pause] = r.json()["sandboxID"]

        def swept():
            lines = [l for l in read_audit(self.audit_log) if l["transport"] == "server"]
            found = {l["session_id"]: l for l in lines if l["session_id"] in made.values()}
            return found if len(found) == 2 else None

        found = wait_until(swept, 30)  # the sweep runs every 5 s
        self.assertTrue(found, read_audit(self.audit_log)[-5:])
        closed, paused = found[made[False]], found[made[True]]
        self.assertEqual((closed["route"], closed["status"], closed["key_id"]), ("session_close", "expired", "env-1"))
        self.assertEqual((paused["route"], paused["status"], paused["key_id"]),
                         ("session_pause", "paused_at_expiry", "env-1"))
        self.assertEqual(self.server.request("DELETE", f"/sandboxes/{made[True]}").status, 204)

    def test_a_bash_contexts_kernel_and_its_code_are_audited(self):
        r = self.server.request("POST", "/sandboxes", {"templateID": "base"})
        self.assertEqual(r.status, 201, repr(r))
        sid, token = r.json()["sandboxID"], r.json()["envdAccessToken"]
        code = f"echo {os.urandom(8).hex()}"
        sandbox = {"E2b-Sandbox-Id": sid, "E2b-Sandbox-Port": "49999", "X-Access-Token": token}
        r = self.server.request("POST", "/execute", {"code": code, "language": "bash"}, headers=sandbox, auth=False)
        self.assertEqual(r.status, 200, repr(r))
        lines = [json.loads(l) for l in r.body.decode().splitlines() if l.strip()]
        self.assertIn({"type": "stdout", "text": code[5:] + "\n"},
                      [{k: v for k, v in l.items() if k != "timestamp"} for l in lines], lines)
        # A variable name that is not one is refused before anything runs.
        r = self.server.request("POST", "/execute", {"code": "echo", "language": "bash", "env_vars": {"A;B": "x"}},
                                headers=sandbox, auth=False)
        self.assertEqual(r.status, 400, repr(r))
        self.assertIn("A;B", r.json()["message"])
        given = wait_until(lambda: [l for l in read_audit(self.audit_log)
                                    if l["route"] == "process_code" and l.get("code") == code], 10)
        self.assertEqual(len(given), 1, given)
        self.assertEqual((given[0]["transport"], given[0]["session_id"]), ("e2b", sid))
        # Audited once, as it ended, and counted as an execution.
        self.assertEqual(given[0]["status"], "done", given[0])
        self.assertGreaterEqual(
            self.server.metrics().get('execbox_executions_total{transport="e2b",route="process_code",status="done"}', 0), 1)
        started = [l for l in read_audit(self.audit_log)
                   if l["route"] == "process_start" and l["session_id"] == sid]
        self.assertEqual([l.get("code") for l in started], ["bash --noprofile --norc"], started)
        self.assertEqual(self.server.request("DELETE", f"/sandboxes/{sid}").status, 204)

    def test_z_sigterm_with_one_running_and_one_queued(self):
        # Last (the server stops): the running execution finishes; the queued one is told why.
        results = {}

        def run(i):
            results[i] = self.server.execute(f"import time\ntime.sleep(3)\nprint('done {i}')")

        threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
        threads[0].start()
        self.assertTrue(wait_until(lambda: self.server.metrics().get("execbox_running_executions") == 1, 60))
        threads[1].start()
        self.assertTrue(wait_until(lambda: self.server.metrics().get("execbox_queue_depth") == 1, 60))
        self.server.signal()
        for t in threads:
            t.join(timeout=120)
        self.assertEqual(self.assertResult(results[0], "ok")["stdout"], "done 0\n")
        self.assertProblem(results[1], 503, "shutting-down")
        self.assertEqual(self.server.wait_exit(), 0, self.server.stderr_text()[-4000:])


if __name__ == "__main__":
    unittest.main()
