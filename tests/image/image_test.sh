#!/usr/bin/env bash
# make test-image: the container image for real, in podman containers with the runtime's
# default security (no --privileged, default seccomp profile, masked /proc, no cgroup access):
# --version, doctor, executions (a value, a plot, files), the limits (a memory bomb, a fork bomb,
# a timeout), the server over HTTP and its graceful stop, the hardened settings docs/deploy.md
# recommends (all capabilities dropped but SETUID/SETGID/SETFCAP, no-new-privileges, read-only root),
# a non-root user, and the clear refusal when CAP_SETUID is gone. Ends with "N passed, M failed".
set -uo pipefail
# shellcheck source=../lib/check.sh
. "$(dirname "$0")/../lib/check.sh"
build=${1:-build}
deb=$(ls "$build"/execbox_*_amd64.deb | tail -n 1)
version=$(basename "$deb" | sed 's/^execbox_\(.*\)_amd64\.deb$/\1/')
image=localhost/execbox:$version
work=$(mktemp -d /tmp/execbox-image-test.XXXXXX)
name=execbox-image-test-$$
podman=(podman)
command -v runc >/dev/null && podman=(podman --runtime "$(command -v runc)")
# This build machine's own limits are what a container may have: runc cannot raise them here
# (the defaults podman asks for are higher). A normal host needs neither flag.
nofile=$(ulimit -Hn)
[ "$nofile" = unlimited ] || [ "$nofile" -gt 65536 ] && nofile=65536
run=("${podman[@]}" run --rm --ulimit "nofile=$nofile:$nofile" --ulimit nproc=16384:16384)

cleanup() {
  "${podman[@]}" rm -f "$name" >/dev/null 2>&1
  rm -rf "$work"
}
trap cleanup EXIT


# field FILE EXPR: repr() of a value of the JSON result in FILE (a Python expression over r).
field() { python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(repr(($2)))" "$1"; }

expect_json() { # expect_json NAME EXPR WANT [run args...] -- code
  local what=$1 expr=$2 want=$3
  shift 3
  "${run[@]}" "$@" >"$work/result.json" 2>"$work/err"
  local got
  got=$(field "$work/result.json" "$expr" 2>&1)
  check "$what" sh -c "[ \"\$1\" = \"\$2\" ] || { echo \"got: \$1\"; echo \"want: \$2\"; cat '$work/err'; head -c 2000 '$work/result.json'; exit 1; }" _ "$got" "$want"
}

if ! "${podman[@]}" image exists "$image"; then
  echo "image_test: no image $image (make image)" >&2
  exit 1
fi

check "execbox --version in the image" sh -c "${run[*]} $image --version | grep -qx 'execbox $version'"
"${run[@]}" "$image" doctor >"$work/doctor" 2>&1
doctor_status=$?
check "doctor: execbox can run (exit 0)" sh -c "[ $doctor_status -eq 0 ] || { cat '$work/doctor'; exit 1; }"
check "doctor: the whole jail, going without the masked /proc and the refused hostname" \
  sh -c "grep -q '^ok    whole jail.*without /proc.*hostname unchanged' '$work/doctor' || { cat '$work/doctor'; exit 1; }"
check "the font cache was built when the image was" \
  sh -c "${run[*]} --entrypoint sh $image -c 'ls /var/cache/execbox/matplotlib/*.json'"

expect_json "an execution: stdout and the last value" 'r["status"], r["stdout"], r["result"]["data"]["text/plain"]' \
  "('ok', '42\\n', '[0, 1, 2]')" "$image" run --json -c $'print(6 * 7)\nlist(range(3))'
expect_json "isolation as it was in force: no /proc, the container's hostname, rlimits" \
  'r["isolation"]["proc"], r["isolation"]["hostname"], r["isolation"]["seccomp"], r["limits"]["memory_mb"]["enforced_by"]' \
  "(False, False, True, 'rlimit')" "$image" run --json -c 'pass'
expect_json "a plot comes back as PNG, a file the code wrote comes back" \
  '"image/png" in r["display"][0]["data"], [f["name"] for f in r["files"]]' "(True, ['out.csv'])" \
  "$image" run --json -c $'import matplotlib.pyplot as plt, pandas as pd\nplt.plot([1, 3, 2]); plt.show()\npd.DataFrame({"a": [1]}).to_csv("out.csv")'
expect_json "a memory bomb is memory_limit" 'r["status"], r["limits"]["memory_mb"]["value"]' "('memory_limit', 128)" \
  "$image" run --json --memory 128M -c $'x = bytearray(1 << 30)\nx[::4096] = b"x" * len(x[::4096])'
expect_json "a fork bomb is refused past max_processes" '"refused after" in r["stdout"]' True \
  "$image" run --json --max-processes 16 -c $'import os, time\nn = 0\ntry:\n    while True:\n        if os.fork() == 0:\n            time.sleep(30)\n        n += 1\nexcept OSError:\n    print("refused after", n)'
expect_json "an endless loop is a timeout" 'r["status"], r["error"]["ename"]' "('timeout', 'TimeoutError')" \
  "$image" run --json --timeout 2 -c 'while True: pass'
expect_json "the network is not there" 'r["status"], r["error"]["ename"]' "('error', 'PermissionError')" \
  "$image" run --json -c $'import socket\nsocket.create_connection(("1.1.1.1", 80), timeout=3)'

# The server, as the image runs by default (port on the host's loopback).
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
token=image-test-token-0123456789abcdef
"${podman[@]}" run -d --name "$name" --network host --ulimit "nofile=$nofile:$nofile" --ulimit nproc=16384:16384 \
  -e EXECBOX_API_KEYS=$token "$image" serve --listen "127.0.0.1:$port" >/dev/null
for _ in $(seq 600); do curl -sf "http://127.0.0.1:$port/readyz" >/dev/null && break; sleep 0.2; done
check "the server: /readyz" curl -sf "http://127.0.0.1:$port/readyz"
check "the server: an execution over HTTP" sh -c "curl -sf -H 'Authorization: Bearer $token' -H 'Content-Type: application/json' \
  -d '{\"code\": \"import numpy as np\\nnp.arange(6).sum()\"}' http://127.0.0.1:$port/v1/execute | grep -q '\"text/plain\":\"15\"'"
check "the server: no key, no service" sh -c "[ \$(curl -s -o /dev/null -w '%{http_code}' -d '{}' http://127.0.0.1:$port/v1/execute) = 401 ]"
check "the server: podman stop is a graceful stop (exit 0)" sh -c "${podman[*]} stop -t 60 $name >/dev/null && \
  [ \$(${podman[*]} inspect -f '{{.State.ExitCode}}' $name) = 0 ] && ${podman[*]} logs $name 2>&1 | grep -q 'execbox serve: stopped'"
"${podman[@]}" rm -f "$name" >/dev/null 2>&1
check "the server refuses every address without a key, saying so" \
  sh -c "${run[*]} $image 2>&1 | grep -q 'refusing to listen on 0.0.0.0 without an API key'"

# The settings docs/deploy.md, "Container image", recommends, and a non-root user.
hardened=(--cap-drop ALL --cap-add SETUID,SETGID,SETFCAP --security-opt no-new-privileges --read-only --tmpfs /tmp)
expect_json "hardened (caps dropped but SETUID/SETGID/SETFCAP, no-new-privileges, read-only root): runs" \
  'r["status"], r["stdout"]' "('ok', '1\\n')" "${hardened[@]}" "$image" run --json -c 'print(1)'
expect_json "hardened: the memory limit holds" 'r["status"]' "'memory_limit'" "${hardened[@]}" "$image" run --json \
  --memory 64M -c $'x = bytearray(1 << 30)\nx[::4096] = b"x" * len(x[::4096])'
expect_json "as a non-root user with every capability dropped: runs" 'r["status"], r["stdout"]' "('ok', '1000\\n')" \
  --user 65534:65534 --cap-drop ALL --security-opt no-new-privileges "$image" run --json -c 'import os; print(os.getuid())'
check "as root without CAP_SETUID: refused, naming what the container must allow" \
  sh -c "${run[*]} --cap-drop ALL $image run -c 'print(1)' 2>&1 | grep -q 'CAP_SETUID'"

summary
