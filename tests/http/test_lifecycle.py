"""Starting and stopping `execbox serve`: the generated token of a server without keys, the
refusal to listen beyond loopback without a key, graceful shutdown on SIGTERM (a running
execution finishes, new connections are refused, exit 0, no cgroup or process left behind) and
the end of the grace period (the execution is stopped and told why)."""
import socket
import threading
import time
import unittest

from harness import ApiTestCase, Server, wait_until


def refused(server):
    """True when a new TCP connection to the server is refused (or closed at once, unanswered)."""
    try:
        s = socket.create_connection((server.host, server.port), timeout=5)
    except (ConnectionRefusedError, OSError):
        return True
    try:
        s.settimeout(5)
        s.sendall(b"GET /livez HTTP/1.1\r\nHost: x\r\n\r\n")
        return s.recv(4096) == b""
    except OSError:
        return True
    finally:
        s.close()


class RefuseWithoutKeyTest(unittest.TestCase):
    def test_no_key_beyond_loopback_refuses_to_start(self):
        server = Server(name="refuse", keys=(), listen="0.0.0.0:0")
        server.spawn()
        code = server.wait_exit(timeout=60)
        self.assertEqual(code, 64, server.stderr_text())
        self.assertIn("refusing to listen", server.stderr_text())
        self.assertIn("EXECBOX_API_KEYS", server.stderr_text())

    def test_short_key_is_refused(self):
        server = Server(name="short-key", keys=("short",))
        server.spawn()
        code = server.wait_exit(timeout=60)
        self.assertEqual(code, 64, server.stderr_text())
        self.assertIn("shorter than 16", server.stderr_text())
        self.assertNotIn("short\n", server.stderr_text())


class GracefulShutdownTest(ApiTestCase):
    """A server without keys (loopback, generated token), then stopped with SIGTERM while an
    execution runs."""

    @classmethod
    def setUpClass(cls):
        cls.server = Server(name="graceful", keys=()).start()

    @classmethod
    def tearDownClass(cls):
        cls.server.kill()

    def test_1_generated_token(self):
        self.assertIsNotNone(self.server.token, self.server.stderr_text())
        self.assertGreaterEqual(len(self.server.token), 32)
        self.assertIn("no API key configured", self.server.stderr_text())
        r = self.assertResult(self.server.execute("print('token ok')"), "ok")
        self.assertEqual(r["stdout"], "token ok\n")
        r = self.server.request("GET", "/metrics", token="x" * 43)
        self.assertProblem(r, 401, "unauthorized")
        self.assertIn('error="invalid_token"', r.header("www-authenticate") or "", r.headers)
        r = self.server.request("GET", "/metrics", auth=False)
        self.assertProblem(r, 401, "unauthorized")
        self.assertEqual(r.header("www-authenticate"), 'Bearer realm="execbox"', r.headers)

    def test_2_sigterm_lets_the_running_execution_finish(self):
        server = self.server
        self.assertTrue(wait_until(lambda: server.request("GET", "/readyz", auth=False).status == 200, 60))
        # A session too: its process must be gone after exit as well.
        s = server.request("POST", "/v1/sessions", {})
        self.assertEqual(s.status, 201, repr(s))
        self.assertResult(server.execute("z = 1", path=f"/v1/sessions/{s.json()['id']}/execute"), "ok")

        box = {}

        def run():
            try:
                box["response"] = server.execute("import time\ntime.sleep(3)\nprint('finished')")
            except Exception as e:  # noqa: BLE001
                box["response"] = e
            box["at"] = time.monotonic()

        t = threading.Thread(target=run)
        t.start()
        self.assertTrue(wait_until(lambda: server.metrics().get("execbox_running_executions") == 1, 60),
                        "the execution never started")
        # An idle keep-alive connection must not hold the shutdown up.
        idle = server.connection()
        idle.request("GET", "/livez")
        idle_resp = idle.getresponse()
        self.assertEqual(idle_resp.status, 200)
        idle_resp.read()
        self.addCleanup(idle.close)
        server.track()
        sent = time.monotonic()
        server.signal()
        # New connections are refused while the execution finishes.
        self.assertTrue(wait_until(lambda: refused(server), 10, 0.1), "new connections still accepted")
        refused_at = time.monotonic()
        t.join(timeout=120)
        self.assertFalse(t.is_alive())
        self.assertNotIsInstance(box["response"], Exception, box.get("response"))
        r = self.assertResult(box["response"], "ok")
        self.assertEqual(r["stdout"], "finished\n")
        code = server.wait_exit()
        self.assertEqual(code, 0, server.stderr_text()[-4000:])
        self.assertLess(time.monotonic() - box["at"], 30, "the exit waited long after the last execution")
        self.assertLess(refused_at, box["at"] + 1, "connections were refused only after the execution ended")
        self.assertIn("SIGTERM", server.stderr_text())
        self.assertLess(time.monotonic() - sent, 60)
        # Nothing left behind: the server's children and its cgroups are gone.
        self.assertGreater(len(server.tracked), 1, "no child process of the server was seen")
        wait_until(lambda: not server.leftover_processes(), 10)
        self.assertEqual(server.leftover_processes(), [], "processes of the server outlived it")
        self.assertEqual(server.leftover_cgroups(), [], "cgroups of the server outlived it")


class GraceExpiresTest(ApiTestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Server(name="grace", flags=["--shutdown-grace", "1"]).start()

    @classmethod
    def tearDownClass(cls):
        cls.server.kill()

    def test_execution_past_the_grace_is_killed(self):
        server = self.server
        box = {}

        def run():
            try:
                box["response"] = server.execute("import time\nprint('sleeping', flush=True)\ntime.sleep(30)\n"
                                                 "print('woke')")
            except Exception as e:  # noqa: BLE001
                box["response"] = e
            box["at"] = time.monotonic()

        t = threading.Thread(target=run)
        t.start()
        self.assertTrue(wait_until(lambda: server.metrics().get("execbox_running_executions") == 1, 60),
                        "the execution never started")
        time.sleep(0.5)
        server.track()
        sent = time.monotonic()
        server.signal()
        t.join(timeout=60)
        self.assertFalse(t.is_alive(), "no answer within 60 s of SIGTERM")
        self.assertNotIsInstance(box["response"], Exception, box.get("response"))
        r = self.assertResult(box["response"], "killed")
        self.assertIn("shutting down", r["error"]["evalue"])
        self.assertNotIn("woke", r["stdout"])
        self.assertLess(box["at"] - sent, 15, "the execution was not stopped soon after the grace period")
        code = server.wait_exit()
        self.assertEqual(code, 0, server.stderr_text()[-4000:])
        self.assertLess(time.monotonic() - sent, 45)
        wait_until(lambda: not server.leftover_processes(), 10)
        self.assertEqual(server.leftover_processes(), [], "processes of the server outlived it")
        self.assertEqual(server.leftover_cgroups(), [], "cgroups of the server outlived it")


if __name__ == "__main__":
    unittest.main()
