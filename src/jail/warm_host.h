// Internal to the jail layer: what the host side of a zygote (zygote.cc), the host side of the
// children it forks (warm_child_host.cc) and those children themselves (warm_child_setup.cc) share.
#pragma once

#include <cstddef>

#include "jail/cgroup.h"
#include "jail/launch.h"
#include "jail/policy.h"

namespace execbox::jail {

// Waits until `fd` is readable; false on timeout.
bool WaitReadable(int fd, Clock::time_point deadline);

// Sends `data` with `nfds` descriptors attached (SCM_RIGHTS, at most 4).
bool SendWithFds(int sock, const void* data, size_t size, const int* fds, size_t nfds);

// A warm child's cgroup limits for the execution limits `l`.
CgroupLimits ChildCgroupLimits(const Limits& l);

}  // namespace execbox::jail
