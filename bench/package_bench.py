"""`make bench-packages`: what a one-shot execution's `packages` cost, against plain `python3 -c`
measured in the same run.

    package_bench.py EXECBOX [--samples 8]

Builds a wheelhouse of two small pure-Python wheels (pip wheel, offline) under /var/tmp, starts
`execbox serve --wheelhouse` on a free port, and measures on one keep-alive connection, samples
interleaved:
  python3 -c      plain `python3 -c 'print(1)'` (the baseline)
  print(1)        POST /v1/execute of print(1), no packages
  set, first      the first execution with a list of packages: the package set is built (a
                  cold jail that installs them), then the execution takes it (a new version
                  clause each time, so each sample builds a set of its own)
  set, again      the same request again: the set is reused, nothing installed
  work dir        POST /v1/sessions with the same packages: an install into the work dir, what
                  every one-shot execution paid before package sets (and sessions still pay)
Prints p50 and mean in ms and each row's ratio to the baseline's p50; exits 1 when an answer is
wrong. Standard library only."""
import argparse
import http.client
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time

PYTHON = "/usr/bin/python3"


def die(msg):
    print(f"package_bench: {msg}", file=sys.stderr)
    sys.exit(1)


def build_wheel(into, name, module, source, depends=()):
    src = tempfile.mkdtemp(prefix="execbox-bench-wheel-")
    try:
        deps = ", ".join('"%s"' % d for d in depends)
        with open(os.path.join(src, "pyproject.toml"), "w") as f:
            f.write(textwrap.dedent(f"""\
                [build-system]
                requires = ["setuptools"]
                build-backend = "setuptools.build_meta"
                [project]
                name = "{name}"
                version = "1.0"
                dependencies = [{deps}]
                [tool.setuptools]
                py-modules = ["{module}"]
                """))
        with open(os.path.join(src, module + ".py"), "w") as f:
            f.write(source)
        done = subprocess.run([PYTHON, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "--no-index",
                               "--no-cache-dir", "-q", "-w", into, src], capture_output=True, text=True)
        if done.returncode != 0:
            die(f"pip wheel {name}: {done.stderr}")
    finally:
        shutil.rmtree(src, True)


class Client:
    def __init__(self, port, token):
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
        self.auth = {"Authorization": "Bearer " + token}

    def post(self, path, body):
        self.conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json", **self.auth})
        r = self.conn.getresponse()
        return r.status, json.loads(r.read() or b"null")

    def delete(self, path):
        self.conn.request("DELETE", path, headers=self.auth)
        r = self.conn.getresponse()
        r.read()


def timed(fn):
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1000


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("execbox")
    ap.add_argument("--samples", type=int, default=8)
    args = ap.parse_args()

    house = tempfile.mkdtemp(prefix="execbox-bench-wheels-", dir="/var/tmp")
    os.chmod(house, 0o755)
    log = tempfile.NamedTemporaryFile(prefix="execbox-bench-serve-", suffix=".log", delete=False)
    server = None
    try:
        build_wheel(house, "bench-dep", "bench_dep", "ANSWER = 42\n")
        build_wheel(house, "bench-pkg", "bench_pkg", "from bench_dep import ANSWER\n", depends=["bench-dep"])
        token = os.urandom(24).hex()
        server = subprocess.Popen([args.execbox, "serve", "--listen", "127.0.0.1:0", "--wheelhouse", house],
                                  stdout=subprocess.DEVNULL, stderr=log, env={**os.environ, "EXECBOX_API_KEYS": token})
        port = None
        for _ in range(1200):
            if server.poll() is not None:
                die("the server exited at start: " + open(log.name).read()[-2000:])
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", open(log.name).read())
            if m:
                port = int(m.group(1))
                break
            time.sleep(0.1)
        if port is None:
            die("the server did not start")
        client = Client(port, token)

        def execute(code, packages=None, want="1"):
            body = {"code": code}
            if packages:
                body["packages"] = packages
            status, r = client.post("/v1/execute", body)
            if status != 200 or r.get("status") != "ok" or r.get("stdout", "").strip() != want:
                die(f"unexpected answer {status}: {json.dumps(r)[:500]}")

        def session(packages):
            status, r = client.post("/v1/sessions", {"packages": packages})
            if status != 201 or len(r.get("installed", [])) != 2:
                die(f"unexpected session answer {status}: {json.dumps(r)[:500]}")
            client.delete(f"/v1/sessions/{r['id']}")

        code = "import bench_pkg\nprint(bench_pkg.ANSWER)"
        execute("print(1)")  # warm
        rows = {k: [] for k in ("python3 -c", "print(1)", "set, first", "set, again", "work dir")}
        for i in range(args.samples):
            packages = ["bench-pkg>=0.%d" % (i + 1)]  # a list not seen before: a set of its own
            rows["python3 -c"].append(timed(lambda: subprocess.run([PYTHON, "-c", "print(1)"], check=True,
                                                                    stdout=subprocess.DEVNULL)))
            rows["print(1)"].append(timed(lambda: execute("print(1)")))
            rows["set, first"].append(timed(lambda: execute(code, packages, "42")))
            rows["set, again"].append(timed(lambda: execute(code, packages, "42")))
            rows["work dir"].append(timed(lambda: session(packages)))
        base = sorted(rows["python3 -c"])[len(rows["python3 -c"]) // 2]
        print(f"{'':12} {'p50 ms':>9} {'mean ms':>9} {'x python3':>10}   ({args.samples} samples each)")
        for name, v in rows.items():
            p50 = sorted(v)[len(v) // 2]
            print(f"{name:12} {p50:9.1f} {sum(v) / len(v):9.1f} {p50 / base:10.2f}")
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=120)
        shutil.rmtree(house, True)
        os.unlink(log.name)


if __name__ == "__main__":
    main()
