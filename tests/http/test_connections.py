"""Connection handling on a server tuned by a --config file (a 2 s header deadline, a 1 MiB body
limit) that runs without a warm pool (--no-pool): a slow-loris client is cut off while another is
served, bodies over the limit get 413, and a cold server is ready, executes, and has no sessions."""
import json
import socket
import threading
import time
import unittest

from harness import KEY_A, ApiTestCase, Server, parse_raw_response, sha256_hex, wait_until

# Two keys from the config file ([[keys]], stored as SHA-256), besides EXECBOX_API_KEYS.
KEY_SINGLE = "test-key-single-0123456789abcdef"
KEY_SLOW = "test-key-slow-0123456789abcdef"
MAX_CONNECTIONS = 6
DEFAULT_MEMORY_MB = 200

CONFIG = f"""
[http]
header_timeout_seconds = 2
body_timeout_seconds = 5
max_body_bytes = 1048576
max_connections = {MAX_CONNECTIONS}

[limits.default]
memory_mb = {DEFAULT_MEMORY_MB}

[[keys]]
id = "single"
sha256 = "{sha256_hex(KEY_SINGLE)}"
max_concurrent = 1

[[keys]]
id = "slow"
sha256 = "{sha256_hex(KEY_SLOW)}"
rate_per_second = 0.2
burst = 1
"""


class ConnectionTest(ApiTestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Server(name="connections", config=CONFIG, flags=["--no-pool"]).start()

    @classmethod
    def tearDownClass(cls):
        code = cls.server.stop()
        if code != 0:
            raise AssertionError(f"exit status {code}; stderr:\n{cls.server.stderr_text()[-4000:]}")

    def test_slow_loris_is_cut_off(self):
        served = []
        failures = []
        stop = threading.Event()

        executed = []

        def execute():
            try:
                executed.append(self.server.execute("print('served')"))
            except Exception as e:  # noqa: BLE001
                failures.append(f"{type(e).__name__}: {e}")

        def other_client():
            while not stop.is_set():
                try:
                    r = self.server.request("GET", "/livez", auth=False, timeout=30)
                    if r.status == 200:
                        served.append(time.monotonic())
                    else:
                        failures.append(repr(r))
                except Exception as e:  # noqa: BLE001
                    failures.append(f"{type(e).__name__}: {e}")
                time.sleep(0.3)

        t = threading.Thread(target=other_client, daemon=True)
        t.start()
        # An execution while the slow client trickles.
        e = threading.Thread(target=execute, daemon=True)
        e.start()
        s = socket.create_connection((self.server.host, self.server.port), timeout=30)
        header = b"POST /v1/execute HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + KEY_A.encode() + b"\r\n"
        t0 = time.monotonic()
        closed_after = None
        got = None
        try:
            for i in range(len(header)):
                if time.monotonic() - t0 > 30:
                    break
                try:
                    s.sendall(header[i:i + 1])
                except OSError:
                    closed_after = time.monotonic() - t0
                    break
                # Closed yet? (a read that returns b"" or fails)
                s.settimeout(1.0)
                try:
                    got = s.recv(4096)
                except socket.timeout:
                    continue
                except OSError:
                    got = b""
                closed_after = time.monotonic() - t0
                break
        finally:
            s.close()
        e.join(timeout=120)
        stop.set()
        t.join(timeout=60)
        self.assertIsNotNone(closed_after, "the slow client was never disconnected")
        self.assertLess(closed_after, 10, "the slow client was disconnected too late")
        self.assertEqual(got, b"", "the slow client should be closed on without an answer")
        self.assertGreaterEqual(closed_after, 1, "disconnected before the header deadline")
        self.assertEqual(failures, [])
        self.assertTrue(any(x < t0 + closed_after for x in served), "the other client was not served meanwhile")
        self.assertEqual(self.assertResult(executed[0], "ok")["stdout"], "served\n")
        m = self.server.metrics()
        self.assertGreaterEqual(m.get('execbox_connections_dropped_total{reason="header_timeout"}', 0), 1)

    def test_idle_connection_without_a_byte_is_closed(self):
        s = socket.create_connection((self.server.host, self.server.port), timeout=30)
        t0 = time.monotonic()
        try:
            data = s.recv(4096)
        except ConnectionResetError:
            data = b""
        finally:
            s.close()
        self.assertEqual(data, b"")
        self.assertLess(time.monotonic() - t0, 10)

    def test_body_over_the_limit(self):
        # The whole 2 MiB body is sent (the server may answer and close before it has all of it).
        body = json.dumps({"code": "#" + "a" * (2 << 20)}).encode()
        head = (b"POST /v1/execute HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + KEY_A.encode() +
                b"\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body))
        data = self.server.raw(head + body)
        self.assertTrue(data.startswith(b"HTTP/1.1 413"), data[:300])
        self.assertProblem(parse_raw_response(data), 413, "body-too-large")
        # A body just under the limit is read and handled.
        body = json.dumps({"code": "x = 1 #" + "a" * ((1 << 20) - 100)}).encode()
        self.assertLessEqual(len(body), 1 << 20)
        r = self.server.request("POST", "/v1/execute", body, headers={"Content-Type": "application/json"})
        self.assertEqual(self.assertResult(r)["status"], "ok")

    def test_chunked_body_over_the_limit(self):
        chunk = b"a" * 65536
        head = (b"POST /v1/execute HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + KEY_A.encode() +
                b"\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
        s = socket.create_connection((self.server.host, self.server.port), timeout=30)
        data = b""
        try:
            s.sendall(head + b"%x\r\n" % 10 + b'{"code": "' + b"\r\n")
            try:
                for _ in range(40):  # 2.5 MiB, more than the limit
                    s.sendall(b"%x\r\n" % len(chunk) + chunk + b"\r\n")
            except OSError:
                pass  # the server answered and closed while we were still sending
            while True:
                try:
                    b = s.recv(65536)
                except ConnectionResetError:
                    break
                if not b:
                    break
                data += b
        finally:
            s.close()
        self.assertTrue(data.startswith(b"HTTP/1.1 413"), data[:300])
        self.assertProblem(parse_raw_response(data), 413, "body-too-large")

    def test_slow_body_is_cut_off(self):
        body = json.dumps({"code": "print(1)"}).encode()
        s = socket.create_connection((self.server.host, self.server.port), timeout=30)
        t0 = time.monotonic()
        closed_after = None
        try:
            s.sendall(b"POST /v1/execute HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + KEY_A.encode() +
                      b"\r\nContent-Type: application/json\r\nContent-Length: " + str(len(body)).encode() +
                      b"\r\n\r\n" + body[:3])
            s.settimeout(30)
            try:
                s.recv(4096)
            except OSError:
                pass
            closed_after = time.monotonic() - t0
        finally:
            s.close()
        self.assertLess(closed_after, 15, "a stalled body was not cut off after body_timeout_seconds = 5")

    def test_connection_limit(self):
        socks = []
        answers = []
        try:
            for _ in range(MAX_CONNECTIONS + 4):
                socks.append(socket.create_connection((self.server.host, self.server.port), timeout=10))
            # A refused connection gets its 503 and is closed at once; an accepted one sends
            # nothing and is closed by the 2 s header deadline: read each to its end.
            for s in socks:
                s.settimeout(20)
                data = b""
                try:
                    while True:
                        b = s.recv(65536)
                        if not b:
                            break
                        data += b
                except (socket.timeout, ConnectionResetError):
                    pass
                answers.append(data)
        finally:
            for s in socks:
                s.close()
        refused = [a for a in answers if a.startswith(b"HTTP/1.1 503")]
        self.assertGreaterEqual(len(refused), 4, answers)
        self.assertLessEqual(len(refused), 4 + 2, "fewer connections accepted than max_connections")
        r = parse_raw_response(refused[0])
        self.assertProblem(r, 503, "too-many-connections")
        self.assertIsNotNone(r.header("retry-after"))
        # Served again once they are closed.
        self.assertTrue(wait_until(lambda: self.server.request("GET", "/livez", auth=False).status == 200, 20))
        m = self.server.metrics()
        self.assertGreaterEqual(m.get('execbox_connections_dropped_total{reason="connection_limit"}', 0), 4)

    def test_key_rate_limit(self):
        r = self.assertResult(self.server.execute("print('first')", token=KEY_SLOW), "ok")
        r = self.server.execute("print('second')", token=KEY_SLOW)
        self.assertProblem(r, 429, "rate-limited")
        retry = r.header("retry-after")
        self.assertTrue(retry and retry.isdigit() and int(retry) >= 1, r.headers)
        # Other keys are not affected.
        self.assertResult(self.server.execute("print('other')"), "ok")

    def test_key_concurrency(self):
        box = {}
        t = threading.Thread(target=lambda: box.setdefault(
            "r", self.server.execute("import time\ntime.sleep(4)\nprint('slept')", token=KEY_SINGLE)))
        t.start()
        self.assertTrue(wait_until(lambda: self.server.metrics().get("execbox_running_executions") == 1, 60))
        r = self.server.execute("print('second')", token=KEY_SINGLE)
        self.assertProblem(r, 429, "key-concurrency")
        self.assertIsNotNone(r.header("retry-after"))
        t.join(timeout=120)
        self.assertEqual(self.assertResult(box["r"], "ok")["stdout"], "slept\n")
        self.assertResult(self.server.execute("print('again')", token=KEY_SINGLE), "ok")

    def test_pipelined_requests(self):
        req = b"GET /livez HTTP/1.1\r\nHost: x\r\n\r\n"
        last = b"GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        data = self.server.raw(req + req + last)
        self.assertEqual(data.count(b"HTTP/1.1 200"), 3, data)
        self.assertEqual(data.count(b'{"status":"ok"}'), 2, data)
        self.assertIn(b'"ready"', data)

    def test_head_and_query(self):
        r = self.server.request("HEAD", "/livez", auth=False)
        self.assertEqual(r.status, 200)
        self.assertEqual(r.body, b"")
        r = self.server.request("GET", "/livez?verbose=1", auth=False)
        self.assertEqual(r.status, 200)
        self.assertEqual(r.json(), {"status": "ok"})

    def test_expect_100_continue(self):
        body = json.dumps({"code": "print('continued')"}).encode()
        s = socket.create_connection((self.server.host, self.server.port), timeout=60)
        try:
            s.sendall(b"POST /v1/execute HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + KEY_A.encode() +
                      b"\r\nContent-Type: application/json\r\nExpect: 100-continue\r\nConnection: close\r\n"
                      b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n")
            first = s.recv(4096)
            self.assertTrue(first.startswith(b"HTTP/1.1 100"), first)
            s.sendall(body)
            data = first.split(b"\r\n\r\n", 1)[1]
            while True:
                b = s.recv(65536)
                if not b:
                    break
                data += b
        finally:
            s.close()
        r = parse_raw_response(data)
        self.assertEqual(self.assertResult(r, "ok")["stdout"], "continued\n")

    def test_keep_alive(self):
        conn = self.server.connection()
        try:
            for i in range(3):
                conn.request("GET", "/livez")
                r = conn.getresponse()
                self.assertEqual(r.status, 200)
                r.read()
            conn.request("GET", "/v1/openapi.json", headers=self.server.auth())
            r = conn.getresponse()
            self.assertEqual(r.status, 200)
            json.loads(r.read())
        finally:
            conn.close()

    def test_openapi_carries_the_configured_limits(self):
        """GET /v1/openapi.json on a server started with memory_mb = 200 under [limits.default]
        says 200: the document describes the running server, not the built-in defaults."""
        r = self.server.request("GET", "/v1/openapi.json")
        self.assertEqual(r.status, 200, repr(r))
        limits = r.json()["components"]["schemas"]["Limits"]["properties"]
        self.assertEqual(limits["memory_mb"]["default"], 200, limits["memory_mb"])
        self.assertEqual(limits["memory_mb"]["maximum"], 4096, limits["memory_mb"])
        self.assertEqual(limits["timeout_seconds"]["default"], 30, limits["timeout_seconds"])
        # A request naming no limit runs with it.
        res = self.assertResult(self.server.execute("1"), "ok")
        self.assertEqual(res["limits"]["memory_mb"]["value"], 200, res["limits"])

    def test_cold_server(self):
        r = self.server.request("GET", "/readyz", auth=False)
        self.assertEqual(r.status, 200, repr(r))
        self.assertValid("Readyz", r.json())
        self.assertEqual(r.json().get("engine"), "cold")
        res = self.assertResult(self.server.execute("import sys\nprint(sys.version_info[0])\n6 * 7"), "ok")
        self.assertEqual(res["stdout"], "3\n")
        self.assertEqual(res["result"]["data"]["text/plain"], "42")
        self.assertEqual(res["usage"]["engine"], "cold")
        self.assertEqual(res["limits"]["memory_mb"]["value"], DEFAULT_MEMORY_MB, res["limits"])
        self.assertProblem(self.server.request("POST", "/v1/sessions", {}), 409, "sessions-unavailable")
        self.assertProblem(self.server.request("GET", "/v1/sessions"), 409, "sessions-unavailable")
        self.assertProblem(self.server.execute("1", session_id="abc"), 409, "sessions-unavailable")
        c = self.server.request("POST", "/v1/check", {"code": "x = (1,"})
        self.assertEqual(c.status, 200, repr(c))
        self.assertValid("CheckResult", c.json())
        self.assertEqual(c.json()["status"], "syntax_error")


if __name__ == "__main__":
    unittest.main()
