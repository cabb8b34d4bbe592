#!/usr/bin/env bash
# Installs the official MCP TypeScript SDK (test-only) under BUILD_DIR/mcp-node, once.
# Exit 77 (ctest's skip code) when node or npm is missing.
set -euo pipefail
build_dir=${1:?usage: setup.sh BUILD_DIR}
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "SKIP: node and npm are needed for the MCP SDK client test (apt-get install nodejs npm)"
  exit 77
fi
prefix="$build_dir/mcp-node"
if [[ -f "$prefix/node_modules/@modelcontextprotocol/sdk/package.json" ]]; then
  exit 0
fi
mkdir -p "$prefix"
for attempt in 1 2; do
  if npm install --no-audit --no-fund --prefix "$prefix" @modelcontextprotocol/sdk >&2; then
    exit 0
  fi
  sleep 5
done
echo "SKIP: npm could not install @modelcontextprotocol/sdk (is the npm registry reachable?)"
exit 77
