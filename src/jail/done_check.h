// Whether a warm child's execution is over as the agent says: a session's done marker (one byte
// "D" on its channel, relayed by its init), or a one-shot child's report ending. The user's
// code runs in the agent's process and can write that byte (or close that report) too, so the
// host believes it only once the host's kernel shows the process doing what the agent does
// right after it: exiting (a one-shot child calls os._exit), or blocked in recvmsg on the
// channel, waiting for the next request (a session child). Only /proc of the host's pid namespace, read by
// the host, enters the verdict; nothing the code writes does.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <optional>

#include "base/error.h"
#include "base/unique_fd.h"

namespace execbox::jail {

enum class DoneCheck {
  kConfirmed,  // the process does what the agent does after its marker
  kNotYet,     // not (yet): look again shortly
  kEnding,     // every thread is dying: the process's exit, not the marker, ends the execution
};

// The code's process of one warm child, as the host's /proc shows it.
class CodeProcess {
 public:
  CodeProcess() = default;
  // The process `pid` (host pid namespace) that `pidfd` refers to, before any code ran in it:
  // the socket it holds as fd 3 now is its channel (a session's, to its init), which
  // BlockedOnChannel looks for later. Where the host may not read that link, the fallback.
  static Expected<CodeProcess> Open(pid_t pid, int pidfd);

  // One look, without waiting. `session`: the agent parks on its channel instead of exiting.
  DoneCheck Check(bool session);

  // Every thread of the process is dying (in exit, a zombie, or with SIGKILL pending: none
  // runs user code again), or the process is gone.
  bool Exiting() const;

 private:
  // The main thread is blocked in recvmsg on fd 3, and fd 3 is still the channel. Reading
  // /proc/<pid>/syscall and fd/3 takes ptrace read access, which the host has both as root and
  // as an unprivileged user (checked on this host both ways): the process runs under the
  // host's uid, in a user namespace the host's uid owns, and is dumpable; Yama's ptrace_scope 1
  // and 2 allow it too (the host is its ancestor and owns that namespace). Empty where the
  // kernel still refuses (ptrace_scope 3, another LSM).
  std::optional<bool> BlockedOnChannel() const;
  // The fallback there: the main thread is in an interruptible sleep, its run time (from
  // schedstat, readable without ptrace access) has not moved for a millisecond, and where
  // wchan names its wait, it is a unix stream socket's read.
  bool AsleepAndIdle();

  UniqueFd dir_;  // /proc/<pid>: bound to this process, so a reused pid is never read
  pid_t pid_ = -1;
  ino_t channel_ino_ = 0;  // 0: unknown (fd 3 was not readable), the fallback decides
  uint64_t last_runtime_ns_ = 0;
  std::chrono::steady_clock::time_point last_look_{};
};

// For tests: makes Check use the fallback (AsleepAndIdle) even where syscall is readable.
void UseDoneCheckFallbackForTesting(bool on);

}  // namespace execbox::jail
