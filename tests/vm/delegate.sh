#!/bin/sh
# delegate.sh USER CMD...: runs CMD (which drops to USER itself, e.g. through setpriv) alone in a
# cgroup v2 group of its own delegated to USER the way systemd delegates a unit or scope with
# Delegate=yes: memory, pids and cpu enabled in every ancestor, the group directory and its
# cgroup.procs, cgroup.threads and cgroup.subtree_control owned by USER, nothing else in it.
# Run as root in the test VM (tests/vm/suites.sh); the empty group stays behind.
set -eu
user=$1
shift
root=/sys/fs/cgroup
slice=$root/vm.slice
mkdir -p "$slice"
echo "+memory +pids +cpu" >"$root/cgroup.subtree_control"
echo "+memory +pids +cpu" >"$slice/cgroup.subtree_control"
group=$slice/run-$$.scope
mkdir "$group"
chown "$user:" "$group" "$group/cgroup.procs" "$group/cgroup.threads" "$group/cgroup.subtree_control"
echo $$ >"$group/cgroup.procs"
exec "$@"
