#!/usr/bin/env bash
# ctest entry: MCP over Streamable HTTP. Sets up the SDK (setup.sh), starts `EXECBOX serve` on a
# loopback port and runs http_client_test.mjs against its /mcp.
set -uo pipefail
execbox=${1:?usage: http_run.sh EXECBOX BUILD_DIR}
build_dir=${2:?usage: http_run.sh EXECBOX BUILD_DIR}
here=$(cd "$(dirname "$0")" && pwd)
bash "$here/setup.sh" "$build_dir"
status=$?
[[ $status -eq 0 ]] || exit $status
source "$here/http_common.sh"
log=$(mktemp "${TMPDIR:-/tmp}/execbox-mcp-http.XXXXXX")
start_server "$execbox" "$log" || exit 1
# setup.sh put the test next to the installed SDK.
node "$build_dir/mcp-node/http_client_test.mjs" "$SERVER_URL/mcp" "$TOKEN" "$TOKEN2"
status=$?
stop_server
if [[ $status -ne 0 ]]; then
  echo "--- server log" >&2
  tail -n 50 "$log" >&2
fi
rm -f "$log"
exit $status
