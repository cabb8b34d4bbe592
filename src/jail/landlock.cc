// Landlock: a second, kernel-enforced line behind the mount layout.
//
// The jail's mounts already decide what exists and what is read-only; Landlock makes writes
// outside the listed directories fail even if a mount were writable by mistake. Reading and
// executing are left unhandled (so unrestricted): the mounts already limit what can be read.
// Where the kernel offers more (ABI 4: TCP, ABI 6: scopes), the ruleset also refuses every TCP
// bind and connect, connecting to abstract unix sockets created outside the domain, and
// signalling processes outside the domain (the jail's init, the host).
//
// The syscalls are called directly: glibc has no wrappers, and Debian 12's uapi header predates
// ABI 3, so the newer constants and the grown ruleset attribute are defined here.
#include "jail/landlock.h"

#include <fcntl.h>
#include <linux/landlock.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <utility>

#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#endif
#ifndef SYS_landlock_add_rule
#define SYS_landlock_add_rule 445
#endif
#ifndef SYS_landlock_restrict_self
#define SYS_landlock_restrict_self 446
#endif

#ifndef LANDLOCK_ACCESS_FS_REFER
#define LANDLOCK_ACCESS_FS_REFER (1ULL << 13)
#endif
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)
#endif
#ifndef LANDLOCK_ACCESS_FS_IOCTL_DEV
#define LANDLOCK_ACCESS_FS_IOCTL_DEV (1ULL << 15)
#endif
#ifndef LANDLOCK_ACCESS_NET_BIND_TCP
#define LANDLOCK_ACCESS_NET_BIND_TCP (1ULL << 0)
#endif
#ifndef LANDLOCK_ACCESS_NET_CONNECT_TCP
#define LANDLOCK_ACCESS_NET_CONNECT_TCP (1ULL << 1)
#endif
#ifndef LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
#define LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0)
#endif
#ifndef LANDLOCK_SCOPE_SIGNAL
#define LANDLOCK_SCOPE_SIGNAL (1ULL << 1)
#endif

namespace execbox::jail {
namespace {

// struct landlock_ruleset_attr as of ABI 6. The kernel takes a prefix of it: passing the size
// that matches the ABI keeps older kernels from rejecting fields they do not know (E2BIG).
struct RulesetAttr {
  uint64_t handled_access_fs;
  uint64_t handled_access_net;
  uint64_t scoped;
};

constexpr uint64_t kWriteAccessAbi1 = LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_REMOVE_DIR |
                                      LANDLOCK_ACCESS_FS_REMOVE_FILE | LANDLOCK_ACCESS_FS_MAKE_CHAR |
                                      LANDLOCK_ACCESS_FS_MAKE_DIR | LANDLOCK_ACCESS_FS_MAKE_REG |
                                      LANDLOCK_ACCESS_FS_MAKE_SOCK | LANDLOCK_ACCESS_FS_MAKE_FIFO |
                                      LANDLOCK_ACCESS_FS_MAKE_BLOCK | LANDLOCK_ACCESS_FS_MAKE_SYM;

// The only rights a rule on a non-directory may carry; anything else makes add_rule fail.
constexpr uint64_t kFileAccess = LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE |
                                 LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_TRUNCATE |
                                 LANDLOCK_ACCESS_FS_IOCTL_DEV;

// What a listed device may be used for (masked by what the ABI handles).
constexpr uint64_t kDeviceAccess =
    LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_TRUNCATE | LANDLOCK_ACCESS_FS_IOCTL_DEV;

uint64_t HandledFsAccess(int abi) {
  uint64_t access = kWriteAccessAbi1;
  if (abi >= 2) access |= LANDLOCK_ACCESS_FS_REFER;
  if (abi >= 3) access |= LANDLOCK_ACCESS_FS_TRUNCATE;
  if (abi >= 5) access |= LANDLOCK_ACCESS_FS_IOCTL_DEV;
  return access;
}

// Handling TCP refuses it outright, but for the one port of LandlockPlan::tcp_port.
uint64_t HandledNetAccess(int abi) {
  return abi >= 4 ? LANDLOCK_ACCESS_NET_BIND_TCP | LANDLOCK_ACCESS_NET_CONNECT_TCP : 0;
}

uint64_t Scopes(int abi) {
  return abi >= 6 ? LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | LANDLOCK_SCOPE_SIGNAL : 0;
}

size_t RulesetAttrSize(int abi) {
  if (abi >= 6) return sizeof(RulesetAttr);
  if (abi >= 4) return 2 * sizeof(uint64_t);
  return sizeof(uint64_t);
}

// Grants `access` beneath path. A path that does not exist is skipped: the plan lists what the
// jail may have, not what it must have. Returns 0 or an errno.
int AddPathRule(int ruleset_fd, const char* path, uint64_t access) noexcept {
  const int fd = open(path, O_PATH | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT || errno == ENOTDIR ? 0 : errno;
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    const int err = errno;
    close(fd);
    return err;
  }
  landlock_path_beneath_attr rule{};
  rule.allowed_access = S_ISDIR(st.st_mode) ? access : access & kFileAccess;
  rule.parent_fd = fd;
  int err = 0;
  // A rule with no rights is refused by the kernel (ENOMSG) and would grant nothing anyway.
  if (rule.allowed_access != 0 &&
      syscall(SYS_landlock_add_rule, ruleset_fd, LANDLOCK_RULE_PATH_BENEATH, &rule, 0) != 0) {
    err = errno;
  }
  close(fd);
  return err;
}

// struct landlock_net_port_attr and LANDLOCK_RULE_NET_PORT (ABI 4), spelled out for older headers.
struct NetPortAttr {
  uint64_t allowed_access;
  uint64_t port;
} __attribute__((packed));
constexpr int kRuleNetPort = 2;

int AddRules(int ruleset_fd, const LandlockPlan& plan, uint64_t handled_fs) noexcept {
  if (plan.tcp_port != 0 && !plan.tcp_open && HandledNetAccess(plan.abi) != 0) {
    NetPortAttr rule{.allowed_access = HandledNetAccess(plan.abi), .port = plan.tcp_port};
    if (syscall(SYS_landlock_add_rule, ruleset_fd, kRuleNetPort, &rule, 0) != 0) return errno;
  }
  for (const std::string& dir : plan.writable) {
    if (int err = AddPathRule(ruleset_fd, dir.c_str(), handled_fs); err != 0) return err;
  }
  for (const std::string& device : plan.devices) {
    if (int err = AddPathRule(ruleset_fd, device.c_str(), kDeviceAccess & handled_fs); err != 0) return err;
  }
  return 0;
}

}  // namespace

int LandlockAbi() noexcept {
  const long abi = syscall(SYS_landlock_create_ruleset, nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION);
  return abi > 0 ? static_cast<int>(abi) : 0;
}

std::vector<std::string> LandlockRestricts(int abi, bool tcp) {
  std::vector<std::string> what;
  if (abi >= 1) what.emplace_back("filesystem");
  if (tcp && HandledNetAccess(abi) != 0) what.emplace_back("tcp");
  if (Scopes(abi) != 0) {
    what.emplace_back("signals");
    what.emplace_back("abstract_unix_sockets");
  }
  return what;
}

LandlockPlan MakeLandlockPlan(std::vector<std::string> writable, std::vector<std::string> devices) {
  LandlockPlan plan;
  plan.abi = LandlockAbi();
  plan.writable = std::move(writable);
  plan.devices = std::move(devices);
  return plan;
}

int ApplyLandlock(const LandlockPlan& plan) noexcept {
  if (plan.abi <= 0) return 0;
  const uint64_t handled_fs = HandledFsAccess(plan.abi);
  const RulesetAttr attr{handled_fs, plan.tcp_open ? 0 : HandledNetAccess(plan.abi), Scopes(plan.abi)};
  const long ruleset = syscall(SYS_landlock_create_ruleset, &attr, RulesetAttrSize(plan.abi), 0);
  if (ruleset < 0) return errno;
  const int ruleset_fd = static_cast<int>(ruleset);
  int err = AddRules(ruleset_fd, plan, handled_fs);
  if (err == 0 && syscall(SYS_landlock_restrict_self, ruleset_fd, 0) != 0) err = errno;
  close(ruleset_fd);
  return err;
}

}  // namespace execbox::jail
