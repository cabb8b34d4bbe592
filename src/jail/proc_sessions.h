// Ending the processes of a pid namespace by session (setsid), from inside it: what a session's
// init does when its kernel ends (session_init.h). Allocation-free, for a process that keeps
// its state in fixed buffers.
#pragma once

#include <sys/types.h>

#include <cstddef>

namespace execbox::jail {

// SIGKILLs every running process of the namespace whose /proc is `proc_fd` (an O_DIRECTORY
// descriptor of it) but pid 1 and those whose session is one of `keep` (0 entries are unused).
// Looks again until a look finds nothing to kill, since a process may fork while a look runs.
// False when that does not settle within 64 looks or /proc cannot be read: the caller then
// ends everything.
bool KillOutsideSessions(int proc_fd, const pid_t* keep, size_t keep_count) noexcept;

}  // namespace execbox::jail
