#!/usr/bin/env bash
# ctest entry: set up the SDK, then run the client test against `EXECBOX mcp`.
#   run.sh EXECBOX BUILD_DIR            `execbox mcp --server never`: its own engine
#   run.sh EXECBOX BUILD_DIR server     `execbox mcp --server always` through a local
#                                       `execbox serve --unix` started here
set -uo pipefail
execbox=${1:?usage: run.sh EXECBOX BUILD_DIR [server]}
build_dir=${2:?usage: run.sh EXECBOX BUILD_DIR [server]}
mode=${3:-}
here=$(cd "$(dirname "$0")" && pwd)
bash "$here/setup.sh" "$build_dir"
status=$?
[[ $status -eq 0 ]] || exit $status
# setup.sh put the test next to the installed SDK.
if [[ $mode != server ]]; then
  exec node "$build_dir/mcp-node/client_test.mjs" "$execbox" --server never
fi
work=$(mktemp -d)
"$execbox" serve --listen none --unix "$work/execbox.sock" 2>"$work/serve.log" &
server=$!
trap 'kill -TERM $server 2>/dev/null; wait $server 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 1800); do
  grep -q 'listening on unix:' "$work/serve.log" && break
  kill -0 $server 2>/dev/null || { cat "$work/serve.log"; exit 1; }
  sleep 0.1
done
EXECBOX_SOCKET="$work/execbox.sock" node "$build_dir/mcp-node/client_test.mjs" "$execbox" --server always
status=$?
grep -E 'incident|error' "$work/serve.log" >&2
exit $status
