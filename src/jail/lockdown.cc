#include "jail/lockdown.h"

#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>

#include "jail/landlock.h"
#include "jail/seccomp_filter.h"

#ifndef SECBIT_NOROOT
#include <linux/securebits.h>
#endif

namespace execbox::jail {

void ResetSignals() noexcept {
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) ::sigaction(sig, &dfl, nullptr);
}

void DropCapabilities() noexcept {
  for (int cap = 0; cap < 64; ++cap) {
    if (::prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno == EINVAL) break;
  }
  ::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
  ::prctl(PR_SET_SECUREBITS,
          SECBIT_KEEP_CAPS_LOCKED | SECBIT_NO_SETUID_FIXUP | SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_NOROOT |
              SECBIT_NOROOT_LOCKED | SECBIT_NO_CAP_AMBIENT_RAISE | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED,
          0, 0, 0);
}

int ClearCapabilitySets() noexcept {
  __user_cap_header_struct header{.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
  __user_cap_data_struct data[2] = {};
  return ::syscall(SYS_capset, &header, data) == 0 ? 0 : errno;
}

const char* LockDown(const LandlockPlan& landlock, const SeccompProgram& seccomp) noexcept {
  DropCapabilities();
  if (int err = ClearCapabilitySets(); err != 0) {
    errno = err;
    return "capset (drop all capabilities)";
  }
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return "PR_SET_NO_NEW_PRIVS";
  if (int err = ApplyLandlock(landlock); err != 0) {
    errno = err;
    return "landlock";
  }
  if (int err = LoadSeccompProgram(seccomp); err != 0) {
    errno = err;
    return "seccomp";
  }
  return nullptr;
}

int KeepAmbientCapabilities(uint64_t mask) noexcept {
  __user_cap_header_struct header{.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
  __user_cap_data_struct data[2] = {};
  if (::syscall(SYS_capget, &header, data) != 0) return errno;
  // Ambient capabilities must be permitted and inheritable.
  data[0].inheritable = static_cast<uint32_t>(mask);
  data[1].inheritable = static_cast<uint32_t>(mask >> 32);
  if (::syscall(SYS_capset, &header, data) != 0) return errno;
  for (int cap = 0; cap < 64; ++cap) {
    if ((mask >> cap) & 1) {
      if (::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, cap, 0, 0) != 0) return errno;
    } else if (::prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno == EINVAL) {
      break;
    }
  }
  return 0;
}

}  // namespace execbox::jail
