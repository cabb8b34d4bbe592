// Landlock: writes only under the listed directories, where the kernel has Landlock.
#pragma once

#include <string>
#include <vector>

#include "base/error.h"

namespace execbox::jail {

// The ABI version the running kernel offers, 0 when Landlock is absent or disabled.
int LandlockAbi() noexcept;

// Prepared on the host before fork; applied in the child.
struct LandlockPlan {
  int abi = 0;                        // 0: nothing is applied
  std::vector<std::string> writable;  // dirs where files may be created, written, removed
  std::vector<std::string> devices;   // device files that may be written (e.g. /dev/null)
  uint16_t tcp_port = 0;              // bind and connect allowed on this TCP port only (0: none)
  // TCP left to the net namespace (not handled: bind and connect on any port): a session's own
  // servers on its loopback, where `lo` is the only interface there is.
  bool tcp_open = false;
};

// What a ruleset of ABI `abi` restricts, as the result's isolation reports it: "filesystem"
// (ABI 1+), "tcp" (bind and connect, ABI 4+), "signals" and "abstract_unix_sockets" (scoped to
// the sandbox, ABI 6+). Below those ABIs the namespaces and seccomp cover the rest: the net
// namespace has no route out and seccomp allows only AF_UNIX sockets; the pid namespace hides
// every outside process from kill(); the ipc and net namespaces keep abstract sockets apart.
// `tcp`: false where the plan left TCP open (LandlockPlan::tcp_open).
std::vector<std::string> LandlockRestricts(int abi, bool tcp = true);

LandlockPlan MakeLandlockPlan(std::vector<std::string> writable, std::vector<std::string> devices);

// Restricts the calling thread (and its future children) per the plan. Paths are opened as
// they are seen by the caller, so call it after pivot_root. Needs no_new_privs.
// Async-signal-safe, allocation-free. Returns 0 or an errno.
int ApplyLandlock(const LandlockPlan& plan) noexcept;

}  // namespace execbox::jail
