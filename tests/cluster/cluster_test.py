"""Three `execbox serve --instance execbox-0|1|2` behind Debian's nginx with deploy/nginx's
routing, on loopback; every assertion goes through nginx (docs/deploy.md, "Several instances
behind nginx"). The same instances are also put behind the Kubernetes router's configuration
(deploy/kubernetes/router-nginx.conf), with kube_dns.py standing in for kube-dns.

usage: cluster_test.py BUILD_DIR WORK_DIR   (run by tests/cluster/run.sh, as root)

Prints one line per check and ends with `N passed, M failed`; exit status 1 on any failure."""
import http.client
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tests", "http"))
import harness  # noqa: E402
from harness import KEY_A, McpClient, Server, read_sse, schema_errors, wait_until  # noqa: E402
from kube_dns import KubeDns  # noqa: E402

# As a StatefulSet names its pods; each instance has an address of its own and all share one
# port, as pods do (the Kubernetes configuration has one port for all).
NAMES = ("execbox-0", "execbox-1", "execbox-2")
ADDRESSES = {name: f"127.0.0.{11 + i}" for i, name in enumerate(NAMES)}
HEX32 = "0123456789abcdef" * 2
SESSION_ID = re.compile(r"^s_[0-9a-f]{32}\.([a-z0-9-]+)$")
MCP_ID = re.compile(r"^[0-9a-f]{32}\.([a-z0-9-]+)$")


class Checks:
    def __init__(self):
        self.passed = self.failed = 0

    def check(self, name, ok, detail=""):
        if ok:
            self.passed += 1
            print(f"ok   {name}", flush=True)
        else:
            self.failed += 1
            print(f"FAIL {name}: {str(detail)[:1500]}", flush=True)
        return ok

    def phase(self, name, fn, *args):
        """Runs one phase; an exception in it is one failure and the run goes on."""
        print(f"-- {name}", flush=True)
        try:
            return fn(*args)
        except Exception as e:  # noqa: BLE001 - reported as a failure
            self.check(f"{name}: no exception", False, f"{type(e).__name__}: {e}")
            return None


T = Checks()


class Router:
    """nginx on loopback, spoken to like a harness.Server (McpClient works through it). Every
    response it gave is kept, to check afterwards that none was an nginx HTML page."""
    connection = Server.connection
    auth = Server.auth

    def __init__(self, port):
        self.host, self.port, self.token = "127.0.0.1", port, KEY_A
        self.responses = []

    def request(self, *args, **kwargs):
        r = Server.request(self, *args, **kwargs)
        self.responses.append(r)
        return r


def instance_of(r):
    return r.header("execbox-instance")


def is_problem(r, status, type_slug=None):
    ctype = r.header("content-type") or ""
    if r.status != status or not ctype.startswith("application/problem+json"):
        return False
    body = r.json()
    return body.get("status") == status and (type_slug is None or body.get("type") == "urn:execbox:problem:" + type_slug)


def problem_schema_errors(doc, r):
    """The router's own problems match execbox's Problem schema too."""
    return schema_errors(doc, "Problem", r.json())


# ---- Setting up ---------------------------------------------------------------------------------


def free_port(*hosts):
    """A TCP port free on every one of hosts."""
    for _ in range(20):
        socks = [socket.socket() for _ in hosts]
        try:
            socks[0].bind((hosts[0], 0))
            port = socks[0].getsockname()[1]
            for s, host in zip(socks[1:], hosts[1:]):
                s.bind((host, port))
            return port
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError(f"no port free on all of {hosts}")


def start_instances(port):
    servers = {}
    for name in NAMES:
        # config="": an empty file of its own, never /etc/execbox/execbox.toml.
        servers[name] = Server(name=f"instance-{name}", config="", listen=f"{ADDRESSES[name]}:{port}",
                               flags=["--instance", name, "--workers", "1"]).start()
    for name, s in servers.items():
        ok = wait_until(lambda s=s: s.request("GET", "/readyz", auth=False).status == 200, 180, 0.5)
        if not ok:
            raise RuntimeError(f"instance {name} not ready in 180 s:\n{s.stderr_text()[-3000:]}")
    return servers


def render(path, replacements):
    """The file at REPO/path with each (old, new, count) replaced, exactly count times."""
    with open(os.path.join(REPO, path)) as f:
        text = f.read()
    for old, new, count in replacements:
        assert text.count(old) == count, f"{path}: expected '{old}' {count} times"
        text = text.replace(old, new)
    return text


def static_config(work, port, instance_port):
    """deploy/nginx/execbox-static.conf with these instances' addresses and the router's, in a
    main configuration whose pid, logs and temporary paths are all in `work`."""
    site = render("deploy/nginx/execbox-static.conf",
                  [(f"127.0.0.1:808{i + 1};", f"{ADDRESSES[n]}:{instance_port};", 2) for i, n in enumerate(NAMES)] +
                  [("listen 8080;", f"listen 127.0.0.1:{port};", 1),
                   ("/etc/nginx/execbox-routing.conf", os.path.join(REPO, "deploy/nginx/execbox-routing.conf"), 1)])
    with open(os.path.join(work, "execbox.conf"), "w") as f:
        f.write(site)
    temp = "".join(f"    {m}_temp_path tmp/{m};\n" for m in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    with open(os.path.join(work, "nginx.conf"), "w") as f:
        f.write("worker_processes 1;\npid nginx.pid;\nerror_log error.log warn;\nuser nobody nogroup;\n"
                "events { worker_connections 512; }\n"
                f"http {{\n    access_log access.log;\n{temp}    include execbox.conf;\n}}\n")
    return os.path.join(work, "nginx.conf")


def kubernetes_config(work, port, instance_port, dns_port):
    """deploy/kubernetes/router-nginx.conf as the ConfigMap lays it out (next to
    execbox-routing.conf), with kube_dns.py as its resolver, the instances' port for the pods'
    8080, and its files in `work`/k8s instead of /tmp and the container's stdout and stderr."""
    d = os.path.join(work, "k8s")
    os.makedirs(d)
    shutil.copy(os.path.join(REPO, "deploy/nginx/execbox-routing.conf"), d)
    conf = render("deploy/kubernetes/router-nginx.conf", [
        ("resolver kube-dns.kube-system.svc.cluster.local", f"resolver 127.0.0.1:{dns_port}", 1),
        (".svc.cluster.local:8080;", f".svc.cluster.local:{instance_port};", 2),
        ("listen 8080;", f"listen 127.0.0.1:{port};", 1),
        ("/tmp/", d + "/", 6), ("access_log /dev/stdout", "access_log access.log", 1),
        ("error_log stderr", "error_log error.log", 1)])
    with open(os.path.join(d, "nginx.conf"), "w") as f:
        f.write(conf)
    return os.path.join(d, "nginx.conf")


def start_nginx(name, conf, port):
    """nginx in the foreground on conf (its prefix: conf's directory), listening on port."""
    prefix = os.path.dirname(conf) + "/"
    t = subprocess.run(["nginx", "-p", prefix, "-c", conf, "-t"], capture_output=True, text=True)
    T.check(f"nginx -t accepts the {name} configuration", t.returncode == 0, t.stderr)
    proc = subprocess.Popen(["nginx", "-p", prefix, "-c", conf, "-g", "daemon off;"],
                            stdin=subprocess.DEVNULL, preexec_fn=harness._die_with_parent)
    router = Router(port)

    def up():
        try:
            return Server.request(router, "GET", "/readyz", auth=False, timeout=5).status == 200
        except OSError:
            return proc.poll() is not None  # stop waiting when nginx exited
    wait_until(up, 30, 0.2)
    if proc.poll() is not None:
        raise RuntimeError(f"nginx ({name}) exited with {proc.returncode}; see {prefix}error.log")
    return proc, router


# ---- Phases -------------------------------------------------------------------------------------


def one_shots(router, count, live):
    seen = {}
    bad = []
    for i in range(count):
        r = router.request("POST", "/v1/execute", {"code": f"print({i})"})
        if r.status == 200 and r.json().get("stdout") == f"{i}\n" and instance_of(r) in live:
            seen[instance_of(r)] = seen.get(instance_of(r), 0) + 1
        else:
            bad.append(r)
    return seen, bad


def phase_one_shots(router):
    seen, bad = one_shots(router, 30, set(NAMES))
    T.check(f"30 one-shot executions all answered 200 by an instance ({seen})", not bad, bad[:3])
    T.check("one-shot executions reach all three instances", set(seen) == set(NAMES), seen)


def run_in(router, sid, code):
    r = router.request("POST", f"/v1/sessions/{sid}/execute", {"code": code})
    value = r.json().get("result", {}) if r.status == 200 else {}
    return r, (value or {}).get("data", {}).get("text/plain")


def phase_sessions(router, sessions):
    """Creates six sessions through the router; every call of each must be answered by the
    instance its id names. Keeps them in `sessions` ({id: instance}) for the later phases."""
    for n in range(6):
        r = router.request("POST", "/v1/sessions", {})
        m = SESSION_ID.match(r.json().get("id", "")) if r.status == 201 else None
        if not T.check(f"session {n} created (201, id names its instance)", m and m.group(1) == instance_of(r), r):
            continue
        sid, name = r.json()["id"], m.group(1)
        sessions[sid] = name
        r1, _ = run_in(router, sid, f"x = {n} * 7")
        r2, value = run_in(router, sid, "x * 2")
        blob = random.randbytes(65536)
        # A percent-encoded name ("data é.bin") reaches the instance as the client wrote it.
        put = router.request("PUT", f"/v1/sessions/{sid}/files/data%20%C3%A9.bin", blob,
                             headers={"Content-Type": "application/octet-stream"})
        get = router.request("GET", f"/v1/sessions/{sid}/files/data%20%C3%A9.bin")
        r3, listed = run_in(router, sid, "import os\n'data é.bin' in os.listdir()")
        info = router.request("GET", f"/v1/sessions/{sid}")
        pinned = [instance_of(x) for x in (r1, r2, put, get, r3, info)]
        T.check(f"session {n} on '{name}': state kept across calls", value == str(n * 14), r2)
        T.check(f"session {n}: PUT then GET of a file ('data é.bin') round-trips",
                put.status == 204 and get.status == 200 and get.body == blob and listed == "True", (put, get, r3))
        T.check(f"session {n}: info is the session", info.status == 200 and info.json().get("id") == sid, info)
        T.check(f"session {n}: every call answered by '{name}'", pinned == [name] * 6, pinned)
    names = set(sessions.values())
    T.check(f"sessions land on several instances ({sorted(sessions.values())})", len(names) >= 2, sessions)
    # The documented limitation: the list is one instance's (the one the request went to).
    r = router.request("GET", "/v1/sessions")
    listed = {x["id"] for x in r.json().get("sessions", [])} if r.status == 200 else set()
    T.check("GET /v1/sessions lists the sessions of the one instance it reached, only",
            listed == {sid for sid, n in sessions.items() if n == instance_of(r)}, (instance_of(r), listed))


def phase_e2b(router):
    """E2B's API through the router: a sandbox is a session, so its control-plane calls
    (/sandboxes/{id}) and its own calls (named in the E2b-Sandbox-Id header) must each reach the
    instance its id names."""
    names = set()
    for n in range(4):
        r = router.request("POST", "/sandboxes", {}, auth=False, headers={"X-API-KEY": KEY_A})
        m = SESSION_ID.match(r.json().get("sandboxID", "")) if r.status == 201 else None
        if not T.check(f"sandbox {n} created (201, id names its instance)", m and m.group(1) == instance_of(r), r):
            continue
        sid, name, token = r.json()["sandboxID"], m.group(1), r.json()["envdAccessToken"]
        names.add(name)
        sandbox = {"E2b-Sandbox-Id": sid, "E2b-Sandbox-Port": "49999", "X-Access-Token": token}
        calls = []
        for code in (f"x = {n} * 7", "x * 2"):
            calls.append(router.request("POST", "/execute", {"code": code}, auth=False, headers=sandbox))
        lines = [json.loads(line) for line in calls[-1].body.decode().splitlines() if line.strip()]
        texts = [m.get("text") for m in lines if m.get("type") == "result"]
        info = router.request("GET", f"/sandboxes/{sid}", auth=False, headers={"X-API-KEY": KEY_A})
        killed = router.request("DELETE", f"/sandboxes/{sid}", auth=False, headers={"X-API-KEY": KEY_A})
        T.check(f"sandbox {n} on '{name}': state kept across calls", texts == [str(n * 14)], lines)
        pinned = [instance_of(x) for x in calls + [info, killed]]
        T.check(f"sandbox {n}: every call answered by '{name}'", pinned == [name] * 4 and killed.status == 204,
                (pinned, killed))
    T.check(f"sandboxes land on several instances ({sorted(names)})", len(names) >= 2, names)


def phase_delete(router, sessions):
    """Deletes one session per instance, keeping one on each for the stop phase."""
    kept = {}
    for sid, name in list(sessions.items()):
        if name not in kept:
            kept[name] = sid
            continue
        d = router.request("DELETE", f"/v1/sessions/{sid}")
        gone = router.request("GET", f"/v1/sessions/{sid}")
        T.check(f"DELETE on '{name}' (204, then execbox's own 404 from '{name}')",
                d.status == 204 and instance_of(d) == name and is_problem(gone, 404, "session-not-found")
                and instance_of(gone) == name, (d, gone))
        del sessions[sid]


def phase_sse(router, sessions):
    """An SSE execution through nginx arrives as it is written: the first event comes a good
    second before the result (no buffering anywhere on the way)."""
    sid, name = next(iter(sessions.items()))
    conn = router.connection()
    body = json.dumps({"code": "import time\nprint('first', flush=True)\ntime.sleep(1.5)\nprint('second')"})
    conn.request("POST", f"/v1/sessions/{sid}/execute", body=body,
                 headers={**router.auth(), "Content-Type": "application/json", "Accept": "text/event-stream"})
    r = conn.getresponse()
    arrivals = []
    events = read_sse(r, lambda ev, data: arrivals.append((ev, time.monotonic())) and False)
    conn.close()
    kinds = [e for e, _ in events]
    first = next((t for e, t in arrivals if e == "stdout"), None)
    last = next((t for e, t in arrivals if e == "result"), None)
    T.check("SSE through nginx: stdout events then the result, from the session's instance",
            r.status == 200 and "stdout" in kinds and kinds[-1] == "result" and r.getheader("Execbox-Instance") == name,
            (r.status, kinds, r.getheaders()))
    T.check("SSE through nginx is not buffered (first event >= 1 s before the result)",
            first is not None and last is not None and last - first >= 1.0, (first, last))


def mcp_post_instance(router):
    return instance_of(router.responses[-1])


def phase_mcp(router):
    client = McpClient(router, KEY_A)
    client.initialize()
    m = MCP_ID.match(client.session_id or "")
    T.check("MCP initialize through nginx: Mcp-Session-Id names its instance", m is not None, client.session_id)
    name = m.group(1)
    answered = [instance_of(router.responses[-2]), instance_of(router.responses[-1])]  # initialize, initialized
    r = client.call("execute_python", {"code": "1 + 1"})
    answered.append(mcp_post_instance(router))
    T.check("MCP tools/call execute_python answers", not r.get("isError") and
            r["structuredContent"]["result"]["data"]["text/plain"] == "2", r)
    created = client.call("create_session", {})
    answered.append(mcp_post_instance(router))
    sid = created["structuredContent"]["session_id"]
    client.call("execute_python", {"code": "y = 5", "session_id": sid})
    answered.append(mcp_post_instance(router))
    r = client.call("execute_python", {"code": "y + 1", "session_id": sid})
    answered.append(mcp_post_instance(router))
    T.check("MCP session's own session keeps state", r["structuredContent"]["result"]["data"]["text/plain"] == "6", r)
    T.check(f"every MCP request answered by '{name}'", answered == [name] * len(answered), answered)
    return client, name


def phase_wrong_ids(router, doc):
    r = router.request("GET", f"/v1/sessions/s_{HEX32}.zzz")
    T.check("an id naming an unknown instance: 404 instance-not-found from nginx, naming it",
            is_problem(r, 404, "instance-not-found") and "'zzz'" in r.json()["detail"] and not instance_of(r), r)
    T.check("  ... and it matches execbox's Problem schema", not problem_schema_errors(doc, r), problem_schema_errors(doc, r))
    r = router.request("POST", f"/v1/sessions/s_{HEX32}.zzz/execute", {"code": "1"})
    T.check("execute on an unknown instance's session: 404 instance-not-found", is_problem(r, 404, "instance-not-found"), r)
    r = router.request("POST", "/mcp", b"{}", headers={"Content-Type": "application/json", "Mcp-Session-Id": f"{HEX32}.zzz"})
    T.check("MCP session id of an unknown instance: 404 instance-not-found", is_problem(r, 404, "instance-not-found"), r)
    for path in ("/v1/sessions/not-a-session", f"/v1/sessions/s_{HEX32}.-x", f"/v1/sessions/s_{HEX32[:31]}.execbox-0"):
        r = router.request("GET", path)
        T.check(f"malformed id {path.rsplit('/', 1)[1]!r}: execbox's own 404 from some instance",
                is_problem(r, 404, "session-not-found") and instance_of(r) in NAMES, r)
    r = router.request("GET", f"/v1/sessions/s_{HEX32}.execbox-1")
    T.check("a well-formed id of execbox-1 naming no session: execbox-1's own 404",
            is_problem(r, 404, "session-not-found") and instance_of(r) == "execbox-1", r)


def raw(router, data):
    s = socket.create_connection((router.host, router.port), timeout=30)
    try:
        s.sendall(data)
        chunks = []
        while (b := s.recv(65536)):
            chunks.append(b)
        return harness.parse_raw_response(b"".join(chunks))
    finally:
        s.close()


def phase_router_errors(router, doc):
    r = raw(router, b"POST /v1/execute HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + KEY_A.encode() +
            b"\r\nContent-Type: application/json\r\nContent-Length: 60000000\r\nConnection: close\r\n\r\n")
    T.check("a body over 48 MiB: nginx's 413 as problem+json (body-too-large)",
            is_problem(r, 413, "body-too-large") and not problem_schema_errors(doc, r), r)
    r = raw(router, b"HELLO\r\n\r\n")
    T.check("a malformed request: nginx's 400 as problem+json", is_problem(r, 400, "router-error"), r)
    big = router.request("POST", "/v1/execute", {"code": "import os\nlen(os.urandom(1))", "files": [
        {"name": "big.bin", "content_base64": harness.b64(os.urandom(3 << 20))}]})
    T.check("a 4 MiB request body passes through nginx", big.status == 200, big)


def phase_stop(router, servers, sessions, mcp, mcp_name, doc, victim, sig):
    """Stops `victim` with `sig` while one-shots keep coming; then its sessions answer 503 naming
    it and the other instances go on."""
    live = {n for n, s in servers.items() if s.proc.poll() is None} - {victim}
    outcomes = []
    stop = threading.Event()

    def load():
        # About 10 a second: one key's rate is 20 a second per instance, and one may be all that is left.
        while not stop.wait(0.1) and len(outcomes) < 200:
            try:
                outcomes.append(router.request("POST", "/v1/execute", {"code": "print('load')"}))
            except (OSError, http.client.HTTPException) as e:
                outcomes.append(e)
    loader = threading.Thread(target=load)
    loader.start()
    server = servers[victim]
    if sig == signal.SIGTERM:
        # An execution running on it when SIGTERM comes finishes, and its answer comes back
        # through nginx: the instance lets it run for its grace period.
        sid = next((sid for sid, n in sessions.items() if n == victim), None)
        running = []
        runner = threading.Thread(target=lambda: running.append(run_in(router, sid, "import time\ntime.sleep(2)\n'drained'")))
        if sid:
            runner.start()
        time.sleep(0.5)
        code = server.stop()
        T.check(f"instance {victim}: SIGTERM, exit 0", code == 0, server.stderr_text()[-2000:])
        if sid:
            runner.join(timeout=60)
            T.check(f"an execution running on {victim} at SIGTERM got its result through nginx",
                    running and running[0][1] == "'drained'", running)
    else:
        time.sleep(0.5)
        server.track()
        server.kill()
        T.check(f"instance {victim}: SIGKILLed", server.proc.returncode == -signal.SIGKILL, server.proc.returncode)
    time.sleep(1.0)
    stop.set()
    loader.join(timeout=120)
    results = [o for o in outcomes if isinstance(o, harness.Response) and o.status == 200]
    problems = [o for o in outcomes if isinstance(o, harness.Response) and is_problem(o, 503)]
    other = [o for o in outcomes if o not in results and o not in problems]
    T.check(f"while {victim} stopped: {len(outcomes)} one-shots, {len(results)} results, "
            f"{len(problems)} 503 problems, {len(other)} other", not other and results, other[:3])
    T.check("  ... each 503 problem carries Retry-After", all(p.header("retry-after") for p in problems), problems[:2])

    lost = [sid for sid, n in sessions.items() if n == victim]
    T.check(f"a session of {victim} exists to check", bool(lost) or mcp_name == victim, sessions)
    for sid in lost:
        for method, path, body in (("GET", f"/v1/sessions/{sid}", None),
                                   ("POST", f"/v1/sessions/{sid}/execute", {"code": "x"}),
                                   ("GET", f"/v1/sessions/{sid}/files/data.bin", None),
                                   ("DELETE", f"/v1/sessions/{sid}", None)):
            r = router.request(method, path, body)
            ok = (is_problem(r, 503, "instance-unavailable") and f"'{victim}'" in r.json()["detail"]
                  and "session" in r.json()["detail"] and r.header("retry-after") and not problem_schema_errors(doc, r))
            T.check(f"{method} {path.split(sid)[1] or '/'} of a session on stopped {victim}: 503 naming it", ok, r)
        del sessions[sid]
    if mcp_name == victim:
        r = mcp.post({"jsonrpc": "2.0", "id": 99, "method": "tools/call",
                      "params": {"name": "execute_python", "arguments": {"code": "1"}}})
        T.check(f"MCP session on stopped {victim}: 503 instance-unavailable naming it",
                is_problem(r, 503, "instance-unavailable") and f"'{victim}'" in r.json()["detail"], r)

    seen, bad = one_shots(router, 12, live)
    T.check(f"after {victim} stopped: 12 one-shots all 200 from live instances {sorted(live)} ({seen})", not bad, bad[:3])
    for n in range(3):
        r = router.request("POST", "/v1/sessions", {})
        m = SESSION_ID.match(r.json().get("id", "")) if r.status == 201 else None
        ok = m is not None and m.group(1) in live and instance_of(r) == m.group(1)
        if ok:
            _, value = run_in(router, r.json()["id"], "6 * 7")
            d = router.request("DELETE", f"/v1/sessions/{r.json()['id']}")
            ok = value == "42" and d.status == 204
        T.check(f"after {victim} stopped: new session {n} created and used on a live instance", ok, r)
    for sid, name in sessions.items():
        r, value = run_in(router, sid, "x")
        T.check(f"session on live '{name}' still has its state", r.status == 200 and value is not None
                and instance_of(r) == name, r)
    if sig == signal.SIGKILL:
        left = wait_until(lambda: not server.leftover_processes(), 15)
        T.check(f"SIGKILLed {victim}: no process of it left (its jails die with it)", left, server.leftover_processes())


def phase_kubernetes(k8s, dns, doc):
    """The same instances behind deploy/kubernetes/router-nginx.conf: nginx finds every pod
    through the (stand-in) kube-dns at request time."""
    seen, bad = one_shots(k8s, 30, set(NAMES))
    T.check(f"k8s router: 30 one-shots all 200 ({seen})", not bad, bad[:3])
    T.check("k8s router: one-shots reach every pod the headless Service lists", set(seen) == set(NAMES), seen)
    r = k8s.request("POST", "/v1/sessions", {})
    m = SESSION_ID.match(r.json().get("id", "")) if r.status == 201 else None
    if T.check("k8s router: session created", m and m.group(1) == instance_of(r), r):
        sid, name = r.json()["id"], m.group(1)
        r1, _ = run_in(k8s, sid, "z = 21")
        r2, value = run_in(k8s, sid, "z * 2")
        info = k8s.request("GET", f"/v1/sessions/{sid}")
        d = k8s.request("DELETE", f"/v1/sessions/{sid}")
        pinned = [instance_of(x) for x in (r1, r2, info, d)]
        T.check(f"k8s router: every call of the session answered by {name} (its pod's DNS name)",
                value == "42" and pinned == [name] * 4 and d.status == 204, (pinned, r2))
    client = McpClient(k8s, KEY_A)
    client.initialize()
    name = MCP_ID.match(client.session_id).group(1)
    r = client.call("execute_python", {"code": "3 * 3"})
    T.check("k8s router: an MCP session stays on its pod", not r.get("isError") and
            [instance_of(x) for x in k8s.responses[-3:]] == [name] * 3, [instance_of(x) for x in k8s.responses[-3:]])
    client.delete()
    r = k8s.request("GET", f"/v1/sessions/s_{HEX32}.zzz")
    T.check("k8s router: a name that is not a StatefulSet pod's: 404 instance-not-found, nothing looked up",
            is_problem(r, 404, "instance-not-found") and not problem_schema_errors(doc, r) and
            not any("zzz" in name for name in dns.asked), (r, dns.asked))
    r = k8s.request("GET", f"/v1/sessions/s_{HEX32}.execbox-7")
    T.check("k8s router: a pod that does not exist (no DNS name): 503 instance-unavailable naming it",
            is_problem(r, 503, "instance-unavailable") and "'execbox-7'" in r.json()["detail"] and r.header("retry-after"), r)
    r = k8s.request("GET", f"/v1/sessions/s_{HEX32}.execbox-1")
    T.check("k8s router: an unknown session of execbox-1 gets execbox-1's own 404",
            is_problem(r, 404, "session-not-found") and instance_of(r) == "execbox-1", r)


def phase_kubernetes_stopped(k8s, dns, victim):
    """A pod that stopped while kube-dns still lists it (endpoints lag), then once it no longer does."""
    live = {n for n in NAMES if n != victim}
    for listed in (True, False):
        when = "still listed in DNS" if listed else "gone from DNS"
        if not listed:
            dns.remove(victim)
            time.sleep(6)  # the router caches answers for valid=5s
        seen, bad = one_shots(k8s, 15, live)
        T.check(f"k8s router, {victim} stopped, {when}: 15 one-shots all 200 from {sorted(live)} ({seen})", not bad, bad[:3])
        r = k8s.request("GET", f"/v1/sessions/s_{HEX32}.{victim}")
        T.check(f"k8s router, {victim} stopped, {when}: its sessions get 503 naming it",
                is_problem(r, 503, "instance-unavailable") and f"'{victim}'" in r.json()["detail"], r)


def phase_no_html(responses):
    html = [r for r in responses if "html" in (r.header("content-type") or "")]
    T.check(f"none of the {len(responses)} answers through nginx was HTML", not html, html[:3])


# ---- Main ---------------------------------------------------------------------------------------


def remove_cgroups(server):
    """Groups a SIGKILLed server could not remove (execbox sweeps them at its next start too)."""
    for group in server.leftover_cgroups():
        for root, _, _ in sorted(os.walk(group), key=lambda w: -len(w[0])):
            try:
                os.rmdir(root)
            except OSError:
                pass


def stop_nginx(name, proc, error_log):
    proc.send_signal(signal.SIGQUIT)  # graceful: finish open requests, then exit
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
    with open(error_log, errors="replace") as f:
        lines = f.readlines()
    bad = [line for line in lines if re.search(r"\[(emerg|alert|crit)\]", line)]
    T.check(f"the {name} nginx's error log has no emerg/alert/crit line", not bad, bad[:5])
    if T.failed:
        print(f"-- the end of {error_log}:\n" + "".join(lines[-15:]), flush=True)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    build, work = (os.path.abspath(a) for a in sys.argv[1:])
    os.environ["EXECBOX"] = os.path.join(build, "execbox")
    os.environ.setdefault("EXECBOX_WORKER", os.path.join(build, "execbox-worker"))
    os.makedirs(os.path.join(work, "tmp"), exist_ok=True)
    tempfile.tempdir = work  # the servers' own temporary directories too: run.sh removes it
    # run.sh's clean-up (Ctrl-C, a time-out) sends SIGTERM: stop the servers and nginx below.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    started = time.monotonic()
    servers, routers, dns = {}, [], None
    try:
        instance_port = free_port(*ADDRESSES.values())
        servers = start_instances(instance_port)
        print(f"-- three instances ready in {time.monotonic() - started:.1f} s", flush=True)
        port = free_port("127.0.0.1")
        nginx, router = start_nginx("static", static_config(work, port, instance_port), port)
        routers.append(("static", nginx, os.path.join(work, "error.log")))
        dns = KubeDns("execbox-pods", "execbox", ADDRESSES)
        port = free_port("127.0.0.1")
        conf = kubernetes_config(work, port, instance_port, dns.port)
        k8s_nginx, k8s = start_nginx("Kubernetes router's", conf, port)
        routers.append(("Kubernetes", k8s_nginx, os.path.join(work, "k8s", "error.log")))
        doc = router.request("GET", "/v1/openapi.json").json()
        sessions = {}
        T.phase("one-shot executions", phase_one_shots, router)
        T.phase("sessions", phase_sessions, router, sessions)
        T.phase("delete", phase_delete, router, sessions)
        T.phase("E2B's API", phase_e2b, router)
        T.phase("SSE", phase_sse, router, sessions)
        mcp, mcp_name = T.phase("MCP", phase_mcp, router) or (None, None)
        T.phase("ids that name no live session", phase_wrong_ids, router, doc)
        T.phase("errors nginx answers itself", phase_router_errors, router, doc)
        T.phase("the Kubernetes router's configuration", phase_kubernetes, k8s, dns, doc)
        first = mcp_name or NAMES[0]
        T.phase(f"stop {first} (SIGTERM)", phase_stop, router, servers, sessions, mcp, mcp_name, doc, first,
                signal.SIGTERM)
        T.phase(f"Kubernetes router, {first} stopped", phase_kubernetes_stopped, k8s, dns, first)
        others = [n for n in NAMES if n != first]
        second = next((n for n in others if n in sessions.values()), others[0])
        T.phase(f"kill {second} (SIGKILL)", phase_stop, router, servers, sessions, mcp, mcp_name, doc, second,
                signal.SIGKILL)
        T.phase("no HTML", phase_no_html, router.responses + k8s.responses)
    except Exception as e:  # noqa: BLE001 - the set-up failed: one failure, then clean up
        T.check("set-up", False, f"{type(e).__name__}: {e}")
    finally:
        for name, s in servers.items():
            if s.proc.poll() is None:
                code = s.stop()
                T.check(f"instance {name}: SIGTERM at the end, exit 0", code == 0, s.stderr_text()[-2000:])
            else:
                remove_cgroups(s)
                shutil.rmtree(s.tmp, ignore_errors=True)
        for name, proc, error_log in routers:
            stop_nginx(name, proc, error_log)
        if dns:
            dns.close()
    print(f"-- {time.monotonic() - started:.0f} s", flush=True)
    print(f"{T.passed} passed, {T.failed} failed", flush=True)
    sys.exit(1 if T.failed else 0)


if __name__ == "__main__":
    main()
