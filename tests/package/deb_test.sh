#!/usr/bin/env bash
# make test-deb: the Debian package for real, on this machine (as root). Installs
# BUILD/execbox_*.deb with apt-get, checks what an installed execbox is (binary, worker, user,
# settings, font cache, units that systemd-analyze accepts), runs doctor and executions from
# /usr/bin/execbox (as root, and as the service's user the way the unit starts it), then
# removes it with a server still running and purges it, checking that nothing is left running
# or on disk. Ends with "N passed, M failed". A package installed before the test is put back
# to not installed; nothing of the test is left behind, also on failure.
set -uo pipefail
# shellcheck source=../lib/check.sh
. "$(dirname "$0")/../lib/check.sh"
build=${1:-build}
deb=$(ls "$build"/execbox_*_amd64.deb 2>/dev/null | tail -n 1)
if [ -z "$deb" ]; then
  echo "deb_test: no package in $build (make deb)" >&2
  exit 1
fi
deb=$(realpath "$deb")
work=$(mktemp -d /tmp/execbox-deb-test.XXXXXX)
chmod 755 "$work"
servers=()


cleanup() {
  for pid in "${servers[@]}"; do kill -KILL "$pid" 2>/dev/null; done
  if dpkg-query -W -f='${Status}' execbox 2>/dev/null | grep -q 'ok installed\|config-files'; then
    DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq execbox >/dev/null 2>&1
  fi
  rm -rf "$work"
}
trap cleanup EXIT

if [ "$(id -u)" -ne 0 ]; then
  echo "deb_test: needs root (it installs the package)" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get purge -y -qq execbox >/dev/null 2>&1

# ---- install ----
check "apt-get install ./$(basename "$deb")" apt-get install -y -qq "$deb"
check "installed: /usr/bin/execbox, its worker, settings, units, docs" \
  test -x /usr/bin/execbox -a -x /usr/libexec/execbox/execbox-worker -a -f /etc/execbox/execbox.toml \
  -a -f /usr/lib/systemd/system/execbox.service -a -f /usr/lib/systemd/user/execbox.service \
  -a -f /usr/share/doc/execbox/README.md -a -f /usr/share/doc/execbox/docs/deploy.md
version=$(sed -n 's/^project(execbox VERSION \([0-9.]*\).*/\1/p' "$(dirname "$0")/../../CMakeLists.txt")
check "execbox --version is the package's ($version)" \
  sh -c "/usr/bin/execbox --version | grep -qx 'execbox $version' && dpkg-query -W -f='\${Version}' execbox | grep -qx '$version'"
check "nothing of the build or source tree is referenced" \
  sh -c "! strings /usr/bin/execbox /usr/libexec/execbox/execbox-worker | grep -F -e '$(realpath "$build")' -e '$(realpath "$(dirname "$0")/../..")'"
check "the service user execbox exists, a system user without a login" \
  sh -c 'u=$(getent passwd execbox) && [ "$(echo "$u" | cut -d: -f3)" -lt 1000 ] && echo "$u" | grep -q nologin'
check "settings are root:execbox 0640 (they hold key hashes)" \
  sh -c '[ "$(stat -c %U:%G:%a /etc/execbox/execbox.toml)" = root:execbox:640 ]'
check "the font cache was built at installation" sh -c 'ls /var/cache/execbox/matplotlib/*.json'
check "state and log dirs belong to execbox" \
  sh -c '[ "$(stat -c %U /var/lib/execbox /var/log/execbox /var/cache/execbox | sort -u)" = execbox ]'
check "systemd-analyze verify: the system unit" systemd-analyze verify /usr/lib/systemd/system/execbox.service
mkdir -p "$work/runtime"
check "systemd-analyze verify: the user unit" \
  env XDG_RUNTIME_DIR="$work/runtime" systemd-analyze --user verify /usr/lib/systemd/user/execbox.service

# ---- use ----
check "execbox doctor (root): every required layer, warm workers" \
  sh -c '/usr/bin/execbox doctor > /dev/stderr && /usr/bin/execbox doctor | grep -q "^ok    warm workers"'
check "an execution from /usr/bin/execbox" \
  sh -c "cd / && /usr/bin/execbox run -c 'import numpy as np; print(np.arange(4).sum())' | grep -qx 6"
check "a plot comes back as PNG" \
  sh -c "cd / && /usr/bin/execbox run --json -c 'import matplotlib.pyplot as plt; plt.plot([1, 2]); plt.show()' | grep -q image/png"
check "warm: a session keeps its state (execbox repl)" \
  sh -c "printf 'x = 20\nx + 22\n' | /usr/bin/execbox repl | grep -qx 42"

# The service's way: as the execbox user, its settings from /etc/execbox, its cache and audit log,
# readiness on a notify socket.
token=deb-test-token-0123456789abcdef
cat >"$work/notify.py" <<'PY'
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
s.settimeout(120)
print(s.recv(4096).decode().replace("\n", " "), flush=True)
PY
python3 "$work/notify.py" "$work/notify" >"$work/ready" &
notifier=$!
for _ in $(seq 50); do [ -S "$work/notify" ] && break; sleep 0.1; done
chmod 777 "$work/notify"
setpriv --reuid=execbox --regid=execbox --init-groups env -i PATH=/usr/bin:/bin NOTIFY_SOCKET="$work/notify" \
  CACHE_DIRECTORY=/var/cache/execbox EXECBOX_API_KEYS=$token \
  /usr/bin/execbox serve --listen 127.0.0.1:0 2>"$work/service.log" &
servers+=($!)
wait "$notifier"
port=$(sed -n 's|.*listening on http://127.0.0.1:\([0-9]*\).*|\1|p' "$work/service.log" | head -n 1)
check "as the service's user: READY=1 on the notify socket" grep -q 'READY=1' "$work/ready"
check "as the service's user: an execution over HTTP" \
  sh -c "curl -sf -H 'Authorization: Bearer $token' -H 'Content-Type: application/json' \
    -d '{\"code\": \"print(6 * 7)\"}' http://127.0.0.1:$port/v1/execute | grep -q '\"stdout\":\"42\\\\n\"'"
check "as the service's user: the audit log in /var/log/execbox" \
  sh -c 'grep -q "\"route\":\"execute\"" /var/log/execbox/audit.log && [ "$(stat -c %U /var/log/execbox/audit.log)" = execbox ]'
kill -TERM "${servers[-1]}"
wait "${servers[-1]}" 2>/dev/null
check "as the service's user: SIGTERM stops it cleanly" grep -q 'execbox serve: stopped' "$work/service.log"

# ---- remove, with a server still running; then purge ----
/usr/bin/execbox serve --listen 127.0.0.1:0 2>"$work/root.log" &
running=$!
servers+=("$running")
for _ in $(seq 600); do grep -q 'listening on' "$work/root.log" && break; sleep 0.1; done
check "apt-get remove" apt-get remove -y -qq execbox
check "removal stopped the running server" sh -c "! kill -0 $running 2>/dev/null || grep -q ' Z ' /proc/$running/stat"
wait "$running" 2>/dev/null
check "nothing of execbox is running" \
  sh -c '! for p in /proc/[0-9]*; do readlink $p/exe; done 2>/dev/null | grep -E "^/usr/bin/execbox|execbox-worker"'
check "removed: the binaries; kept: the settings (a conffile) and the user" \
  sh -c '[ ! -e /usr/bin/execbox ] && [ ! -e /usr/libexec/execbox ] && [ -f /etc/execbox/execbox.toml ] && getent passwd execbox'
check "apt-get purge" apt-get purge -y -qq execbox
check "purged: settings, cache, state, logs, the user and group" \
  sh -c '[ ! -e /etc/execbox ] && [ ! -e /var/cache/execbox ] && [ ! -e /var/lib/execbox ] && [ ! -e /var/log/execbox ] && ! getent passwd execbox && ! getent group execbox'
check "dpkg knows nothing of execbox" sh -c '! dpkg-query -W -f="\${Status}" execbox 2>/dev/null | grep -q installed'

summary
