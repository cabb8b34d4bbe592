// Cgroups inside a container. A container runtime (Docker, podman, containerd under Kubernetes)
// mounts the cgroup v2 filesystem read-only into an unprivileged container, though the
// container's own group is there to divide: the kernel lets a cgroup namespace's owner create
// groups below its root and move its processes between them (cgroup.procs,
// cgroup.subtree_control and cgroup.threads are delegatable at a namespace's root; the root's
// own limits are not). Only the mount is in the way.
//
// So, in exactly that situation (root in the container, /sys/fs/cgroup a read-only cgroup2
// mount), execbox moves itself at start-up into a user, mount and cgroup namespace of its own:
// the user namespace maps every id the container has to itself (a helper process still in the
// container writes the map, with the container's CAP_SETUID, CAP_SETGID and CAP_SETFCAP, which
// the kernel asks for when the container's root is mapped), so files, keys and
// the jail's own id maps are unchanged; in its own mount namespace execbox mounts a fresh,
// writable cgroup2 over /sys/fs/cgroup, rooted at the container's group. From there the cgroup
// code works as on a host where a group was delegated (cgroup_v2.cc): execbox moves itself into
// a leaf and makes one group per execution beside it, with memory, pids and cpu limits, so the
// warm pool and sessions work in a container.
//
// Nothing is widened: the groups made are inside the container's group, whose limits (set by
// the runtime) still bound them all, and the kernel refuses writes to that group's own limits
// from a namespace below it. What execbox gives up is what its new user namespace does not own:
// privileges over the container's network namespace (binding a port below 1024 needs
// net.ipv4.ip_unprivileged_port_start) and over other processes of the container.
#pragma once

#include <string>

namespace execbox::jail {

struct ContainerCgroups {
  bool entered = false;  // execbox now runs in its own namespaces with a writable cgroup2
  std::string detail;    // what was done, or why not (empty when the situation did not apply)
};

// Does the above when it applies, else nothing. Must be called while the process has one
// thread (a multi-threaded process cannot enter a user namespace): at the start of a command.
// EXECBOX_CONTAINER_CGROUPS=0 turns it off. Idempotent; the first call's outcome is kept.
const ContainerCgroups& TakeContainerCgroups();

// The outcome of the call above, if one was made (doctor reports it).
const ContainerCgroups& ContainerCgroupsOutcome();

}  // namespace execbox::jail
