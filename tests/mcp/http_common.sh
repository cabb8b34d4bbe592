# Sourced by the HTTP test runners: starts `EXECBOX serve` on a free loopback port with fresh API
# keys and stops it on exit.
#   start_server EXECBOX LOG   sets SERVER_PID, SERVER_URL (http://127.0.0.1:PORT), TOKEN, TOKEN2
# EXECBOX_SERVE_ARGS adds flags to `serve`.

new_token() { head -c 24 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n'; }

stop_server() {
  if [[ -n "${SERVER_PID:-}" ]] && kill -0 "$SERVER_PID" 2>/dev/null; then
    kill -TERM "$SERVER_PID" 2>/dev/null
    for _ in $(seq 1 100); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$SERVER_PID" 2>/dev/null
    wait "$SERVER_PID" 2>/dev/null
  fi
  SERVER_PID=
}

start_server() {
  local execbox=$1 log=$2
  TOKEN=$(new_token)
  TOKEN2=$(new_token)
  # shellcheck disable=SC2086  # EXECBOX_SERVE_ARGS is a list of flags
  EXECBOX_API_KEYS="$TOKEN,$TOKEN2" "$execbox" serve --listen 127.0.0.1:0 ${EXECBOX_SERVE_ARGS:-} 2>"$log" &
  SERVER_PID=$!
  trap stop_server EXIT
  # The warm pool starts before the server listens: allow it two minutes.
  for _ in $(seq 1 1200); do
    SERVER_URL=$(grep -o 'listening on http://[^ ]*' "$log" | head -1 | sed 's/^listening on //')
    [[ -n "$SERVER_URL" ]] && return 0
    if ! kill -0 "$SERVER_PID" 2>/dev/null; then
      echo "execbox serve exited before listening:" >&2
      cat "$log" >&2
      return 1
    fi
    sleep 0.1
  done
  echo "execbox serve did not report listening within 120 s:" >&2
  cat "$log" >&2
  return 1
}
