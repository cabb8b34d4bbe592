#!/usr/bin/env bash
# Installs what the VM stage (make test-v2, tests/vm) needs beyond scripts/install-deps.sh, only
# when it is missing: qemu (software emulation; no KVM needed) and a static busybox for the
# guest's initramfs. The guest's kernel is unpacked from Debian's linux-image-amd64 into the
# build directory by tests/vm/run.sh, never installed on this host. Run as root.
set -euo pipefail

# runc: the guest runs execbox in containers shaped like Docker's (tests/vm/container.sh).
wanted=(qemu-system-x86 busybox-static runc)
exec "$(dirname "$0")/apt-install-missing.sh" install-vm-deps "${wanted[@]}"
