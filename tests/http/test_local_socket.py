"""`execbox serve --unix PATH` and `execbox run` through it: the Unix socket serves the API with
clients known by their kernel credentials, `execbox run` uses a local server's warm pool when one
takes the request and a cold jail of its own otherwise (usage.engine says which), and neither side
trusts a socket or a client it should not."""
import http.client
import json
import os
import shutil
import socket
import stat
import subprocess
import tempfile
import unittest

from harness import KEY_A, REQUEST_TIMEOUT, TEST_USER, ApiTestCase, Server, execbox_binary, test_user_available

USER = TEST_USER


class UnixConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout=REQUEST_TIMEOUT):
        super().__init__("localhost", timeout=timeout)
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.path)


def unix_request(path, method, target, body=None, headers=None):
    conn = UnixConnection(path)
    try:
        h = dict(headers or {})
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            h["Content-Type"] = "application/json"
        conn.request(method, target, body=data, headers=h)
        r = conn.getresponse()
        return r.status, r.read()
    finally:
        conn.close()


def run(args, socket_path, user=None, input_text=None):
    """`execbox run ARGS` with EXECBOX_SOCKET=socket_path; (exit status, stdout, stderr)."""
    env = dict(os.environ)
    env["EXECBOX_SOCKET"] = socket_path
    cmd = [execbox_binary(), "run"] + args
    if user:
        cmd = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", "--"] + cmd
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=REQUEST_TIMEOUT,
                       input=input_text)
    return p.returncode, p.stdout, p.stderr


class LocalSocketTest(ApiTestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="execbox-sock-")
        cls.path = os.path.join(cls.dir, "execbox.sock")
        cls.server = Server(flags=["--unix", cls.path], name="unix").start()

    @classmethod
    def tearDownClass(cls):
        code = cls.server.stop()
        assert code == 0, cls.server.stderr_text()
        gone = not os.path.exists(cls.path)
        shutil.rmtree(cls.dir, ignore_errors=True)
        assert gone, "the socket file outlived the server"

    def test_the_socket_is_owner_and_group_only(self):
        mode = os.lstat(self.path).st_mode
        self.assertTrue(stat.S_ISSOCK(mode))
        self.assertEqual(stat.S_IMODE(mode), 0o660)

    def test_a_local_user_needs_no_token_and_owns_its_sessions(self):
        status, body = unix_request(self.path, "POST", "/v1/execute", {"code": "6 * 7"})
        self.assertEqual(status, 200, body)
        result = json.loads(body)
        self.assertValid("Result", result)
        self.assertEqual(result["result"]["data"]["text/plain"], "42")
        # A session made over the socket is this uid's: a key over TCP does not reach it.
        status, body = unix_request(self.path, "POST", "/v1/sessions", {})
        self.assertEqual(status, 201, body)
        sid = json.loads(body)["id"]
        status, _ = unix_request(self.path, "GET", f"/v1/sessions/{sid}")
        self.assertEqual(status, 200)
        self.assertIn(self.server.request("GET", f"/v1/sessions/{sid}").status, (403, 404))
        status, _ = unix_request(self.path, "DELETE", f"/v1/sessions/{sid}")
        self.assertIn(status, (200, 204))
        # A bearer token on the socket is that key's, as over TCP; a wrong one is refused.
        status, _ = unix_request(self.path, "POST", "/v1/execute", {"code": "1"},
                                 {"Authorization": f"Bearer {KEY_A}"})
        self.assertEqual(status, 200)
        status, _ = unix_request(self.path, "POST", "/v1/execute", {"code": "1"},
                                 {"Authorization": "Bearer wrong-token-0000000000000000"})
        self.assertEqual(status, 401)

    @unittest.skipUnless(test_user_available(), f"needs root, setpriv and the user {USER}")
    def test_a_user_the_server_does_not_serve_is_refused(self):
        # Even where the file's mode lets them connect, the kernel's word on who they are decides.
        os.chmod(self.dir, 0o755)
        os.chmod(self.path, 0o666)
        try:
            code, out, err = run(["--server", "always", "-c", "print(1)"], self.path, user=USER)
            self.assertEqual(code, 2, err)
            self.assertIn("serves the server's own user", err)
            self.assertEqual(out, "")
            # auto: the same user then runs cold, on its own.
            code, out, err = run(["--json", "-c", "print(1)"], self.path, user=USER)
            self.assertEqual(code, 0, err)
            self.assertEqual(json.loads(out)["usage"]["engine"], "cold")
        finally:
            os.chmod(self.path, 0o660)
            os.chmod(self.dir, 0o700)

    def test_run_uses_the_warm_pool_and_prints_what_a_cold_run_prints(self):
        code, out, err = run(["--json", "-c", "print(1)\n2 + 3"], self.path)
        self.assertEqual(code, 0, err)
        result = json.loads(out)
        self.assertEqual(result["usage"]["engine"], "warm")
        self.assertEqual(result["stdout"], "1\n")
        # The command line's limits, not the server's defaults: the run is the same either way.
        self.assertEqual(result["limits"]["memory_mb"]["value"], 256)
        script = os.path.join(self.dir, "script.py")
        with open(script, "w") as f:
            f.write("import sys\nprint('out')\nprint('err', file=sys.stderr)\nraise ValueError('bad')\n")
        warm = run([script], self.path)
        cold = run(["--server", "never", script], self.path)
        self.assertEqual(warm[0], 1)
        self.assertEqual(warm, cold)
        self.assertIn(f'File "{script}", line 4', warm[2])
        # stdin, input files and --keep-files travel too.
        keep = os.path.join(self.dir, "kept")
        data = os.path.join(self.dir, "in.txt")
        with open(data, "w") as f:
            f.write("hello")
        stdin_file = os.path.join(self.dir, "stdin.txt")
        with open(stdin_file, "w") as f:
            f.write("from stdin")
        code, out, err = run(["--stdin", stdin_file, "--file", f"in.txt={data}", "--keep-files", keep, "-c",
                              "import sys; print(sys.stdin.read(), open('in.txt').read()); open('o.txt','w').write('x')"],
                             self.path)
        self.assertEqual(code, 0, err)
        self.assertIn("from stdin hello", out)
        with open(os.path.join(keep, "o.txt")) as f:
            self.assertEqual(f.read(), "x")
        # Limits as asked: a timeout is a timeout, exit 124.
        code, out, err = run(["--timeout", "1", "-c", "while True: pass"], self.path)
        self.assertEqual(code, 124, err)
        self.assertIn("[execbox] timeout", err)

    def test_doctor_names_the_server_run_will_use(self):
        env = dict(os.environ, EXECBOX_SOCKET=self.path)
        p = subprocess.run([execbox_binary(), "doctor"], env=env, capture_output=True, text=True,
                           timeout=REQUEST_TIMEOUT)
        self.assertRegex(p.stdout, r"(?m)^ok +local server \(fast execbox run and mcp\): .*" + self.path)
        env["EXECBOX_SOCKET"] = os.path.join(self.dir, "nobody-here.sock")
        p = subprocess.run([execbox_binary(), "doctor"], env=env, capture_output=True, text=True,
                           timeout=REQUEST_TIMEOUT)
        self.assertRegex(p.stdout, r"(?m)^warn +local server .*none answers")
        self.assertIn("execbox serve --unix PATH", p.stdout)

    def test_beyond_the_servers_limits_it_runs_cold_or_says_why(self):
        code, out, err = run(["--json", "--memory", "100G", "-c", "print(2)"], self.path)
        self.assertEqual(code, 0, err)
        self.assertEqual(json.loads(out)["usage"]["engine"], "cold")
        code, out, err = run(["--server", "always", "--memory", "100G", "-c", "print(2)"], self.path)
        self.assertEqual(code, 2)
        self.assertIn("above the allowed maximum", err)
        self.assertEqual(out, "")

    def test_without_a_server_it_runs_cold(self):
        missing = os.path.join(self.dir, "nobody-here.sock")
        code, out, err = run(["--json", "-c", "print(3)"], missing)
        self.assertEqual(code, 0, err)
        self.assertEqual(json.loads(out)["usage"]["engine"], "cold")
        code, out, err = run(["--server", "always", "-c", "print(3)"], missing)
        self.assertEqual(code, 70)
        self.assertIn("no server on", err)

    def test_a_live_socket_is_not_taken_over(self):
        other = Server(flags=["--unix", self.path], name="second")
        other.spawn()
        other.wait_exit(timeout=120)
        self.assertNotEqual(other.returncode, 0)
        self.assertIn("already listening on", other.stderr_text())
        status, _ = unix_request(self.path, "POST", "/v1/execute", {"code": "1"})
        self.assertEqual(status, 200)


class StaleSocketTest(unittest.TestCase):
    def test_a_stale_socket_is_replaced_and_a_file_is_not(self):
        d = tempfile.mkdtemp(prefix="execbox-stale-")
        try:
            path = os.path.join(d, "s.sock")
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.bind(path)
            s.close()  # left behind, as by a server that was killed
            server = Server(flags=["--unix", path, "--no-pool"], name="stale").start()
            try:
                status, _ = unix_request(path, "POST", "/v1/execute", {"code": "1"})
                self.assertEqual(status, 200)
            finally:
                self.assertEqual(server.stop(), 0)
            plain = os.path.join(d, "plain")
            with open(plain, "w") as f:
                f.write("keep me")
            server = Server(flags=["--unix", plain, "--no-pool"], name="file")
            server.spawn()
            server.wait_exit(timeout=120)
            self.assertNotEqual(server.returncode, 0)
            self.assertIn("is not a socket", server.stderr_text())
            with open(plain) as f:
                self.assertEqual(f.read(), "keep me")
        finally:
            shutil.rmtree(d, ignore_errors=True)


@unittest.skipUnless(test_user_available(), f"needs root, setpriv and the user {USER}")
class ForeignServerTest(unittest.TestCase):
    def test_a_socket_served_by_another_user_is_not_used(self):
        # A server of another user, in a directory that user does not own: `execbox run` (root
        # here) does not send it code, and runs cold instead.
        d = tempfile.mkdtemp(prefix="execbox-foreign-")
        os.chmod(d, 0o777)
        path = os.path.join(d, "planted.sock")
        cmd_prefix = ["setpriv", f"--reuid={USER}", f"--regid={USER}", "--clear-groups", "--inh-caps=-all", "--"]

        class Foreign(Server):
            def command(self):
                return cmd_prefix + super().command()

        server = Foreign(flags=["--unix", path, "--no-pool"], name="foreign").start()
        try:
            os.chmod(path, 0o666)
            code, out, err = run(["--server", "always", "-c", "print(1)"], path)
            self.assertEqual(code, 70)
            self.assertIn("not using", err)
            code, out, err = run(["--json", "-c", "print(1)"], path)
            self.assertEqual(code, 0, err)
            self.assertEqual(json.loads(out)["usage"]["engine"], "cold")
        finally:
            self.assertEqual(server.stop(), 0)
            shutil.rmtree(d, ignore_errors=True)
