#!/usr/bin/env bash
# Installs what the VM stage (make test-v2, tests/vm) needs beyond scripts/install-deps.sh, only
# when it is missing: qemu (software emulation; no KVM needed) and a static busybox for the
# guest's initramfs. The guest's kernel is unpacked from Debian's linux-image-amd64 into the
# build directory by tests/vm/run.sh, never installed on this host. Run as root.
set -euo pipefail

wanted=(qemu-system-x86 busybox-static)
missing=()
for pkg in "${wanted[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "install-vm-deps: missing packages (${missing[*]}); run as root to install them" >&2
  exit 1
fi
echo "install-vm-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
