#!/bin/bash
# PID 1 of the test VM (tests/vm/run.sh): a pure cgroup v2 host, as Debian 12 boots one. Runs
# the chosen suites as root and as the unprivileged user execbox-test, each execbox process in a
# group delegated to that user the way systemd delegates one (tests/vm/delegate.sh), counts
# them, writes the summary and the exit status to the host's out/ share, and powers off.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t cgroup2 -o nsdelegate,memory_recursiveprot cgroup2 /sys/fs/cgroup
mkdir -p /dev/pts /dev/shm
mount -t devpts -o gid=5,mode=620,ptmxmode=666 devpts /dev/pts
mount -t tmpfs -o mode=1777 tmpfs /dev/shm
# /tmp and /run stay the overlay's (writable, in the guest's memory): the tree under test may
# itself live there (a CI clone in /tmp), and a tmpfs over it would hide it.
mkdir -p /out && mount -t 9p -o trans=virtio,version=9p2000.L out /out
ip link set lo up
hostname execbox-vm
# shellcheck source=/dev/null
. /out/config

finish() {
  echo "$1" >/out/status
  sync
  echo o >/proc/sysrq-trigger
  sleep 60
}
trap 'finish 1' ERR

echo "guest: $(uname -r), cgroup: $(stat -fc %T /sys/fs/cgroup), controllers: $(cat /sys/fs/cgroup/cgroup.controllers)"
"$SUITES" "$BUILD" "$SOURCE" 2>&1 | tee /out/log
status=${PIPESTATUS[0]}
grep -E '^[0-9]+ passed, [0-9]+ failed' /out/log | tail -n 1 >/out/summary
finish "$status"
