#!/usr/bin/env bash
# Installs what `make test-cluster` (tests/cluster) needs beyond scripts/install-deps.sh, only
# when it is missing: Debian's nginx (1.22 on Debian 12; the package `nginx` itself holds the
# binary there, nginx-light and nginx-core are transitional). Run as root.
set -euo pipefail

here=$(dirname "$0")
# On a host with an init system, installing nginx also starts Debian's nginx service on port 80.
# The test runs its own nginx and wants none left running, so that start is refused during this
# installation the way Debian's container images do it (policy-rc.d exit 101: "action
# forbidden"); the service stays enabled as usual.
if ! dpkg-query -W -f='${Status}' nginx 2>/dev/null | grep -q 'install ok installed' &&
  [[ $(id -u) -eq 0 && ! -e /usr/sbin/policy-rc.d ]]; then
  printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
  chmod 755 /usr/sbin/policy-rc.d
  trap 'rm -f /usr/sbin/policy-rc.d' EXIT
fi
"$here/apt-install-missing.sh" install-cluster-deps nginx
