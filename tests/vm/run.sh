#!/usr/bin/env bash
# `make test-v2`: boots Debian's own kernel (linux-image-amd64, 6.1 on Debian 12: pure cgroup v2,
# Landlock ABI 2) under qemu-system-x86_64 with software emulation, the host's root shared
# read-only over 9p beneath a tmpfs overlay, and runs tests/vm/guest.sh there as PID 1: the
# cgroup, namespace and Landlock paths of the cold jail, the warm engine and the server, as root
# and as an unprivileged user with a delegated group. The guest's log ends with its runner
# summary line ("N passed, N failed"), printed again here last; the exit status is the guest's.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-build}" && pwd)
# A second argument runs that script in the guest instead of tests/vm/suites.sh (for debugging:
# it gets the same arguments, BUILD and SOURCE, and /out for its files).
suites=$(realpath "${2:-$here/suites.sh}")
# VM_GUEST names the guest's PID 1 in tests/vm: guest.sh (the default: mounts cgroup2 itself and
# runs the script) or systemd-guest.sh (boots Debian's systemd, which runs the script in a unit).
guest=$here/${VM_GUEST:-guest.sh}
vm="$build/vm"
mkdir -p "$vm"

# The kernel the users run, unpacked (never installed on this host), once per version of it, in
# EXECBOX_VM_CACHE [~/.cache/execbox-vm] outside any checkout.
pkg=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/{print $2; exit}')
[ -n "$pkg" ] || { echo "test-v2: apt knows no linux-image-amd64 (apt-get update?)" >&2; exit 1; }
kernel=${EXECBOX_VM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/execbox-vm}/$pkg
if [ ! -e "$kernel/ok" ]; then
  rm -rf "$kernel" && mkdir -p "$kernel"
  (cd "$kernel" && apt-get download "$pkg" >/dev/null 2>&1 && dpkg-deb -x ./*.deb root && rm -f ./*.deb)
  touch "$kernel/ok"
fi
kroot="$kernel/root"
vmlinuz=$(find "$kroot/boot" -name "vmlinuz-*" | head -n 1)
kver=${vmlinuz##*/vmlinuz-}

# The initramfs: static busybox, /init and the modules 9p and overlay need, in load order.
initrd="$vm/initrd.cpio"
stage="$vm/initrd"
rm -rf "$stage" && mkdir -p "$stage"/{bin,modules,proc,sys,dev}
cp /bin/busybox "$stage/bin/busybox"
cp "$here/init" "$stage/init"
for m in virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci netfs fscache \
         9pnet 9pnet_virtio 9p overlay; do
  ko=$(find "$kroot/lib/modules/$kver" -name "$m.ko" | head -n 1)
  [ -n "$ko" ] || { echo "test-v2: module $m.ko is not in $kver" >&2; exit 1; }
  cp "$ko" "$stage/modules/"
done
(cd "$stage" && find . | busybox cpio -o -H newc 2>/dev/null) >"$initrd"

# What the guest reads (the build to test) and writes (its logs and exit status).
out="$vm/${VM_LOGS:-out}"  # one per boot (VM_LOGS), so one boot's logs survive the next
rm -rf "$out" && mkdir -p "$out"
printf 'BUILD=%q\nSOURCE=%q\nSUITES=%q\n' "$build" "$(cd "$here/../.." && pwd)" "$suites" >"$out/config"

echo "test-v2: booting $kver under qemu (software emulation); the guest's output follows"
start=$(date +%s)
set +e
timeout --foreground 2400 qemu-system-x86_64 \
  -accel tcg,thread=multi -smp 2 -m 6144 -no-reboot -nic none \
  -display none -monitor none -serial stdio \
  -kernel "$vmlinuz" -initrd "$initrd" \
  -append "console=ttyS0 quiet loglevel=3 panic=-1 execbox.guest=$guest" \
  -virtfs local,path=/,mount_tag=host,security_model=none,readonly=on,multidevs=remap \
  -virtfs "local,path=$out,mount_tag=out,security_model=none,multidevs=remap" </dev/null
qemu_status=$?
set -e
echo "test-v2: the VM ran $(( $(date +%s) - start )) s"
if [ ! -s "$out/status" ]; then
  echo "test-v2: the guest wrote no exit status (qemu exited with $qemu_status)"
  echo "0 passed, 1 failed"
  exit 1
fi
status=$(cat "$out/status")
tail -n 1 "$out/summary" 2>/dev/null || echo "0 passed, 1 failed"
exit "$status"
