"""`execbox serve` run as the unprivileged user execbox-test (where the host has that user and
setpriv): the server starts (cold jails where this user has no cgroups for warm workers), serves,
and the jail holds against hostile code with the same structured results as under root."""
import os
import pwd
import unittest

from harness import TEST_USER, ApiTestCase, Server, test_user_available

USER = TEST_USER
unprivileged_available = test_user_available


class UnprivilegedServer(Server):
    def command(self):
        # The VM stage (tests/vm) starts the server alone in a cgroup delegated to the user.
        return os.environ.get("EXECBOX_TEST_DELEGATE", "").split() + ["setpriv", f"--reuid={USER}", f"--regid={USER}", "--clear-groups", "--inh-caps=-all", "--"] + \
            super().command()


@unittest.skipUnless(unprivileged_available(), f"needs root, setpriv and the user {USER}")
class UnprivilegedServeTest(ApiTestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = UnprivilegedServer(name="unprivileged").start()

    @classmethod
    def tearDownClass(cls):
        cls.server.signal()
        code = cls.server.wait_exit()
        assert code == 0, cls.server.stderr_text()

    def test_serves_as_the_unprivileged_user(self):
        with open(f"/proc/{self.server.proc.pid}/status") as f:
            uid_line = next(l for l in f if l.startswith("Uid:"))
        self.assertEqual(int(uid_line.split()[1]), pwd.getpwnam(USER).pw_uid)
        self.assertEqual(self.server.request("GET", "/readyz", auth=False).status, 200)
        result = self.assertResult(self.server.execute("print(6 * 7)"), "ok")
        self.assertEqual(result["stdout"], "42\n")

    def test_host_secrets_and_network_stay_out_of_reach(self):
        code = (
            "import os, socket\n"
            "seen = []\n"
            "for path in ('/etc/shadow', '/root'):\n"
            "    seen.append((path, os.path.exists(path)))\n"
            "seen.append(('home', sorted(os.listdir('/home'))))\n"
            "try:\n"
            "    socket.create_connection(('1.1.1.1', 53), timeout=2)\n"
            "    seen.append('net')\n"
            "except OSError:\n"
            "    pass\n"
            "print(seen)\n"
        )
        result = self.assertResult(self.server.execute(code), "ok")
        self.assertNotIn("True", result["stdout"])
        # /home holds the sandbox's own home only, none of the host's.
        self.assertIn("('home', ['user'])", result["stdout"])
        self.assertNotIn("net", result["stdout"].replace("'/", ""))

    def test_limits_hold(self):
        result = self.assertResult(self.server.execute("while True: pass", limits={"timeout_seconds": 2}))
        self.assertEqual(result["status"], "timeout")
        result = self.assertResult(self.server.execute("x = bytearray(1 << 31)", limits={"memory_mb": 128}))
        self.assertIn(result["status"], ("memory_limit", "error"))
        if result["status"] == "error":
            self.assertEqual(result["error"]["ename"], "MemoryError")

    def test_sessions_say_what_they_need(self):
        r = self.server.request("POST", "/v1/sessions", body={})
        # EXECBOX_TEST_CGROUP: the VM stage's delegated cgroup v2 group, where sessions must work.
        tier = os.environ.get("EXECBOX_TEST_CGROUP")
        if r.status != 201 and not tier:
            self.assertProblem(r, 409, "sessions-unavailable")
            return
        self.assertEqual(r.status, 201, r.body[:600])
        session = r.json()["id"]
        result = self.assertResult(self.server.request(
            "POST", f"/v1/sessions/{session}/execute", body={"code": "x = 6 * 7\nx"}), "ok")
        self.assertEqual(result["result"]["data"]["text/plain"], "42")
        if tier:
            self.assertEqual(result["limits"]["memory_mb"]["enforced_by"], tier, result["limits"])
            self.assertTrue(result["limits"]["cpu_seconds"]["enforced_by"].startswith(tier), result["limits"])
            one_shot = self.assertResult(self.server.execute("print(1)"), "ok")
            self.assertEqual(one_shot["usage"]["engine"], "warm", one_shot["usage"])
            self.assertEqual(one_shot["limits"]["memory_mb"]["enforced_by"], tier, one_shot["limits"])
        self.assertEqual(self.server.request("DELETE", f"/v1/sessions/{session}").status, 204)


if __name__ == "__main__":
    unittest.main()
