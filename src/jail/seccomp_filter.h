// The syscall policy, compiled once on the host and loaded in the child without allocating.
// The policy itself (what is allowed, what is refused and why) lives in seccomp_filter.cc.
#pragma once

#include <linux/filter.h>

#include <string>
#include <vector>

#include "base/error.h"

namespace execbox::jail {

// Two stacked programs: an allowlist by syscall number, then argument checks
// (socket domains, clone flags, ioctl requests). The kernel applies the stricter verdict.
struct SeccompProgram {
  std::vector<sock_filter> allowlist;
  std::vector<sock_filter> argument_checks;
};

// Builds both programs with libseccomp and exports them as BPF.
// `loopback_tcp`: AF_INET stream sockets are allowed too (Policy::egress_fd: the jail's net
// namespace has nothing but lo); any other socket type or protocol of AF_INET stays refused.
Expected<SeccompProgram> CompileSeccompProgram(bool loopback_tcp = false);

// Loads both programs into the calling thread. Needs no_new_privs (or CAP_SYS_ADMIN).
// Async-signal-safe, allocation-free: for use between fork and exec. Returns 0 or an errno.
int LoadSeccompProgram(const SeccompProgram& program) noexcept;

// One line per refused syscall group, for --help, doctor and the README.
struct SeccompRule {
  const char* syscalls;
  const char* verdict;
  const char* reason;
};
const std::vector<SeccompRule>& RefusedSyscalls();

}  // namespace execbox::jail
