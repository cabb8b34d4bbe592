// container_like -- COMMAND...: runs COMMAND the way a default runc/crun container would
// constrain it, in the two ways that matter to the jail: parts of /proc masked by overmounts
// (runc binds /dev/null over /proc/kcore, /proc/timer_list, ...), so the kernel refuses a fresh
// procfs in a user namespace made below it; and a seccomp profile that refuses sethostname
// (the default profiles allow it only with CAP_SYS_ADMIN). Run as root; the command may drop to
// another user itself (setpriv).
#include <fcntl.h>
#include <sched.h>
#include <seccomp.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <initializer_list>

namespace {

int Fail(const char* what) {
  std::fprintf(stderr, "container_like: %s: %s\n", what, std::strerror(errno));
  return 125;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3 || std::strcmp(argv[1], "--") != 0) {
    std::fprintf(stderr, "usage: container_like -- COMMAND [ARG...]\n");
    return 2;
  }
  if (::unshare(CLONE_NEWNS) != 0) return Fail("unshare(CLONE_NEWNS)");
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return Fail("make / private");
  for (const char* masked : {"/proc/timer_list", "/proc/kcore"}) {
    if (::access(masked, F_OK) != 0) continue;
    if (::mount("/dev/null", masked, nullptr, MS_BIND, nullptr) != 0) return Fail("mask a /proc file");
  }
  scmp_filter_ctx filter = ::seccomp_init(SCMP_ACT_ALLOW);
  if (filter == nullptr) return Fail("seccomp_init");
  if (::seccomp_rule_add(filter, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(sethostname), 0) != 0 ||
      ::seccomp_load(filter) != 0) {
    return Fail("load a filter refusing sethostname");
  }
  ::seccomp_release(filter);
  ::execv(argv[2], argv + 2);
  return Fail("exec");
}
