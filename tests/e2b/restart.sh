#!/usr/bin/env bash
# ctest entry: E2B's SDK (the newest pair) across a graceful restart of `execbox serve` with a
# session state dir (restart_test.mjs says what is checked on each side of it).
#   restart.sh EXECBOX BUILD_DIR
set -uo pipefail
execbox=${1:?usage: restart.sh EXECBOX BUILD_DIR}
build_dir=${2:?usage: restart.sh EXECBOX BUILD_DIR}
here=$(cd "$(dirname "$0")" && pwd)
node_bin=$(bash "$here/setup.sh" "$build_dir")
status=$?
[[ $status -eq 0 ]] || exit $status

key=e2b_$(head -c 20 /dev/urandom | od -An -tx1 | tr -d ' \n')
state=$(mktemp -d "${TMPDIR:-/tmp}/execbox-e2b-state.XXXXXX")
log=$(mktemp "${TMPDIR:-/tmp}/execbox-e2b-restart.XXXXXX")
handoff=$(mktemp "${TMPDIR:-/tmp}/execbox-e2b-handoff.XXXXXX")
server=
url=
start() {
  EXECBOX_API_KEYS="$key" "$execbox" serve --session-state-dir "$state" --listen 127.0.0.1:0 2>>"$log" &
  server=$!
  url=
  for _ in $(seq 1 1200); do
    url=$(grep -o 'listening on http://[^ ]*' "$log" | tail -1 | sed 's/^listening on //')
    [[ -n $url ]] && break
    kill -0 "$server" 2>/dev/null || break
    sleep 0.1
  done
  [[ -n $url ]] || { echo "execbox serve did not start:" >&2; cat "$log" >&2; exit 1; }
}
stop() {
  [[ -n $server ]] || return 0
  kill -TERM "$server" 2>/dev/null
  for _ in $(seq 1 300); do kill -0 "$server" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$server" 2>/dev/null
  wait "$server" 2>/dev/null
  server=
}
cleanup() {
  stop
  rm -rf "$state" "$log" "$handoff"
}
trap cleanup EXIT

dir="$build_dir/e2b-sdk/new"
cp "$here/restart_test.mjs" "$dir/restart_test.mjs"
run_phase() {
  env -i PATH="$PATH" HOME="${HOME:-/root}" E2B_API_URL="$url" E2B_SANDBOX_URL="$url" E2B_API_KEY="$key" \
    "$node_bin" "$dir/restart_test.mjs" "$1" "$handoff"
}
status=0
start
run_phase before || status=1
stop
: >"$log.old"; cat "$log" >>"$log.old"; : >"$log"
start
run_phase after || status=1
if [[ $status -ne 0 ]]; then
  echo "--- server log" >&2
  cat "$log.old" "$log" | tail -n 60 >&2
fi
rm -f "$log.old"
exit $status
