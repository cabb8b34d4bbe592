#!/usr/bin/env bash
# make bench-e2b: E2B's SDK (the newest pinned pair, tests/e2b/sdk-new) against `execbox serve`
# on loopback; prints bench/e2b_sdk.mjs's table. ROUNDS (default 20) rounds per call.
set -euo pipefail
execbox=${1:?usage: e2b_bench.sh EXECBOX BUILD_DIR}
build_dir=${2:?usage: e2b_bench.sh EXECBOX BUILD_DIR}
here=$(cd "$(dirname "$0")" && pwd)
node_bin=$(bash "$here/../tests/e2b/setup.sh" "$build_dir")
key=e2b_$(head -c 20 /dev/urandom | od -An -tx1 | tr -d ' \n')
log=$(mktemp "${TMPDIR:-/tmp}/execbox-e2b-bench.XXXXXX")
config=$(mktemp "${TMPDIR:-/tmp}/execbox-e2b-bench.XXXXXX.toml")
# A key without a rate limit: the rounds follow each other as fast as they answer.
printf '[[keys]]\nid = "bench"\nsha256 = "%s"\nrate_per_second = 100000\nburst = 100000\n' \
  "$(printf %s "$key" | sha256sum | cut -d' ' -f1)" >"$config"
"$execbox" serve --config "$config" --listen 127.0.0.1:0 2>"$log" &
server=$!
trap 'kill -TERM $server 2>/dev/null; wait $server 2>/dev/null; rm -f "$log" "$config"' EXIT
url=
for _ in $(seq 1 1200); do
  url=$(grep -o 'listening on http://[^ ]*' "$log" | head -1 | sed 's/^listening on //' || true)
  [[ -n $url ]] && break
  sleep 0.1
done
[[ -n $url ]] || { cat "$log" >&2; exit 1; }
cp "$here/e2b_sdk.mjs" "$build_dir/e2b-sdk/new/e2b_sdk.mjs"
E2B_API_URL="$url" E2B_SANDBOX_URL="$url" E2B_API_KEY="$key" \
  "$node_bin" "$build_dir/e2b-sdk/new/e2b_sdk.mjs" "${ROUNDS:-20}" "$key"
