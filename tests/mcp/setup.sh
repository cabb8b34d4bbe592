#!/usr/bin/env bash
# Installs the official MCP TypeScript SDK (test-only) under BUILD_DIR/mcp-node, once, and puts
# the client tests beside it (Node resolves packages from a script's own directory upwards;
# NODE_PATH does not apply to ES modules). ctest runs it first, alone (the fixture mcp_sdk in
# tests/CMakeLists.txt); each test runs it again, which then only copies.
# Exit 77 (ctest's skip code) when node or npm is missing.
set -euo pipefail
build_dir=${1:?usage: setup.sh BUILD_DIR}
here=$(cd "$(dirname "$0")" && pwd)
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "SKIP: node and npm are needed for the MCP SDK client test (apt-get install nodejs npm)"
  exit 77
fi
prefix="$build_dir/mcp-node"
if [[ ! -f "$prefix/node_modules/@modelcontextprotocol/sdk/package.json" ]]; then
  mkdir -p "$prefix"
  installed=
  for attempt in 1 2; do
    if npm install --no-audit --no-fund --prefix "$prefix" @modelcontextprotocol/sdk >&2; then
      installed=1
      break
    fi
    sleep 5
  done
  if [[ -z $installed ]]; then
    echo "SKIP: npm could not install @modelcontextprotocol/sdk (is the npm registry reachable?)"
    exit 77
  fi
fi
# Replaced whole (a new file renamed over the old), so a test starting beside this one never
# reads half a script.
for script in client_test.mjs http_client_test.mjs process_steps.mjs; do
  cp "$here/$script" "$prefix/.$script.$$"
  mv -f "$prefix/.$script.$$" "$prefix/$script"
done
