"""`execbox serve` as a service: systemd's readiness protocol (READY=1, RELOADING=1 with
MONOTONIC_USEC, STOPPING=1 on $NOTIFY_SOCKET), keys read again on SIGHUP (a bad file keeps the
keys in force), and an instance name (--instance, EXECBOX_INSTANCE) that ends every session and
MCP session id and is sent in Execbox-Instance, so a router can pin sessions
(docs/deploy.md, "Several instances behind nginx")."""
import hashlib
import os
import signal
import socket
import tempfile
import time
import unittest

from harness import KEY_A, KEY_B, ApiTestCase, McpClient, Server


def key_config(*tokens, extra=""):
    keys = "".join(f'[[keys]]\nid = "k{i}"\nsha256 = "{hashlib.sha256(t.encode()).hexdigest()}"\n'
                   for i, t in enumerate(tokens))
    return extra + keys


class NotifySocket:
    """A datagram socket standing in for systemd's notification socket."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="execbox-notify-")
        self.path = os.path.join(self.dir, "notify")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.path)

    def next(self, timeout=120):
        """The next message as {name: value}."""
        self.sock.settimeout(timeout)
        data = self.sock.recv(4096).decode()
        return dict(line.split("=", 1) for line in data.split("\n") if "=" in line)

    def close(self):
        self.sock.close()
        os.unlink(self.path)
        os.rmdir(self.dir)


class NotifyingServer(Server):
    def __init__(self, notify, **kwargs):
        super().__init__(**kwargs)
        self.notify = notify

    def environment(self):
        env = super().environment()
        env["NOTIFY_SOCKET"] = self.notify.path
        return env


class ReadinessAndReloadTest(ApiTestCase):
    """A server whose keys come from its config file only, under a fake service manager."""

    def setUp(self):
        self.notify = NotifySocket()
        self.addCleanup(self.notify.close)
        self.server = NotifyingServer(self.notify, name="reload", keys=(), config=key_config(KEY_A),
                                      flags=["--no-pool"], token=KEY_A)
        self.addCleanup(self.server.kill)
        self.server.start()

    def write_config(self, text):
        with open(self.server.config_path, "w") as f:
            f.write(text)

    def authorized(self, token):
        return self.server.request("GET", "/metrics", token=token).status

    def reload(self):
        self.server.signal(signal.SIGHUP)
        reloading = self.notify.next()
        self.assertEqual(reloading.get("RELOADING"), "1", reloading)
        usec = int(reloading["MONOTONIC_USEC"])
        self.assertLessEqual(usec, time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000)
        self.assertEqual(self.notify.next().get("READY"), "1")

    def test_ready_reload_and_stopping(self):
        ready = self.notify.next()
        self.assertEqual(ready.get("READY"), "1", ready)
        self.assertIn("listening on http://127.0.0.1:", ready.get("STATUS", ""))
        self.assertEqual(self.authorized(KEY_A), 200)
        self.assertEqual(self.authorized(KEY_B), 401)

        # SIGHUP: the file's keys now, the old key refused from its next request.
        self.write_config(key_config(KEY_B))
        self.reload()
        self.assertEqual(self.authorized(KEY_B), 200)
        self.assertEqual(self.authorized(KEY_A), 401)
        self.assertIsNotNone(self.server.wait_line(r"SIGHUP: 1 key\(s\) from", 30), self.server.stderr_text())

        # A file that no longer reads keeps the keys in force, and says why.
        self.write_config('[[keys]]\nid = "broken"\nsha256 = "not hex"\n')
        self.reload()
        self.assertEqual(self.authorized(KEY_B), 200)
        self.assertIsNotNone(self.server.wait_line(r"SIGHUP: keeping the keys in force: .*sha256", 30),
                             self.server.stderr_text())
        # So does one with no key at all (this server has no generated token to fall back to).
        self.write_config("")
        self.reload()
        self.assertEqual(self.authorized(KEY_B), 200)

        self.server.signal(signal.SIGTERM)
        self.assertEqual(self.notify.next().get("STOPPING"), "1")
        self.assertEqual(self.server.wait_exit(), 0, self.server.stderr_text())


class InstanceTest(ApiTestCase):
    """A warm server named "alpha" among several."""

    @classmethod
    def setUpClass(cls):
        cls.server = Server(name="instance", flags=["--instance", "alpha"]).start()

    @classmethod
    def tearDownClass(cls):
        code = cls.server.stop()
        if code != 0:
            raise AssertionError(f"exit status {code}; stderr:\n{cls.server.stderr_text()[-4000:]}")

    def test_session_ids_and_responses_name_the_instance(self):
        r = self.server.request("POST", "/v1/sessions", {})
        self.assertEqual(r.status, 201, r)
        sid = r.json()["id"]
        self.assertRegex(sid, r"^s_[0-9a-f]{32}\.alpha$")
        self.assertEqual(r.header("execbox-instance"), "alpha")
        run = self.server.execute("x = 6 * 7\nx", path=f"/v1/sessions/{sid}/execute")
        self.assertEqual(run.status, 200, run)
        self.assertEqual(run.json()["result"]["data"]["text/plain"], "42")
        self.assertEqual(self.server.request("GET", "/livez", auth=False).header("execbox-instance"), "alpha")
        self.assertEqual(self.server.request("DELETE", f"/v1/sessions/{sid}").status, 204)

    def test_a_session_of_another_instance_says_where_it_lives(self):
        r = self.server.request("GET", "/v1/sessions/s_" + "0" * 32 + ".beta")
        body = self.assertProblem(r, 404, "session-not-found")
        self.assertIn("instance 'beta'", body["detail"])
        self.assertIn("this is instance 'alpha'", body["detail"])
        # An id of this instance that does not exist is the plain answer.
        r = self.server.request("GET", "/v1/sessions/s_" + "0" * 32 + ".alpha")
        body = self.assertProblem(r, 404, "session-not-found")
        self.assertNotIn("instance", body["detail"])

    def test_mcp_session_ids_name_the_instance(self):
        client = McpClient(self.server, KEY_A)
        client.initialize()
        self.addCleanup(client.delete)
        self.assertRegex(client.session_id, r"^[0-9a-f]{32}\.alpha$")
        result = client.call("execute_python", {"code": "1 + 1"})
        self.assertFalse(result.get("isError"), result)


class PidOneServer(Server):
    """`execbox serve` as pid 1 of a pid namespace, as a container's entry point is."""

    def command(self):
        return ["unshare", "--pid", "--fork", "--mount-proc", "--kill-child=SIGKILL"] + super().command()

    def signal(self, sig=signal.SIGTERM):
        self.track()
        with open(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children") as f:
            child = int(f.read().split()[0])
        os.kill(child, sig)


@unittest.skipUnless(os.geteuid() == 0, "a pid namespace of its own needs root")
class AsPidOneTest(ApiTestCase):
    """A container runs execbox as its pid 1. The jail's init, cloned from one of the server's
    threads, once waited forever for glibc's "every thread changes its ids" broadcast to reach
    a thread whose id (1) was its own pid in the new namespace: every execution timed out."""

    def test_cold_and_warm_executions(self):
        for flags in (["--no-pool"], ["--workers", "1"]):
            server = PidOneServer(name="pid-one", flags=flags)
            server.start()
            try:
                r = server.execute("import os\nprint(os.getpid())\n6 * 7", limits={"timeout_seconds": 20})
                self.assertEqual(r.status, 200, r)
                body = r.json()
                self.assertEqual(body["status"], "ok", body)
                self.assertEqual(body["result"]["data"]["text/plain"], "42")
                self.assertEqual(body["usage"]["engine"], "cold" if flags == ["--no-pool"] else "warm", body)
            finally:
                self.assertEqual(server.stop(), 0, server.stderr_text())


class InstanceNameTest(unittest.TestCase):
    def test_bad_names_stop_the_server_with_the_rule(self):
        for flags, env in ((["--instance", "Alpha_1"], None), ([], "-alpha"),
                           ([], "a" * 64)):
            server = Server(name="bad-instance", flags=["--no-pool"] + flags)
            if env is not None:
                base = server.environment

                def environment(base=base, env=env):
                    e = base()
                    e["EXECBOX_INSTANCE"] = env
                    return e
                server.environment = environment
            server.spawn()
            code = server.wait_exit(timeout=60)
            self.assertEqual(code, 64, server.stderr_text())
            self.assertIn("expected 1-63 of a-z, 0-9 and '-'", server.stderr_text())

    def test_the_environment_names_the_instance(self):
        server = Server(name="env-instance", flags=["--no-pool"])
        base = server.environment
        server.environment = lambda: {**base(), "EXECBOX_INSTANCE": "execbox-2"}
        server.start()
        try:
            self.assertEqual(server.request("GET", "/livez", auth=False).header("execbox-instance"), "execbox-2")
            self.assertIsNotNone(server.wait_line(r"execbox serve: instance execbox-2$", 10))
        finally:
            self.assertEqual(server.stop(), 0, server.stderr_text())


if __name__ == "__main__":
    unittest.main()
