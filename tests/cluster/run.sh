#!/usr/bin/env bash
# tests/cluster/run.sh BUILD_DIR: three `execbox serve --instance execbox-0|1|2` behind Debian's nginx
# with deploy/nginx's routing, all on loopback (docs/deploy.md, "Several instances behind nginx"); the
# checks are in cluster_test.py. As root (warm pools). Ends with `N passed, M failed`.
set -uo pipefail
build=${1:?usage: run.sh BUILD_DIR}
build=$(cd "$build" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
if [[ $(id -u) -ne 0 ]]; then
  echo "run.sh: run as root (the instances start warm pools)" >&2
  exit 2
fi
if ! command -v nginx >/dev/null; then
  echo "run.sh: nginx is missing (scripts/install-cluster-deps.sh installs it)" >&2
  exit 2
fi
work=$(mktemp -d /tmp/execbox-cluster.XXXXXX)
chmod 755 "$work"  # nginx's workers run as nobody

# The test runs in a process group of its own, so that whatever it leaves behind (it stops the
# servers and nginx itself; not if it is killed) is ended by that group's id, then the files go.
pgid=
cleanup() {
  if [[ -n $pgid ]] && kill -0 -- "-$pgid" 2>/dev/null; then
    kill -TERM -- "-$pgid" 2>/dev/null
    for _ in $(seq 50); do kill -0 -- "-$pgid" 2>/dev/null || break; sleep 0.2; done
    kill -KILL -- "-$pgid" 2>/dev/null
  fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

setsid /usr/bin/python3 "$here/cluster_test.py" "$build" "$work" &
pgid=$!
wait "$pgid"
exit $?
