#!/usr/bin/env bash
# ctest entry: set up the SDK, then run the client test against `EXECBOX mcp`.
set -uo pipefail
execbox=${1:?usage: run.sh EXECBOX BUILD_DIR}
build_dir=${2:?usage: run.sh EXECBOX BUILD_DIR}
here=$(cd "$(dirname "$0")" && pwd)
bash "$here/setup.sh" "$build_dir"
status=$?
[[ $status -eq 0 ]] || exit $status
# Node resolves packages from the script's directory upwards; NODE_PATH does not apply to ES
# modules, so the test is copied next to the installed SDK.
cp "$here/client_test.mjs" "$build_dir/mcp-node/client_test.mjs"
exec node "$build_dir/mcp-node/client_test.mjs" "$execbox"
