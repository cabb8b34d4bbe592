// The last steps before untrusted code runs in a process: capabilities gone for good. Shared by
// the cold jail's code process and the warm children a zygote forks. Async-signal-safe.
#pragma once

#include <cstdint>

namespace execbox::jail {

// Unblocks every signal and gives each its default disposition (what a new program expects).
void ResetSignals() noexcept;

// Drops every capability from the bounding and ambient sets and locks the securebits so
// that nothing (setuid, exec of a file with capabilities) can bring one back.
void DropCapabilities() noexcept;

// Empties the permitted, effective and inheritable sets. Returns 0 or an errno.
int ClearCapabilitySets() noexcept;

struct LandlockPlan;
struct SeccompProgram;

// The whole sequence, in order: capabilities dropped (DropCapabilities, ClearCapabilitySets),
// no_new_privs, Landlock, seccomp. Returns nullptr, or the step that failed with errno set.
const char* LockDown(const LandlockPlan& landlock, const SeccompProgram& seccomp) noexcept;

// For a trusted zygote only: keeps exactly the capabilities in `mask` (bit n = capability n)
// across execve, as ambient capabilities, and drops every other one from the bounding set.
// Returns 0 or an errno.
int KeepAmbientCapabilities(uint64_t mask) noexcept;

}  // namespace execbox::jail
