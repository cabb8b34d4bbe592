"""`make test-load`: `execbox serve` under a key that floods, as issue 34 asks of it.

    tests/load/fair_load.py EXECBOX [--seconds S] [--flood N] [--samples N]

Starts the real server (tests/http/harness.py) with two configured keys whose rate and
concurrency caps are lifted, so that only the server's admission and fairness decide. Key B first
sends --samples print(1) executions one at a time on an idle server (its idle median). Then key A
floods, --flood threads each sending executions back to back for --seconds, twice, while B keeps
sending print(1) one at a time: first print(1) alone (fairness: B's median under the flood must
stay within --max-ratio, 3, times its idle one), then a mix as a model's traffic turns hostile
(mostly print(1); memory bombs under a 64 MB limit, endless loops under a 1 s timeout, a crash
by SIGSEGV, a 2 MB output). In both:
  - none of B's requests fails (200, status ok, stdout "1");
  - nothing is lost: every request of A gets a Result (200) or a refusal with a problem body
    (429/503), never a socket error, a timeout or anything else;
  - no zygote is lost (/metrics execbox_warm_workers_replaced_total stays 0);
and after them the server still answers /readyz and stops cleanly on SIGTERM.
Prints what it measured and ends with "N passed, N failed"; exit status 1 on any failure."""
import argparse
import os
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "http"))
import harness  # noqa: E402

KEY_FLOOD = "load-key-flood-0123456789abcdef"
KEY_STEADY = "load-key-steady-0123456789abcdef"

PRINT_MIX = [("print", "print(1)", None)]
# What a flooding client sends, in turn: mostly quick code, some of it hostile. (Not a self-kill:
# a warm one-shot child is pid 1 of its namespace, where a signal it sends itself without a
# handler is ignored, as for any init; a fault's SIGSEGV is not.)
HOSTILE_MIX = [
    ("print", "print(1)", None),
    ("print", "print(1)", None),
    ("print", "print(sum(range(1000)))", None),
    ("memory", "x = bytearray(512 << 20)\nx[::4096] = b'x' * len(x[::4096])", {"memory_mb": 64}),
    ("print", "print(1)", None),
    ("loop", "while True:\n    pass", {"timeout_seconds": 1}),
    ("print", "import json\nprint(json.dumps({'a': 1}))", None),
    ("crash", "import ctypes\nctypes.string_at(0)", None),
    ("print", "print(1)", None),
    ("output", "import sys\nsys.stdout.write('x' * (2 << 20))", None),
]


def config():
    lifted = "max_concurrent = 1048576\nmax_queued = 1048576\nrate_per_second = 1000000000\nburst = 1000000000\n"
    return "".join(f'[[keys]]\nid = "{name}"\nsha256 = "{harness.sha256_hex(token)}"\n{lifted}\n'
                   for name, token in (("flood", KEY_FLOOD), ("steady", KEY_STEADY)))


class Tally:
    def __init__(self):
        self.lock = threading.Lock()
        self.by_kind = {}
        self.lost = []

    def add(self, kind, outcome):
        with self.lock:
            counts = self.by_kind.setdefault(kind, {})
            counts[outcome] = counts.get(outcome, 0) + 1

    def lose(self, what):
        with self.lock:
            self.lost.append(what)


def flood(server, mix, deadline, index, tally):
    i = index
    while time.monotonic() < deadline:
        kind, code, limits = mix[i % len(mix)]
        i += 1
        fields = {"limits": limits} if limits else {}
        try:
            r = server.execute(code, token=KEY_FLOOD, **fields)
        except Exception as exc:  # noqa: BLE001 - a socket error or timeout is a lost request
            tally.lose(f"{kind}: {type(exc).__name__}: {exc}")
            continue
        if r.status == 200:
            try:
                tally.add(kind, r.json()["status"])
            except (ValueError, KeyError) as exc:
                tally.lose(f"{kind}: 200 without a Result: {exc}")
        elif r.status in (429, 503) and (r.header("content-type") or "").startswith("application/problem+json"):
            tally.add(kind, f"{r.status} {r.json().get('type', '').rsplit('/', 1)[-1]}")
        else:
            tally.lose(f"{kind}: HTTP {r.status}: {r.body[:200]!r}")


def steady(server, until, samples=None):
    """B's print(1) one at a time: (latencies in ms, failures)."""
    latencies, failures = [], []
    while (samples is None and time.monotonic() < until) or (samples is not None and len(latencies) < samples):
        t = time.monotonic()
        try:
            r = server.execute("print(1)", token=KEY_STEADY)
            ms = (time.monotonic() - t) * 1000
            if r.status != 200:
                failures.append(f"HTTP {r.status}: {r.body[:200]!r}")
            elif r.json().get("status") != "ok" or r.json().get("stdout") != "1\n":
                failures.append(f"status {r.json().get('status')}: {r.json().get('stderr', '')[:200]!r}")
            latencies.append(ms)
        except Exception as exc:  # noqa: BLE001
            failures.append(f"{type(exc).__name__}: {exc}")
    return latencies, failures


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("execbox")
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--flood", type=int, default=64)
    ap.add_argument("--samples", type=int, default=30)
    ap.add_argument("--max-ratio", type=float, default=3.0)
    a = ap.parse_args()
    os.environ["EXECBOX"] = os.path.abspath(a.execbox)
    harness.REQUEST_TIMEOUT = max(harness.REQUEST_TIMEOUT, 300)

    server = harness.Server(keys=(), config=config(), token=KEY_STEADY, name="load")
    checks = []

    def check(name, ok, detail=""):
        checks.append(ok)
        print(f"{'ok  ' if ok else 'FAIL'} {name}{': ' + detail if detail else ''}", flush=True)

    server.start()
    try:
        # The pool's first children come from a cold start: a few requests before the idle median.
        steady(server, 0, samples=5)
        time.sleep(2)
        idle, idle_failures = steady(server, 0, samples=a.samples)
        idle_median = statistics.median(idle)
        print(f"idle: B's print(1) median {idle_median:.1f} ms over {len(idle)}", flush=True)

        for name, mix, fair in (("print(1)", PRINT_MIX, True), ("a hostile mix", HOSTILE_MIX, False)):
            tally = Tally()
            deadline = time.monotonic() + a.seconds
            threads = [threading.Thread(target=flood, args=(server, mix, deadline, i, tally), daemon=True)
                       for i in range(a.flood)]
            for t in threads:
                t.start()
            time.sleep(min(5.0, a.seconds / 4))  # the flood fills the queue first
            loaded, loaded_failures = steady(server, deadline)
            for t in threads:
                t.join(harness.REQUEST_TIMEOUT + 30)
            stuck = sum(t.is_alive() for t in threads)
            loaded_median = statistics.median(loaded) if loaded else float("inf")
            ratio = loaded_median / idle_median
            print(f"{a.flood} of {name} for {a.seconds:.0f} s: B's print(1) median {loaded_median:.1f} ms over "
                  f"{len(loaded)} ({ratio:.2f}x idle), p90 "
                  f"{sorted(loaded)[int(len(loaded) * 0.9)] if loaded else 0:.1f} ms", flush=True)
            for kind, counts in sorted(tally.by_kind.items()):
                print(f"  A {kind}: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())), flush=True)
            replaced = server.metrics(token=KEY_STEADY).get("execbox_warm_workers_replaced_total", 0)
            check(f"{name}: B's requests all succeed, idle and under the flood",
                  not idle_failures and not loaded_failures, "; ".join((idle_failures + loaded_failures)[:5]))
            check(f"{name}: nothing of A's is lost (a Result or a problem body each)", not tally.lost and not stuck,
                  f"{len(tally.lost)} lost, {stuck} threads stuck: " + "; ".join(tally.lost[:5]))
            check(f"{name}: no zygote lost", replaced == 0, f"execbox_warm_workers_replaced_total {replaced}")
            if fair:
                check(f"{name}: B's median under the flood within {a.max_ratio:g}x its idle median",
                      ratio <= a.max_ratio, f"{ratio:.2f}x")
        ready = server.request("GET", "/readyz", auth=False)
        check("/readyz after the floods", ready.status == 200, f"HTTP {ready.status}")
    finally:
        server.signal()
        code = server.wait_exit()
    check("SIGTERM stops the server cleanly", code == 0, f"exit status {code}")
    failed = checks.count(False)
    print(f"{len(checks) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
