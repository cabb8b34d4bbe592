"""Harness for the end-to-end tests of `execbox serve`: starts the real binary, talks HTTP to it
with the standard library only, and checks answers against the served OpenAPI document.

The binary: EXECBOX (environment), or the first command-line argument of run.py, which sets it.
EXECBOX_WORKER is passed through when set (the binary otherwise finds execbox-worker next to
itself)."""
import base64
import hashlib
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

# Generous: a busy 2-core machine, a warm pool that preloads numpy/pandas/matplotlib.
START_TIMEOUT = 180
REQUEST_TIMEOUT = 120
STOP_TIMEOUT = 90

KEY_A = "test-key-alpha-0123456789abcdef"
KEY_B = "test-key-bravo-0123456789abcdef"

_LISTENING = re.compile(r"execbox serve: listening on http://(\[[^\]]+\]|[^:/\s]+):(\d+)")
_TOKEN = re.compile(r"Authorization: Bearer (\S+)")


def execbox_binary():
    path = os.environ.get("EXECBOX")
    if not path:
        raise unittest.SkipTest("set EXECBOX to the execbox binary (or pass it to run.py)")
    if not os.access(path, os.X_OK):
        raise RuntimeError(f"EXECBOX={path} is not an executable file")
    return path


# The unprivileged user `make test` creates (scripts/test.sh) for the tests run as a user.
TEST_USER = "execbox-test"


def test_user_available():
    """Whether this process can run commands as TEST_USER (root, setpriv, the user exists)."""
    import pwd
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        return False
    try:
        pwd.getpwnam(TEST_USER)
    except KeyError:
        return False
    return True


# ---- Processes ----------------------------------------------------------------------------------


def _proc_stat(pid):
    """(ppid, starttime) of a live process, or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read().decode("utf-8", "replace")
    except OSError:
        return None
    rest = data[data.rfind(")") + 2:].split()
    # Fields after the name: state ppid pgrp ... starttime is field 22 (index 19 here).
    try:
        return int(rest[1]), int(rest[19])
    except (IndexError, ValueError):
        return None


def descendants(pid):
    """{pid: starttime} of every live descendant of pid (not pid itself)."""
    children = {}
    stats = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        st = _proc_stat(int(name))
        if st is None:
            continue
        stats[int(name)] = st
        children.setdefault(st[0], []).append(int(name))
    out = {}
    todo = [pid]
    while todo:
        p = todo.pop()
        for c in children.get(p, []):
            if c not in out:
                out[c] = stats[c][1]
                todo.append(c)
    return out


def still_alive(tracked):
    """The pids of `tracked` ({pid: starttime}) that are still the same live process."""
    alive = []
    for pid, start in tracked.items():
        st = _proc_stat(pid)
        if st is not None and st[1] == start:
            try:
                with open(f"/proc/{pid}/stat", "rb") as f:
                    state = f.read().decode("utf-8", "replace")
                state = state[state.rfind(")") + 2:].split()[0]
            except OSError:
                continue
            if state != "Z":
                alive.append(pid)
    return alive


# ---- cgroups ------------------------------------------------------------------------------------


def cgroup_dirs(pid):
    """The directories where execbox (running as `pid`) makes its groups: <own group>/execbox
    under every hierarchy pid belongs to (src/jail/cgroup.cc: kSubtree)."""
    dirs = []
    try:
        with open(f"/proc/{pid}/cgroup") as f:
            lines = f.read().splitlines()
    except OSError:
        return dirs
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        roots = []
        if controllers == "":
            roots = ["/sys/fs/cgroup/unified", "/sys/fs/cgroup"]
        else:
            for c in controllers.split(","):
                if c.startswith("name="):
                    c = c[5:]
                roots.append("/sys/fs/cgroup/" + c)
        for root in roots:
            base = os.path.join(root, path.lstrip("/"), "execbox")
            if os.path.isdir(os.path.join(root, path.lstrip("/"))) and base not in dirs:
                dirs.append(base)
    return dirs


def cgroups_in(dirs):
    """Every group (full path) under the given execbox subtree directories."""
    out = set()
    for d in dirs:
        try:
            for name in os.listdir(d):
                if os.path.isdir(os.path.join(d, name)):
                    out.add(os.path.join(d, name))
        except OSError:
            pass
    return out


# ---- HTTP ---------------------------------------------------------------------------------------


class Response:
    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers  # lower-case name -> value
        self.body = body

    def header(self, name):
        return self.headers.get(name.lower())

    def json(self):
        return json.loads(self.body.decode("utf-8"))

    def __repr__(self):
        text = self.body[:600].decode("utf-8", "replace")
        return f"<HTTP {self.status} {self.header('content-type')}: {text}>"


def _die_with_parent():
    """In the child before exec: SIGKILL when the test process dies (a ctest timeout), so that no
    server outlives its test run."""
    import ctypes
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except Exception:  # noqa: BLE001 - best effort
        pass


class Server:
    """One `execbox serve` process on 127.0.0.1:<free port>."""

    def __init__(self, flags=(), keys=(KEY_A, KEY_B), config=None, listen="127.0.0.1:0", name="server",
                 token=None):
        """keys: tokens given in EXECBOX_API_KEYS; token: the one requests send by default (keys[0],
        else the token the server generates, unless the config file's keys are meant)."""
        self.name = name
        self.flags = list(flags)
        self.keys = list(keys)
        self.listen = listen
        self.config_path = None
        self.tmp = tempfile.mkdtemp(prefix=f"execbox-http-{name}-")
        if config is not None:
            self.config_path = os.path.join(self.tmp, "config.toml")
            with open(self.config_path, "w") as f:
                f.write(config)
        self.proc = None
        self.host = None
        self.port = None
        self.token = token or (self.keys[0] if self.keys else None)
        self.lines = []
        self._lines_cv = threading.Condition()
        self._drain = None
        self.returncode = None
        self.tracked = {}  # {pid: starttime} of the server and descendants seen while it ran
        self.cgroup_dirs = []
        self.cgroups_before = set()
        self._schema_doc = None

    # -- lifecycle --

    def command(self):
        cmd = [execbox_binary(), "serve", "--listen", self.listen]
        if self.config_path:
            cmd += ["--config", self.config_path]
        return cmd + self.flags

    def environment(self):
        env = dict(os.environ)
        env.pop("EXECBOX_API_KEYS", None)
        if self.keys:
            env["EXECBOX_API_KEYS"] = ",".join(self.keys)
        return env

    def spawn(self):
        self.proc = subprocess.Popen(self.command(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, env=self.environment(),
                                     preexec_fn=_die_with_parent)
        self._drain = threading.Thread(target=self._read_stderr, name=f"{self.name}-stderr", daemon=True)
        self._drain.start()

    def _read_stderr(self):
        for raw in iter(self.proc.stderr.readline, b""):
            line = raw.decode("utf-8", "replace").rstrip("\n")
            with self._lines_cv:
                self.lines.append(line)
                self._lines_cv.notify_all()
        with self._lines_cv:
            self.lines.append(None)  # end of stderr
            self._lines_cv.notify_all()

    def wait_line(self, pattern, timeout):
        """The first match of `pattern` in stderr; None at end of stderr or after `timeout`."""
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        seen = 0
        with self._lines_cv:
            while True:
                while seen < len(self.lines):
                    line = self.lines[seen]
                    seen += 1
                    if line is None:
                        return None
                    m = rx.search(line)
                    if m:
                        return m
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._lines_cv.wait(left)

    def stderr_text(self):
        with self._lines_cv:
            return "\n".join(l for l in self.lines if l is not None)

    def start(self):
        # The subtree where this server's groups will be (known before start: inherited).
        self.cgroup_dirs = cgroup_dirs(os.getpid())
        self.cgroups_before = cgroups_in(self.cgroup_dirs)
        self.spawn()
        m = self.wait_line(_LISTENING.pattern, START_TIMEOUT)
        if m is None:
            self.kill()
            raise RuntimeError(f"{self.name}: no 'listening on' line; stderr:\n{self.stderr_text()}")
        self.host = m.group(1).strip("[]")
        self.port = int(m.group(2))
        if not self.keys and self.token is None:
            t = _TOKEN.search(self.stderr_text())
            self.token = t.group(1) if t else None
        self.track()
        self.openapi()  # kept: answers read after the server stopped are validated too
        return self

    def track(self):
        """Remembers the server's descendants now (for the leftover-process check)."""
        if self.proc and self.proc.poll() is None:
            st = _proc_stat(self.proc.pid)
            if st:
                self.tracked[self.proc.pid] = st[1]
            self.tracked.update(descendants(self.proc.pid))

    def signal(self, sig=signal.SIGTERM):
        self.track()
        self.proc.send_signal(sig)

    def wait_exit(self, timeout=STOP_TIMEOUT):
        try:
            self.returncode = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"{self.name}: did not exit within {timeout} s of SIGTERM; stderr:\n"
                                 f"{self.stderr_text()[-4000:]}")
        if self._drain:
            self._drain.join(timeout=10)
        if self.proc.stderr and not self._drain.is_alive():
            self.proc.stderr.close()
        # A 500 says only "incident ID"; the details are in the server's log. Shown with the
        # test's output (ctest prints it when a test fails).
        incidents = [line for line in self.lines if line and "incident" in line]
        if incidents:
            print(f"{self.name}: incidents in the server's log:\n  " + "\n  ".join(incidents[-20:]),
                  file=sys.stderr)
        shutil.rmtree(self.tmp, ignore_errors=True)
        return self.returncode

    def stop(self):
        """SIGTERM, wait, and the exit status (asserted 0 by the callers)."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.signal(signal.SIGTERM)
        return self.wait_exit()

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                pass

    def leftover_cgroups(self):
        """Groups made while this server ran that are still there, owned (by name: <pid>-<n>,
        src/jail/sandbox.cc NextCgroupName) by the server or one of its descendants."""
        new = cgroups_in(self.cgroup_dirs) - self.cgroups_before
        pids = {str(p) for p in self.tracked}
        return sorted(g for g in new if os.path.basename(g).split("-")[0] in pids)

    def leftover_processes(self):
        return still_alive(self.tracked)

    # -- HTTP --

    def connection(self, timeout=REQUEST_TIMEOUT):
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)

    def auth(self, token=None):
        token = self.token if token is None else token
        return {"Authorization": f"Bearer {token}"} if token else {}

    def request(self, method, path, body=None, headers=None, token=None, auth=True,
                timeout=REQUEST_TIMEOUT):
        """One request on a fresh connection. body: bytes, str, or a JSON value (sent as JSON)."""
        h = {}
        if auth:
            h.update(self.auth(token))
        if body is not None and not isinstance(body, (bytes, str)):
            body = json.dumps(body).encode()
            h["Content-Type"] = "application/json"
        elif isinstance(body, str):
            body = body.encode()
        if headers:
            h.update(headers)
        conn = self.connection(timeout)
        try:
            conn.request(method, path, body=body, headers=h)
            r = conn.getresponse()
            data = r.read()
            return Response(r.status, {k.lower(): v for k, v in r.getheaders()}, data)
        finally:
            conn.close()

    def execute(self, code, token=None, path="/v1/execute", **fields):
        body = {"code": code}
        body.update(fields)
        return self.request("POST", path, body, token=token)

    def metrics(self, token=None):
        r = self.request("GET", "/metrics", token=token)
        if r.status != 200:
            raise AssertionError(f"/metrics: {r!r}")
        return parse_metrics(r.body.decode())

    def openapi(self):
        if self._schema_doc is None:
            r = self.request("GET", "/v1/openapi.json")
            if r.status != 200:
                raise AssertionError(f"/v1/openapi.json: {r!r}")
            self._schema_doc = r.json()
        return self._schema_doc

    def raw(self, data, timeout=30):
        """Sends raw bytes on a fresh socket and reads until the server closes; the bytes read.
        A send that fails because the server already answered and closed (as it does on a body
        over the limit, without reading it) is not an error: the answer is read anyway, as curl
        does."""
        s = socket.create_connection((self.host, self.port), timeout=timeout)
        try:
            try:
                s.sendall(data)
            except (BrokenPipeError, ConnectionResetError):
                pass
            chunks = []
            while True:
                try:
                    b = s.recv(65536)
                except ConnectionResetError:
                    chunks.append(b"<RESET>")
                    break
                if not b:
                    break
                chunks.append(b)
            return b"".join(chunks)
        finally:
            s.close()


def parse_metrics(text):
    """{'name{labels}': value} for every sample line of a Prometheus text exposition."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name, _, value = line.rpartition(" ")
        out[name] = float(value)
    return out


def parse_raw_response(data):
    """(status, {header: value}, body) of a raw HTTP/1.1 response with a Content-Length."""
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for l in lines[1:]:
        k, _, v = l.partition(":")
        headers[k.strip().lower()] = v.strip()
    if "content-length" in headers:
        body = body[:int(headers["content-length"])]
    return Response(status, headers, body)


# ---- Schemas ------------------------------------------------------------------------------------


_validators = {}


def validator(doc, schema_name):
    """A Draft 2020-12 validator for components.schemas[schema_name], with the whole OpenAPI
    document as its root so that every "#/components/..." $ref resolves."""
    import jsonschema
    key = (id(doc), schema_name)
    if key not in _validators:
        if schema_name not in doc["components"]["schemas"]:
            raise AssertionError(f"the OpenAPI document has no schema {schema_name}")
        # Other top-level members of an OpenAPI document are unknown keywords to JSON Schema
        # and are ignored; the $ref points into the same document.
        root = dict(doc)
        root["$ref"] = f"#/components/schemas/{schema_name}"
        cls = jsonschema.Draft202012Validator
        cls.check_schema(doc["components"]["schemas"][schema_name])
        _validators[key] = cls(root, format_checker=jsonschema.FormatChecker())
    return _validators[key]


def schema_errors(doc, schema_name, value):
    v = validator(doc, schema_name)
    return [f"{'/'.join(str(p) for p in e.absolute_path) or '<root>'}: {e.message[:300]}"
            for e in v.iter_errors(value)]


# ---- Assertions ---------------------------------------------------------------------------------


class ApiTestCase(unittest.TestCase):
    """Assertions shared by the test files; `server` is set by each class."""
    server = None
    maxDiff = 4000

    def assertValid(self, schema_name, value, server=None):
        doc = (server or self.server).openapi()
        errors = schema_errors(doc, schema_name, value)
        self.assertEqual(errors, [], f"{schema_name} schema violations in {json.dumps(value)[:1500]}")

    def assertProblem(self, r, status, type_slug=None, server=None):
        """The response is `status` with an application/problem+json body that matches the
        Problem schema; returns the body."""
        self.assertEqual(r.status, status, repr(r))
        ctype = r.header("content-type") or ""
        self.assertTrue(ctype.startswith("application/problem+json"), f"content-type {ctype!r}: {r!r}")
        body = r.json()
        self.assertEqual(body.get("status"), status, body)
        for member in ("type", "title", "detail"):
            self.assertIsInstance(body.get(member), str, f"{member} in {body}")
            self.assertTrue(body[member], f"empty {member} in {body}")
        if type_slug is not None:
            self.assertEqual(body["type"], "urn:execbox:problem:" + type_slug, body)
        self.assertValid("Problem", body, server)
        return body

    def assertResult(self, r, status=None, server=None):
        """200 with a JSON Result (schema-checked) of the given status; returns it."""
        self.assertEqual(r.status, 200, repr(r))
        self.assertTrue((r.header("content-type") or "").startswith("application/json"), repr(r))
        result = r.json()
        self.assertValid("Result", result, server)
        if status is not None:
            self.assertEqual(result["status"], status, json.dumps(result)[:3000])
        return result


def sha256_hex(text):
    return hashlib.sha256(text.encode()).hexdigest()


def b64(data):
    return base64.b64encode(data).decode()


def wait_until(predicate, timeout, interval=0.2):
    """Polls predicate() until it returns a true value (returned) or timeout (the last value)."""
    deadline = time.monotonic() + timeout
    value = predicate()
    while not value and time.monotonic() < deadline:
        time.sleep(interval)
        value = predicate()
    return value


def read_sse(response, on_event=None):
    """Reads an SSE stream from an http.client response: a list of (event, data-as-JSON).
    on_event(event, data) is called as each arrives; when it returns True reading stops."""
    events = []
    name, data = None, []
    while True:
        line = response.readline()
        if not line:
            break
        line = line.decode("utf-8").rstrip("\r\n")
        if line == "":
            if name is not None or data:
                value = json.loads("\n".join(data)) if data else None
                events.append((name or "message", value))
                if on_event and on_event(name or "message", value):
                    return events
            name, data = None, []
            continue
        if line.startswith(":"):
            continue  # comment (heartbeat)
        field, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if field == "event":
            name = value
        elif field == "data":
            data.append(value)
    return events


# ---- MCP over Streamable HTTP (/mcp) ------------------------------------------------------------


MCP_PROTOCOL = "2025-11-25"


def sse_messages(body):
    """The JSON-RPC messages of an MCP SSE body (`event: message` / `data: ...` blocks)."""
    out = []
    for block in body.decode("utf-8").replace("\r\n", "\n").split("\n\n"):
        data = [l[5:].lstrip(" ") if l.startswith("data:") else None for l in block.split("\n")]
        data = [d for d in data if d is not None]
        if data:
            out.append(json.loads("\n".join(data)))
    return out


class McpClient:
    """One MCP session over Streamable HTTP with the standard library: POST one JSON-RPC message
    per request, answered as JSON or as an SSE stream that ends with the response."""

    def __init__(self, server, token=None):
        self.server = server
        self.token = server.token if token is None else token
        self.session_id = None
        self._ids = 0
        self._ids_mu = threading.Lock()

    def next_id(self):
        with self._ids_mu:
            self._ids += 1
            return self._ids

    def headers(self, extra=None):
        h = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
             "MCP-Protocol-Version": MCP_PROTOCOL}
        if self.session_id:
            h["Mcp-Session-Id"] = self.session_id
        if extra:
            h.update(extra)
        return h

    def post(self, message, headers=None, timeout=REQUEST_TIMEOUT):
        return self.server.request("POST", "/mcp", json.dumps(message).encode(), headers=self.headers(headers),
                                   token=self.token, timeout=timeout)

    def initialize(self):
        r = self.post({"jsonrpc": "2.0", "id": self.next_id(), "method": "initialize",
                       "params": {"protocolVersion": MCP_PROTOCOL, "capabilities": {},
                                  "clientInfo": {"name": "execbox-http-tests", "version": "1"}}})
        if r.status != 200 or not r.header("mcp-session-id"):
            raise AssertionError(f"initialize: {r!r}")
        self.session_id = r.header("mcp-session-id")
        n = self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
        if n.status != 202:
            raise AssertionError(f"notifications/initialized: {n!r}")
        return r.json()["result"]

    def rpc(self, method, params=None, timeout=REQUEST_TIMEOUT):
        """The JSON-RPC response (a dict with "result" or "error") to one request."""
        rid = self.next_id()
        message = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            message["params"] = params
        r = self.post(message, timeout=timeout)
        if r.status != 200:
            raise AssertionError(f"{method}: {r!r}")
        ctype = r.header("content-type") or ""
        messages = sse_messages(r.body) if ctype.startswith("text/event-stream") else [r.json()]
        answers = [m for m in messages if m.get("id") == rid and ("result" in m or "error" in m)]
        if len(answers) != 1:
            raise AssertionError(f"{method}: {len(answers)} responses in {r!r}")
        return answers[0]

    def call(self, tool, arguments, timeout=REQUEST_TIMEOUT):
        """The result of tools/call (content, structuredContent, isError); a JSON-RPC error raises."""
        answer = self.rpc("tools/call", {"name": tool, "arguments": arguments}, timeout=timeout)
        if "error" in answer:
            raise AssertionError(f"tools/call {tool}: JSON-RPC error {answer['error']}")
        return answer["result"]

    def tools(self):
        return {t["name"]: t for t in self.rpc("tools/list")["result"]["tools"]}

    def delete(self):
        r = self.server.request("DELETE", "/mcp", headers=self.headers(), token=self.token)
        return r


def tool_text(result):
    """The text blocks of a tool result, joined."""
    return "\n".join(c["text"] for c in result.get("content", []) if c.get("type") == "text")


def read_audit(path):
    """Every line of an audit log, parsed (an absent file has none)."""
    try:
        with open(path) as f:
            return [json.loads(l) for l in f if l.strip()]
    except FileNotFoundError:
        return []
