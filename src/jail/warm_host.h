// Internal to the jail layer: what the host side of a zygote (zygote.cc), the host side of the
// children it forks (warm_child_host.cc) and those children themselves (warm_child_setup.cc) share.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <utility>

#include "base/unique_fd.h"
#include "jail/cgroup.h"
#include "jail/launch.h"
#include "jail/policy.h"

namespace execbox::jail {

// Waits until `fd` is readable; false on timeout.
bool WaitReadable(int fd, Clock::time_point deadline);

// Sends `data` with `nfds` descriptors attached (SCM_RIGHTS, at most 4; none: a plain message),
// retrying on EINTR; `flags` are added to MSG_NOSIGNAL (MSG_DONTWAIT: never wait). Allocates
// nothing: the sandbox's side uses it too (a child's hand-over, the session init's messages).
bool SendWithFds(int sock, const void* data, size_t size, const int* fds, size_t nfds, int flags = 0);

// A warm child's cgroup limits for the execution limits `l`.
CgroupLimits ChildCgroupLimits(const Limits& l);

// A connected pair of stream sockets (close-on-exec).
Expected<std::pair<UniqueFd, UniqueFd>> StreamPair();

// One read of the channel; `pid` is the sender's (in the host's pid namespace) when its
// credentials came with it (SO_PASSCRED), else left as it is.
ssize_t RecvWithPid(int fd, char* buf, size_t size, pid_t& pid);

// The parent of `pid` as the host's /proc says, or -1.
pid_t ParentOf(pid_t pid);

// A session's kernel, whose ready byte came from `kernel` (host pid): checked to be the child
// of the init `init`, then held by a pidfd and checked again (so not a pid reused between).
Expected<UniqueFd> HoldKernel(pid_t init, pid_t kernel);

}  // namespace execbox::jail
