#!/bin/bash
# service.sh BUILD SOURCE: the Debian package's execbox.service under Debian 12's own systemd on
# a pure cgroup v2 kernel (run by tests/vm/systemd-guest.sh, the guest's systemd as PID 1):
# apt-get installs BUILD's package, whose postinst starts the unit; the unit becomes active
# through READY=1 (Type=notify); it runs as the user execbox with a delegated group, so the warm
# pool and sessions are there and every limit is cgroup v2's; a key added to the settings works
# after `systemctl reload` (SIGHUP); its logs are in the journal; `systemctl stop` leaves no
# process or group behind; removal and purge. Ends with "N passed, M failed".
set -u
build=$1
out=${VM_OUT:-/out}
passed=0
failed=0
record() {
  if [ "$2" -eq 0 ]; then passed=$((passed + 1)); echo "vm: ok     $1"; else failed=$((failed + 1)); echo "vm: FAILED $1"; fi
}
# check NAME PATTERN CMD...: CMD exits 0 and its output matches every |-separated PATTERN.
check() {
  local name=$1 patterns=$2 log status=0
  shift 2
  log=$("$@" 2>&1) || status=$?
  echo "$log" >"$out/$name.log"
  if [ "$status" -eq 0 ]; then
    IFS='|' read -ra want <<<"$patterns"
    for p in "${want[@]}"; do
      grep -qE -- "$p" <<<"$log" || { echo "vm: $name: no line matches '$p'"; status=1; }
    done
  fi
  [ "$status" -eq 0 ] || tail -n 30 <<<"$log"
  record "$name" "$status"
}
wait_for() {  # wait_for SECONDS CMD...: until CMD succeeds
  local until=$(($(date +%s) + $1))
  shift
  until "$@" >/dev/null 2>&1; do
    [ "$(date +%s)" -lt "$until" ] || return 1
    sleep 1
  done
}
cd /tmp || exit 1
export DEBIAN_FRONTEND=noninteractive
deb=$(ls "$build"/execbox_*_amd64.deb | tail -n 1)
echo "vm: $(systemctl --version | head -n 1); cgroup $(stat -fc %T /sys/fs/cgroup)"

check service-install 'Setting up execbox' apt-get install -y "$deb"
# Under software emulation the warm pool's preload takes a while: READY=1 comes after it.
wait_for 600 sh -c '[ "$(systemctl is-active execbox)" != activating ]'
check service-active-after-ready-notification '^active$' systemctl is-active execbox
pid=$(systemctl show -P MainPID execbox)
check service-runs-as-execbox-with-a-delegated-group '^execbox$|^Delegate=yes$|^Type=notify$' \
  sh -c "ps -o user= -p $pid; systemctl show -p Delegate -p Type execbox"
check service-journal-warm-pool 'warm pool, [0-9]+ running|listening on http://127.0.0.1:8080' journalctl -u execbox --no-pager

# A key added to the settings, read again by `systemctl reload` (SIGHUP): until then it is refused.
token=vm-service-token-0123456789abcdef
execute() {
  curl -s -H "Authorization: Bearer $token" -H 'Content-Type: application/json' -d "$1" http://127.0.0.1:8080/v1/execute
}
check service-key-refused-before-reload '"status":401' execute '{"code": "1"}'
printf '\n[[keys]]\nid = "vm"\nsha256 = "%s"\n' "$(printf %s "$token" | sha256sum | cut -d' ' -f1)" >>/etc/execbox/execbox.toml
check service-reload 'SIGHUP: 1 key' sh -c 'systemctl reload execbox && sleep 1 && journalctl -u execbox --no-pager'
check service-active-after-reload '^active$' systemctl is-active execbox
bomb=$'x = bytearray(300 << 20)\nx[::4096] = b"x" * len(x[::4096])'
check service-execution-warm-cgroup-v2 '"engine":"warm"|"memory_mb":\{"enforced_by":"cgroup-v2"|"text/plain":"42"' \
  execute '{"code": "6 * 7"}'
check service-memory-limit '"status":"memory_limit"|"enforced_by":"cgroup-v2"' \
  execute "$(python3 -c 'import json, sys; print(json.dumps({"code": sys.argv[1], "limits": {"memory_mb": 64}}))' "$bomb")"
check service-session '"id":"s_[0-9a-f]{32}"' \
  curl -s -H "Authorization: Bearer $token" -H 'Content-Type: application/json' -d '{}' http://127.0.0.1:8080/v1/sessions
check service-socket-0660-execbox '^srw-rw---- execbox:execbox$' stat -c '%A %U:%G' /run/execbox/execbox.sock
check service-run-through-the-socket '"engine": "warm"|"stdout": "42\\n"' \
  execbox run --server always --json -c 'print(6 * 7)'
check service-audit-log '"route":"execute"' cat /var/log/execbox/audit.log

group=/sys/fs/cgroup/system.slice/execbox.service
check service-stop 'execbox serve: stopped' sh -c 'systemctl stop execbox && journalctl -u execbox --no-pager'
left_behind() {  # the unit's processes and execbox's groups, if any are left
  local left
  left=$(pgrep -u execbox; find "$group" -mindepth 1 -type d 2>/dev/null)
  [ -z "$left" ] && echo none || echo "$left"
}
check service-stop-leaves-nothing '^none$' left_behind
check service-remove-and-purge '^gone$' \
  sh -c 'apt-get purge -y execbox >/dev/null && ! getent passwd execbox && [ ! -e /etc/execbox ] && echo gone'

journalctl --no-pager >"$out/journal.log" 2>&1
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
