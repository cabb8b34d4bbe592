#!/usr/bin/env bash
# ctest entry: E2B's SDKs (the newest pair and an older one, pinned in sdk-*/) against `EXECBOX
# serve` on a loopback port, with only E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY set, as a
# user switching from E2B would. PAIR (new or old) runs one pair; ctest runs each as its own entry.
#   run.sh EXECBOX BUILD_DIR [PAIR]
set -uo pipefail
execbox=${1:?usage: run.sh EXECBOX BUILD_DIR [PAIR]}
build_dir=${2:?usage: run.sh EXECBOX BUILD_DIR [PAIR]}
pairs=("${3:-new}")
[[ $# -ge 3 ]] || pairs=(new old)
here=$(cd "$(dirname "$0")" && pwd)
node_bin=$(bash "$here/setup.sh" "$build_dir")
status=$?
[[ $status -eq 0 ]] || exit $status

# Keys as E2B's dashboard makes them (some SDK versions refuse any other shape), and one not.
key=e2b_$(head -c 20 /dev/urandom | od -An -tx1 | tr -d ' \n')
other=e2b_$(head -c 20 /dev/urandom | od -An -tx1 | tr -d ' \n')
plain=plain-$(head -c 18 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n')
# A key capped at one sandbox (max_sessions = 1): its second is refused with E2B's rate-limit error.
capped=e2b_$(head -c 20 /dev/urandom | od -An -tx1 | tr -d ' \n')
log=$(mktemp "${TMPDIR:-/tmp}/execbox-e2b.XXXXXX")
# The main key without the default rate (20 a second, 40 at once): the SDK's file and process
# calls are executions too, and the checks run them as fast as the machine goes. The others
# keep the defaults.
config=$(mktemp "${TMPDIR:-/tmp}/execbox-e2b-config.XXXXXX")
printf '[e2b]\ndomain = "execbox.test"\n' >"$config"
printf '[[keys]]\nid = "e2b-test"\nsha256 = "%s"\nrate_per_second = 1000\nburst = 1000\nmax_concurrent = 16\n' \
  "$(printf %s "$key" | sha256sum | cut -d' ' -f1)" >>"$config"
printf '[[keys]]\nid = "e2b-capped"\nsha256 = "%s"\nmax_sessions = 1\n' \
  "$(printf %s "$capped" | sha256sum | cut -d' ' -f1)" >>"$config"
EXECBOX_API_KEYS="$other,$plain" "$execbox" serve --config "$config" --listen 127.0.0.1:0 2>"$log" &
server=$!
stop() {
  kill -TERM "$server" 2>/dev/null
  for _ in $(seq 1 100); do kill -0 "$server" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$server" 2>/dev/null
  wait "$server" 2>/dev/null
}
trap stop EXIT
url=
for _ in $(seq 1 1200); do
  url=$(grep -o 'listening on http://[^ ]*' "$log" | head -1 | sed 's/^listening on //')
  [[ -n $url ]] && break
  kill -0 "$server" 2>/dev/null || break
  sleep 0.1
done
if [[ -z $url ]]; then
  echo "execbox serve did not start:" >&2
  cat "$log" >&2
  exit 1
fi

status=0
for pair in "${pairs[@]}"; do
  dir="$build_dir/e2b-sdk/$pair"
  # Node resolves the SDK from the script's own directory upwards.
  cp "$here/sdk_test.mjs" "$dir/sdk_test.mjs"
  versions=$(cd "$dir" && "$node_bin" -e 'const r=(p)=>JSON.parse(require("fs").readFileSync(`node_modules/${p}/package.json`)).version; console.log(`@e2b/code-interpreter ${r("@e2b/code-interpreter")}, e2b ${r("e2b")}`)')
  echo "# $versions"
  # The newer SDKs take any key; older ones insist on e2b_<hex>.
  plain_arg=
  [[ $pair == new ]] && plain_arg=$plain
  env -i PATH="$PATH" HOME="${HOME:-/root}" E2B_API_URL="$url" E2B_SANDBOX_URL="$url" E2B_API_KEY="$key" EXECBOX_CAPPED_KEY="$capped" \
    "$node_bin" "$dir/sdk_test.mjs" "$pair" "$other" $plain_arg || status=1
done
if [[ $status -ne 0 ]]; then
  echo "--- server log" >&2
  tail -n 60 "$log" >&2
fi
rm -f "$log" "$config"
exit $status
