"""`execbox mcp` against malformed input on stdio: every bad line gets its JSON-RPC error and
the server keeps serving (a ping afterwards still answers), and it exits 0 at end of input.
Usage: malformed_test.py EXECBOX"""
import json
import subprocess
import sys

execbox = sys.argv[1]
proc = subprocess.Popen([execbox, "mcp", "--server", "never"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
failures = 0


def send(line: bytes):
    proc.stdin.write(line + b"\n")
    proc.stdin.flush()


def reply():
    line = proc.stdout.readline()
    if not line:
        raise RuntimeError("server closed stdout")
    return json.loads(line.decode("utf-8"))  # strict: the server must emit valid UTF-8


def check(name, ok, detail=""):
    global failures
    print(("ok   " if ok else "FAIL ") + name + ("" if ok else " " + str(detail)))
    failures += 0 if ok else 1


def expect_error(name, line: bytes, code, rid=None):
    send(line)
    r = reply()
    check(name, r.get("error", {}).get("code") == code and r.get("id") == rid, r)


def rpc(rid, method, params=None):
    m = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not None:
        m["params"] = params
    return json.dumps(m).encode()


send(rpc(1, "initialize", {"protocolVersion": "2025-03-26", "capabilities": {},
                           "clientInfo": {"name": "t", "version": "0"}}))
check("older revision echoed", reply()["result"]["protocolVersion"] == "2025-03-26")
send(rpc(2, "initialize", {"protocolVersion": "1999-01-01", "capabilities": {},
                           "clientInfo": {"name": "t", "version": "0"}}))
check("unknown revision gets the newest", reply()["result"]["protocolVersion"] == "2025-11-25")
send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')

expect_error("bad JSON", b"{not json", -32700)
expect_error("invalid UTF-8 in JSON", b'{"jsonrpc":"2.0","id":3,"method":"ping","x":"\xff"}', -32700)
expect_error("deep nesting", b"[" * 100000 + b"]" * 100000, -32700)
expect_error("line over 16 MiB", b'{"jsonrpc":"2.0","id":4,"method":"ping","x":"' + b"a" * (17 << 20) + b'"}', -32700)
expect_error("unknown method", rpc(5, "no/such/method"), -32601, 5)
expect_error("params not an object", rpc(6, "tools/call", [1]), -32602, 6)
expect_error("tools/call without a name", rpc(7, "tools/call", {}), -32602, 7)
expect_error("unknown tool", rpc(8, "tools/call", {"name": "nope", "arguments": {}}), -32602, 8)
expect_error("batch", b"[" + rpc(9, "ping") + b"]", -32600)
expect_error("not an object", b"42", -32600)
expect_error("jsonrpc not a string", b'{"jsonrpc":2,"id":12,"method":"ping"}', -32600, 12)

send(rpc(10, "tools/call", {"name": "execute_python",
                             "arguments": {"code": "import sys; sys.stdout.buffer.write(b'\\xff\\xfe ok')"}}))
r = reply()
check("invalid UTF-8 output replaced", r.get("id") == 10 and "ok" in r["result"]["structuredContent"]["stdout"], r)

# Arguments the tool cannot take are a tool result (isError), not a protocol error: the model can act on it.
for rid, arguments, type_ in ((14, {"code": 1}, "invalid-arguments"),
                              (15, {"code": "1", "memory_mb": [1]}, "wrong-type"),
                              (16, {"code": "1", "memory_mb": -5}, "invalid-value"),
                              (17, {"code": "1", "memory_mb": 1 << 30}, "limit-exceeded"),
                              (18, {"code": "1", "gpus": 1}, "invalid-arguments")):
    send(rpc(rid, "tools/call", {"name": "execute_python", "arguments": arguments}))
    r = reply()
    result = r.get("result", {})
    text = "".join(c.get("text", "") for c in result.get("content", []))
    check(f"tool error {type_} for {arguments}", r.get("id") == rid and result.get("isError") is True
          and result.get("structuredContent", {}).get("type") == f"urn:execbox:problem:{type_}"
          and text.startswith(f"[execbox] refused ({type_}): "), r)

send(rpc(11, "ping"))
r = reply()
check("ping after all that", r == {"jsonrpc": "2.0", "id": 11, "result": {}}, r)

proc.stdin.close()
code = proc.wait(timeout=60)
check("exit 0 at end of input", code == 0, code)
print(f"{failures} failed")
sys.exit(1 if failures else 0)
