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
};

LandlockPlan MakeLandlockPlan(std::vector<std::string> writable, std::vector<std::string> devices);

// Restricts the calling thread (and its future children) per the plan. Paths are opened as
// they are seen by the caller, so call it after pivot_root. Needs no_new_privs.
// Async-signal-safe, allocation-free. Returns 0 or an errno.
int ApplyLandlock(const LandlockPlan& plan) noexcept;

}  // namespace execbox::jail
