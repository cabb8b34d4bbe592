#!/usr/bin/env bash
# ctest entry: the official MCP conformance runner (@modelcontextprotocol/conformance, npm,
# test-only, pinned) against `EXECBOX serve`'s /mcp, for the scenarios that apply to a server
# whose tools are execute_python and the session tools. Exit 77 (skip) without node or npm.
#
# Scenarios run (each must pass; warnings allowed):
#   server-initialize, ping, tools-list  - lifecycle and listing
#   server-sse-multiple-streams          - concurrent POSTs in one MCP session
#   server-sse-polling                   - POST SSE streams (warns: no priming event or retry
#                                          field, since streams are not resumable)
#   dns-rebinding-protection             - Host/Origin of evil.example.com refused, localhost allowed
# Not applicable (they call test tools or features this server does not have, and fail with
# -32601/-32602): logging-set-level, completion-complete, tools-call-* (test_simple_text,
# test_image_content, ...), json-schema-2020-12, elicitation-*, resources-*, prompts-*.
#
# The runner's client sends no credentials, so it talks to a loopback proxy (auth_proxy.mjs)
# that adds the bearer token and changes nothing else.
set -uo pipefail
execbox=${1:?usage: conformance_run.sh EXECBOX BUILD_DIR}
build_dir=${2:?usage: conformance_run.sh EXECBOX BUILD_DIR}
here=$(cd "$(dirname "$0")" && pwd)
version=0.1.16
scenarios=(server-initialize ping tools-list server-sse-multiple-streams server-sse-polling dns-rebinding-protection)

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "SKIP: node and npm are needed for the MCP conformance runner"
  exit 77
fi
prefix="$build_dir/mcp-conformance"
runner="$prefix/node_modules/@modelcontextprotocol/conformance/dist/index.js"
if ! grep -q "\"version\": \"$version\"" "$prefix/node_modules/@modelcontextprotocol/conformance/package.json" 2>/dev/null; then
  mkdir -p "$prefix"
  installed=0
  for attempt in 1 2; do
    if npm install --no-audit --no-fund --prefix "$prefix" "@modelcontextprotocol/conformance@$version" >&2; then
      installed=1
      break
    fi
    sleep 5
  done
  if [[ $installed -eq 0 ]]; then
    echo "SKIP: npm could not install @modelcontextprotocol/conformance@$version"
    exit 77
  fi
fi
node_flags=()
if (( $(node -p 'process.versions.node.split(".")[0]') < 22 )); then
  node_flags=(--import "$here/node20_fs_shim.mjs")
fi

source "$here/http_common.sh"
log=$(mktemp "${TMPDIR:-/tmp}/execbox-mcp-conformance.XXXXXX")
start_server "$execbox" "$log" || exit 1

proxy_log=$(mktemp "${TMPDIR:-/tmp}/execbox-mcp-proxy.XXXXXX")
node "$here/auth_proxy.mjs" "$SERVER_URL" "$TOKEN" >"$proxy_log" 2>&1 &
proxy_pid=$!
trap 'kill "$proxy_pid" 2>/dev/null; wait "$proxy_pid" 2>/dev/null; stop_server' EXIT
proxy_url=
for _ in $(seq 1 100); do
  proxy_url=$(grep -o 'http://localhost:[0-9]*' "$proxy_log" | head -1)
  [[ -n "$proxy_url" ]] && break
  sleep 0.1
done
if [[ -z "$proxy_url" ]]; then
  echo "the auth proxy did not start:" >&2
  cat "$proxy_log" >&2
  exit 1
fi

results="$prefix/results"
rm -rf "$results"
failed=()
for scenario in "${scenarios[@]}"; do
  echo "=== $scenario"
  if ! node "${node_flags[@]}" "$runner" server --url "$proxy_url/mcp" --scenario "$scenario" -o "$results"; then
    failed+=("$scenario")
  fi
done
echo "conformance $version: $(( ${#scenarios[@]} - ${#failed[@]} ))/${#scenarios[@]} scenarios passed${failed:+; failed: ${failed[*]}}"
if [[ ${#failed[@]} -gt 0 ]]; then
  echo "--- server log" >&2
  tail -n 50 "$log" >&2
fi
rm -f "$log" "$proxy_log"
[[ ${#failed[@]} -eq 0 ]]
