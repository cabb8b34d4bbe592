#!/bin/bash
# PID 1 of the service VM (make test-v2's second boot: tests/vm/run.sh with
# VM_GUEST=systemd-guest.sh): boots Debian 12's own systemd from the host's root (beneath the
# guest's overlay: the host is never touched) on a pure cgroup v2 kernel, with one unit that runs
# the chosen script (tests/vm/service.sh: the Debian package's execbox.service for real) and
# powers off. The host's fstab is emptied in the overlay (its disks are not the guest's), its
# policy-rc.d removed (below), and
# only that unit is started: what it needs comes with it. ($$ is a literal $ in a unit file.)
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8
mount -t proc proc /proc
mkdir -p /out && mount -t 9p -o trans=virtio,version=9p2000.L out /out
# shellcheck source=/dev/null
. /out/config
: >/etc/fstab
# This build machine's image forbids packages to start services (Docker's policy-rc.d, exit
# 101); an installed Debian host has no such file, and the package's postinst starts its unit.
rm -f /usr/sbin/policy-rc.d
# /tmp stays as it is: the tree under test may live there (a CI clone), and Debian's tmpfiles.d
# rule "D /tmp" empties it at boot (in the overlay only, but the guest would lose the tree).
mkdir -p /etc/tmpfiles.d && : >/etc/tmpfiles.d/tmp.conf
cat >/etc/systemd/system/execbox-vm-test.service <<UNIT
[Unit]
Description=execbox's service test (tests/vm/service.sh)
Wants=systemd-journald.service network.target
After=systemd-journald.service sysinit.target

[Service]
Type=oneshot
Environment=PATH=$PATH LANG=C.UTF-8 HOME=/root
ExecStart=/bin/bash -c '"$SUITES" "$BUILD" "$SOURCE" 2>&1 | tee /out/log >/dev/console; \
  echo \$\${PIPESTATUS[0]} >/out/status; grep -E "^[0-9]+ passed, [0-9]+ failed" /out/log | tail -n 1 >/out/summary; \
  sync; echo o >/proc/sysrq-trigger'
StandardOutput=journal+console
UNIT
umount /proc
exec /lib/systemd/systemd --unit=execbox-vm-test.service --log-target=console --show-status=false
