"""Sequential latency for `make bench-http` (bench/http_bench.sh), against a running
`execbox serve`: plain `python3 -c` (the baseline, measured in the same run), GET /livez, and
POST /v1/execute of print(1) and of a numpy + matplotlib plot, on one keep-alive connection.

    http_latency.py --url http://127.0.0.1:PORT [--prints 30] [--plots 10] [--settle-ms 75]

The token comes from EXECBOX_BENCH_TOKEN. Samples are interleaved (a burst of machine noise hits
every row alike). Before each warm sample the client waits, outside the sample, until the pool
holds its prepared children again (GET /metrics, on a second connection) + settle-ms, as
bench/execbox_bench.cc does for its warm rows. Prints its part of the table on stdout; exits 1
when an answer is wrong. Standard library only."""
import argparse
import http.client
import json
import os
import re
import sys
import time
import urllib.parse

PYTHON = "/usr/bin/python3"  # the interpreter the sandbox runs (a pyenv shim would add ~50 ms)
PRINT = "print(1)"
PLOT_HTTP = "import numpy as np, matplotlib.pyplot as plt; plt.plot(np.arange(10)); plt.show()"
# The same imports and figure for plain python3, saved as PNG (execbox turns plt.show() into one).
PLOT_PLAIN = ("import io, numpy as np, matplotlib.pyplot as plt; plt.plot(np.arange(10)); "
              "plt.savefig(io.BytesIO(), format='png')")


def percentile(v, p):
    """As bench/execbox_bench.cc: the sorted sample at index min(n-1, p*n)."""
    if not v:
        return 0.0
    s = sorted(v)
    return s[min(len(s) - 1, int(p * len(s)))]


def mean(v):
    return sum(v) / len(v) if v else 0.0


def die(msg):
    print(f"http_latency: {msg}", file=sys.stderr)
    sys.exit(1)


class Client:
    def __init__(self, url, token):
        u = urllib.parse.urlsplit(url)
        self.host, self.port = u.hostname, u.port
        self.token = token
        self.conn = http.client.HTTPConnection(self.host, self.port, timeout=120)
        self.metrics_conn = http.client.HTTPConnection(self.host, self.port, timeout=30)
        self.reconnects = 0

    def _request(self, conn, method, path, body=None, headers=None):
        h = {"Authorization": f"Bearer {self.token}"}
        if headers:
            h.update(headers)
        conn.request(method, path, body=body, headers=h)
        r = conn.getresponse()
        data = r.read()
        if r.getheader("Connection", "").lower() == "close":
            self.reconnects += 1
            conn.close()  # http.client reconnects on the next request
        return r.status, data

    def execute(self, code):
        body = json.dumps({"code": code}).encode()
        t = time.perf_counter()
        status, data = self._request(self.conn, "POST", "/v1/execute", body, {"Content-Type": "application/json"})
        ms = (time.perf_counter() - t) * 1000
        if status != 200:
            die(f"POST /v1/execute {code!r}: HTTP {status}: {data[:500]!r}")
        return ms, json.loads(data)

    def livez(self):
        t = time.perf_counter()
        status, data = self._request(self.conn, "GET", "/livez")
        ms = (time.perf_counter() - t) * 1000
        if status != 200:
            die(f"GET /livez: HTTP {status}")
        return ms

    def gauges(self):
        status, data = self._request(self.metrics_conn, "GET", "/metrics")
        if status != 200:
            die(f"GET /metrics: HTTP {status}")
        out = {}
        for m in re.finditer(rb"^(execbox_[a-z_]+) ([0-9.e+]+)$", data, re.M):
            out[m.group(1).decode()] = float(m.group(2))
        for m in re.finditer(rb'^execbox_prepared_children_target\{sort="([a-z]+)"\} ([0-9.e+]+)$', data, re.M):
            out["target_" + m.group(1).decode()] = float(m.group(2))
        return out

    def pool_ready(self):
        """Whether each sort of prepared child is at what the pool aims for now."""
        g = self.gauges()
        have = {"full": "execbox_prepared_children", "lean": "execbox_lean_prepared_children",
                "session": "execbox_prepared_session_children"}
        return all(g.get(name, 0) >= g.get("target_" + sort, 0) for sort, name in have.items())


def run_plain(code, env):
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        t = time.perf_counter()
        pid = os.posix_spawn(PYTHON, ["python3", "-c", code], env,
                             file_actions=[(os.POSIX_SPAWN_DUP2, devnull, 1), (os.POSIX_SPAWN_DUP2, devnull, 2)])
        _, status = os.waitpid(pid, 0)
        ms = (time.perf_counter() - t) * 1000
    finally:
        os.close(devnull)
    if status != 0:
        die(f"python3 -c {code!r} failed (wait status {status})")
    return ms


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--prints", type=int, default=30)
    ap.add_argument("--plots", type=int, default=10)
    ap.add_argument("--settle-ms", type=float, default=75)
    a = ap.parse_args()
    token = os.environ.get("EXECBOX_BENCH_TOKEN") or die("EXECBOX_BENCH_TOKEN is not set")
    c = Client(a.url, token)
    env = {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/tmp"), "MPLBACKEND": "Agg"}

    # The pool's full size: what it aims to hold of each sort of child (/metrics), which follows
    # the traffic each sort sees.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not c.pool_ready():
        time.sleep(0.05)
    not_refilled = 0

    def wait_pool():
        nonlocal not_refilled
        end = time.monotonic() + 30
        while not c.pool_ready():
            if time.monotonic() > end:
                not_refilled += 1
                break
            time.sleep(0.01)
        time.sleep(a.settle_ms / 1000)

    usage = {"print": [], "plot": []}

    def warm(code, kind):
        wait_pool()
        ms, r = c.execute(code)
        if r.get("status") != "ok":
            die(f"{kind}: status {r.get('status')}: {json.dumps(r)[:800]}")
        if kind == "print" and r.get("stdout") != "1\n":
            die(f"print(1): stdout {r.get('stdout')!r}")
        if kind == "plot" and not any("image/png" in (d.get("data") or d) for d in r.get("display", [])):
            die(f"plot: no image/png in display: {json.dumps(r)[:800]}")
        u = r.get("usage", {})
        usage[kind].append((ms, u.get("setup_ms", 0), u.get("wall_ms", 0)))
        return ms

    rows = [
        ("python3 -c (baseline)", False, lambda: run_plain(PRINT, env)),
        ("GET /livez (HTTP floor)", False, c.livez),
        ("POST /v1/execute, warm", False, lambda: warm(PRINT, "print")),
        ("python3 -c (baseline for plots)", True, lambda: run_plain(PLOT_PLAIN, env)),
        ("POST /v1/execute, warm plot", True, lambda: warm(PLOT_HTTP, "plot")),
    ]
    samples = [[] for _ in rows]
    # Warm-up: page cache, matplotlib's font cache, the server's first answers.
    for i in range(2):
        for name, plot, fn in rows:
            fn()
    usage = {"print": [], "plot": []}
    every = max(1, a.prints // max(1, a.plots))
    plots_done = 0
    for i in range(a.prints):
        do_plot = i % every == 0 and plots_done < a.plots
        plots_done += do_plot
        for k, (name, plot, fn) in enumerate(rows):
            if plot and not do_plot:
                continue
            samples[k].append(fn())

    base = percentile(samples[0], 0.5)
    plot_base = percentile(samples[3], 0.5)
    print(f"{'print(1), sequential':<38} {'p50 ms':>9} {'p95 ms':>9} {'1/p50 /s':>9} {'vs print(1)':>11} "
          f"{'vs py plot':>11}")
    for k, (name, plot, fn) in enumerate(rows):
        if k == 3:
            print("numpy + matplotlib plot -> PNG")
        p50 = percentile(samples[k], 0.5)
        line = (f"  {name:<36} {p50:9.1f} {percentile(samples[k], 0.95):9.1f} {1000 / p50:9.1f} "
                f"{p50 / base:10.2f}x")
        if plot:
            line += f" {p50 / plot_base:10.2f}x"
        print(line)
    print(f"  ({len(samples[0])} print(1) and {len(samples[3])} plot samples per row, interleaved; each warm "
          f"sample waits, outside the sample,\n   for the pool's prepared children + "
          f"{a.settle_ms:.0f} ms)")
    for kind, label in (("print", "warm print(1)"), ("plot", "warm plot")):
        u = usage[kind]
        if u:
            total, setup, wall = mean([x[0] for x in u]), mean([x[1] for x in u]), mean([x[2] for x in u])
            print(f"  {label} over HTTP, mean {total:.1f} ms = hand-over (setup_ms) {setup:.1f} + code to exit "
                  f"(wall_ms) {wall:.1f} + the rest (HTTP, JSON, engine) {total - setup - wall:.1f} ms")
    if not_refilled:
        print(f"  note: {not_refilled} warm samples started before the pool refilled (waited 30 s)")
    if c.reconnects:
        print(f"  note: the server closed the keep-alive connection {c.reconnects} time(s) (Connection: close)")


if __name__ == "__main__":
    main()
