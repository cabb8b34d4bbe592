// The syscall policy of the jail.
//
// Two seccomp programs are stacked on the jailed process; the kernel runs both on every syscall
// and the stricter verdict wins.
//
// 1. The allowlist decides by syscall number alone. Everything not listed below fails with EPERM
//    (a clean Python exception rather than a dead process, so the model sees what happened).
//    The list is generous on purpose: CPython 3.11 with numpy, pandas, scipy and matplotlib,
//    threads, multiprocessing and subprocess of /usr/bin tools must work unchanged. What is
//    left out is administration, kernel subsystems with a long exploit history (bpf, io_uring,
//    perf, userfaultfd, keyrings), anything that looks at or changes other processes (ptrace,
//    process_vm_*), and anything that changes the filesystem view or namespaces the jail built.
//    A few syscalls are allowed only with harmless first arguments: prctl (a short list of
//    options), personality (query and PER_LINUX only, so no ADDR_NO_RANDOMIZE) and prlimit64
//    (pid 0, i.e. the caller). clone3 gets ENOSYS: its flags live in memory that seccomp cannot
//    read, and ENOSYS makes glibc fall back to clone, whose flags the second program can check.
// 2. The argument checks allow everything by default and refuse what the allowlist cannot
//    express by number: sockets other than AF_UNIX, clone with any namespace flag, and the
//    terminal ioctls that inject input or switch line disciplines.
//
// Both programs accept only native x86_64 syscalls. The x32 ABI (x86_64 numbers with
// __X32_SYSCALL_BIT set) and foreign architectures kill the process: they are never legitimate
// here and would otherwise be a second, unchecked syscall table.
//
// The refused groups and their reasons are listed once, in RefusedSyscalls(); unconditional
// entries of that table are checked against the allowlist when the programs are compiled.
//
// Loading order: the allowlist does not contain the landlock_* syscalls, so Landlock must be
// applied before the programs are loaded. The programs themselves are loaded argument checks
// first (that program allows seccomp()), then the allowlist.
#include "jail/seccomp_filter.h"

#include <fcntl.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

#include "base/unique_fd.h"

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif

namespace execbox::jail {
namespace {

// ---- The allowlist, by purpose. ----

// One purpose per table, names packed by hand.
// clang-format off
constexpr const char* kProcessSyscalls[] = {
    "exit", "exit_group", "restart_syscall", "clone", "fork", "vfork", "execve", "execveat",
    "wait4", "waitid", "getpid", "getppid", "gettid", "set_tid_address", "set_robust_list", "rseq",
    "arch_prctl", "setsid", "setpgid", "getpgid", "getpgrp", "getsid", "seccomp",
    // Signals to processes: the jail has its own pid namespace, and Landlock scoping (where the
    // kernel has it) keeps signals inside the code's own process tree.
    "kill", "tkill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo", "pidfd_open",
    "pidfd_send_signal",
};

// The code runs without capabilities, so the set*id calls can only shuffle ids it already has.
constexpr const char* kCredentialSyscalls[] = {
    "getuid", "geteuid", "getgid", "getegid", "getresuid", "getresgid", "getgroups", "setuid",
    "setgid", "setreuid", "setregid", "setresuid", "setresgid", "setfsuid", "setfsgid",
    "setgroups", "capget",
};

constexpr const char* kMemorySyscalls[] = {
    "brk", "mmap", "munmap", "mremap", "mprotect", "madvise", "mincore", "msync", "membarrier",
    "get_mempolicy", "pkey_alloc", "pkey_free", "pkey_mprotect", "memfd_create",
};

// Where files may be written is decided by the mounts and Landlock, not here.
constexpr const char* kFileSyscalls[] = {
    "read", "write", "open", "openat", "openat2", "creat", "close", "close_range", "lseek",
    "pread64", "pwrite64", "readv", "writev", "preadv", "pwritev", "preadv2", "pwritev2",
    "stat", "fstat", "lstat", "newfstatat", "statx", "statfs", "fstatfs", "access", "faccessat",
    "faccessat2", "readlink", "readlinkat", "getdents", "getdents64", "getcwd", "chdir", "fchdir",
    "rename", "renameat", "renameat2", "link", "linkat", "symlink", "symlinkat", "unlink",
    "unlinkat", "mkdir", "mkdirat", "rmdir", "mknod", "mknodat", "chmod", "fchmod", "fchmodat",
    "fchmodat2", "chown", "fchown", "lchown", "fchownat", "umask", "utime", "utimes", "futimesat",
    "utimensat", "truncate", "ftruncate", "fallocate", "fsync", "fdatasync", "sync_file_range",
    "fadvise64", "readahead", "flock", "fcntl", "dup", "dup2", "dup3", "pipe", "pipe2", "ioctl",
    "sendfile", "copy_file_range", "splice", "tee", "getxattr", "lgetxattr", "fgetxattr",
    "listxattr", "llistxattr", "flistxattr", "setxattr", "lsetxattr", "fsetxattr", "removexattr",
    "lremovexattr", "fremovexattr", "inotify_init", "inotify_init1", "inotify_add_watch",
    "inotify_rm_watch",
};

constexpr const char* kWaitingSyscalls[] = {
    "poll", "ppoll", "select", "pselect6", "epoll_create", "epoll_create1", "epoll_ctl",
    "epoll_wait", "epoll_pwait", "epoll_pwait2", "eventfd", "eventfd2", "signalfd", "signalfd4",
    "timerfd_create", "timerfd_settime", "timerfd_gettime", "futex", "futex_waitv",
};

constexpr const char* kSignalAndTimeSyscalls[] = {
    "rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "rt_sigpending", "rt_sigtimedwait",
    "rt_sigsuspend", "sigaltstack", "pause", "alarm", "getitimer", "setitimer", "timer_create",
    "timer_settime", "timer_gettime", "timer_getoverrun", "timer_delete", "clock_gettime",
    "clock_getres", "clock_nanosleep", "nanosleep", "gettimeofday", "time", "times",
};

constexpr const char* kSchedulingAndLimitSyscalls[] = {
    "sched_yield", "sched_getaffinity", "sched_setaffinity", "sched_getparam",
    "sched_getscheduler", "sched_get_priority_max", "sched_get_priority_min",
    "sched_rr_get_interval", "sched_getattr", "getpriority", "setpriority", "getrlimit",
    "setrlimit", "getrusage", "sysinfo", "uname", "getcpu", "getrandom",
};

// Domains are checked by the second program.
constexpr const char* kSocketSyscalls[] = {
    "socket", "socketpair", "connect", "bind", "listen", "accept", "accept4", "sendto",
    "recvfrom", "sendmsg", "recvmsg", "sendmmsg", "recvmmsg", "getsockopt", "setsockopt",
    "getsockname", "getpeername", "shutdown",
};
// clang-format on

constexpr std::span<const char* const> kAllowedGroups[] = {
    kProcessSyscalls,       kCredentialSyscalls,         kMemorySyscalls, kFileSyscalls, kWaitingSyscalls,
    kSignalAndTimeSyscalls, kSchedulingAndLimitSyscalls, kSocketSyscalls};

// prctl options that only concern the caller and grant nothing: naming threads, death signals,
// reading state, and switches that can only restrict (no_new_privs, seccomp, THP off).
// Options such as PR_SET_DUMPABLE, PR_SET_MM or PR_SET_PTRACER stay refused.
constexpr uint64_t kAllowedPrctlOptions[] = {PR_SET_PDEATHSIG,       PR_GET_PDEATHSIG,   PR_GET_DUMPABLE,
                                             PR_GET_KEEPCAPS,        PR_SET_NAME,        PR_GET_NAME,
                                             PR_GET_SECCOMP,         PR_SET_SECCOMP,     PR_CAPBSET_READ,
                                             PR_GET_TIMERSLACK,      PR_SET_TIMERSLACK,  PR_SET_NO_NEW_PRIVS,
                                             PR_GET_NO_NEW_PRIVS,    PR_GET_THP_DISABLE, PR_SET_THP_DISABLE,
                                             PR_GET_CHILD_SUBREAPER, PR_SET_VMA};

// personality(0xffffffff) only reads the persona; PER_LINUX is the default one.
constexpr uint64_t kAllowedPersonalities[] = {0xffffffffu, PER_LINUX};

// glibc's getrlimit and setrlimit are prlimit64(0, ...); other pids are refused.
constexpr uint64_t kSelfPid[] = {0};

// Syscalls allowed only when their first argument is one of the values.
struct FirstArgumentRule {
  const char* syscall;
  std::span<const uint64_t> values;
};
constexpr FirstArgumentRule kConditionallyAllowed[] = {
    {"prctl", kAllowedPrctlOptions}, {"personality", kAllowedPersonalities}, {"prlimit64", kSelfPid}};

// ---- The argument checks. ----

constexpr uint64_t kNamespaceCloneFlags[] = {CLONE_NEWNS,  CLONE_NEWUTS, CLONE_NEWIPC,    CLONE_NEWUSER,
                                             CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWCGROUP, CLONE_NEWTIME};

// TIOCSTI and TIOCLINUX push input into a terminal (a classic escape from a sandbox that shares
// one); TIOCSETD switches line disciplines, a recurring source of kernel bugs.
constexpr uint64_t kRefusedIoctls[] = {TIOCSTI, TIOCLINUX, TIOCSETD};

// The kernel reads int and unsigned int arguments from the low 32 bits of the register, so a
// comparison that allows must look at those bits only, or garbage in the upper half would
// change nothing for the kernel but could dodge a refusal.
constexpr uint64_t kLow32Bits = 0xffffffffu;

// ---- libseccomp plumbing. ----

struct FilterDeleter {
  void operator()(void* ctx) const { seccomp_release(ctx); }
};
using Filter = std::unique_ptr<void, FilterDeleter>;

// libseccomp reports failures as negative errno values.
std::unexpected<Error> FailSeccomp(const std::string& what, int rc) { return FailErrno(what, -rc); }

Expected<Filter> NewFilter(uint32_t default_action) {
  Filter filter(seccomp_init(default_action));
  if (!filter) return Fail("seccomp_init failed");
  // Only the native ABI; on x86_64 this leaves x32 out, so its calls hit the bad-arch action.
  if (int rc = seccomp_attr_set(filter.get(), SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS); rc < 0) {
    return FailSeccomp("seccomp_attr_set(ACT_BADARCH)", rc);
  }
  if (seccomp_arch_exist(filter.get(), SCMP_ARCH_X32) == 0) {
    if (int rc = seccomp_arch_remove(filter.get(), SCMP_ARCH_X32); rc < 0) {
      return FailSeccomp("seccomp_arch_remove(x32)", rc);
    }
  }
  // A binary search over syscall numbers instead of a linear chain: the allowlist is long.
  if (int rc = seccomp_attr_set(filter.get(), SCMP_FLTATR_CTL_OPTIMIZE, 2); rc < 0) {
    return FailSeccomp("seccomp_attr_set(CTL_OPTIMIZE)", rc);
  }
  return filter;
}

Expected<int> ResolveSyscall(std::string_view name) {
  const std::string owned(name);
  const int nr = seccomp_syscall_resolve_name(owned.c_str());
  if (nr == __NR_SCMP_ERROR) return Fail("unknown syscall name: " + owned);
  return nr;
}

Status AddRule(const Filter& filter, uint32_t action, std::string_view name,
               std::span<const scmp_arg_cmp> args = {}) {
  auto nr = ResolveSyscall(name);
  if (!nr) return std::unexpected(nr.error());
  const int rc =
      seccomp_rule_add_array(filter.get(), action, *nr, static_cast<unsigned>(args.size()), args.data());
  if (rc < 0) return FailSeccomp("seccomp_rule_add(" + std::string(name) + ")", rc);
  return {};
}

// One rule per value: libseccomp ORs the rules of a syscall together.
Status AddRulePerValue(const Filter& filter, uint32_t action, std::string_view name, unsigned arg,
                       scmp_compare op, uint64_t mask, std::span<const uint64_t> values) {
  for (uint64_t value : values) {
    const scmp_arg_cmp cmp =
        op == SCMP_CMP_MASKED_EQ ? scmp_arg_cmp{arg, op, mask, value} : scmp_arg_cmp{arg, op, value, 0};
    if (auto st = AddRule(filter, action, name, {&cmp, 1}); !st) return st;
  }
  return {};
}

Expected<std::vector<sock_filter>> Export(const Filter& filter) {
  UniqueFd fd(memfd_create("execbox-seccomp", MFD_CLOEXEC));
  if (!fd.Valid()) return FailErrno("memfd_create(execbox-seccomp)");
  if (int rc = seccomp_export_bpf(filter.get(), fd.Get()); rc < 0) {
    return FailSeccomp("seccomp_export_bpf", rc);
  }
  struct stat st {};
  if (fstat(fd.Get(), &st) != 0) return FailErrno("fstat(seccomp memfd)");
  const size_t bytes = static_cast<size_t>(st.st_size);
  if (bytes == 0 || bytes % sizeof(sock_filter) != 0 || bytes / sizeof(sock_filter) > BPF_MAXINSNS) {
    return Fail("seccomp_export_bpf produced " + std::to_string(bytes) + " bytes, not a loadable program");
  }
  std::vector<sock_filter> program(bytes / sizeof(sock_filter));
  auto* out = reinterpret_cast<char*>(program.data());
  for (size_t done = 0; done < bytes;) {
    const ssize_t n = pread(fd.Get(), out + done, bytes - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return FailErrno("pread(seccomp memfd)");
    if (n == 0) return Fail("seccomp memfd shrank while reading it");
    done += static_cast<size_t>(n);
  }
  return program;
}

bool IsAllowed(std::string_view name) {
  for (auto group : kAllowedGroups) {
    for (const char* allowed : group) {
      if (name == allowed) return true;
    }
  }
  for (const FirstArgumentRule& rule : kConditionallyAllowed) {
    if (name == rule.syscall) return true;
  }
  return false;
}

// Calls fn(name) for each syscall of an unconditional RefusedSyscalls() row (one without a
// parenthesised condition); rows with conditions are implemented by hand below.
template <typename Fn>
Status ForEachUnconditionallyRefused(const SeccompRule& rule, Fn fn) {
  const std::string_view names = rule.syscalls;
  if (names.find('(') != std::string_view::npos) return {};
  for (size_t pos = 0; pos < names.size();) {
    const size_t end = std::min(names.find(' ', pos), names.size());
    if (end > pos) {
      if (auto st = fn(names.substr(pos, end - pos)); !st) return st;
    }
    pos = end + 1;
  }
  return {};
}

// Keeps the documented table and the filter in agreement: an unconditionally refused syscall
// must not be on the allowlist, and refusals other than the default EPERM become rules.
Status AddRefusals(const Filter& filter) {
  for (const SeccompRule& rule : RefusedSyscalls()) {
    const std::string_view verdict = rule.verdict;
    auto st = ForEachUnconditionallyRefused(rule, [&](std::string_view name) -> Status {
      if (IsAllowed(name)) return Fail("syscall both allowed and refused: " + std::string(name));
      if (verdict == "ENOSYS") return AddRule(filter, SCMP_ACT_ERRNO(ENOSYS), name);
      if (verdict != "EPERM") {
        return Fail("unknown verdict in the refused-syscall table: " + std::string(verdict));
      }
      // EPERM is the default action; the name only has to be a real syscall.
      if (auto nr = ResolveSyscall(name); !nr) return std::unexpected(nr.error());
      return {};
    });
    if (!st) return st;
  }
  return {};
}

Status AddAllowlistRules(const Filter& filter) {
  for (auto group : kAllowedGroups) {
    for (const char* name : group) {
      if (auto st = AddRule(filter, SCMP_ACT_ALLOW, name); !st) return st;
    }
  }
  // The arguments are int or unsigned int for the kernel: only the low 32 bits count.
  for (const FirstArgumentRule& rule : kConditionallyAllowed) {
    if (auto st = AddRulePerValue(filter, SCMP_ACT_ALLOW, rule.syscall, 0, SCMP_CMP_MASKED_EQ, kLow32Bits,
                                  rule.values);
        !st) {
      return st;
    }
  }
  return AddRefusals(filter);
}

// clone and ioctl, for both variants of the argument checks.
Status AddCloneAndIoctlChecks(const Filter& filter);

Status AddArgumentCheckRules(const Filter& filter) {
  const uint32_t refuse = SCMP_ACT_ERRNO(EPERM);
  // Compared on all 64 bits: a domain with junk in the upper half is not AF_UNIX and is refused,
  // which errs on the safe side (glibc sign-extends the int, so real callers never do this).
  constexpr uint64_t kUnix[] = {AF_UNIX};
  for (const char* name : {"socket", "socketpair"}) {
    if (auto st = AddRulePerValue(filter, refuse, name, 0, SCMP_CMP_NE, 0, kUnix); !st) return st;
  }
  return AddCloneAndIoctlChecks(filter);
}

// With network through the host: AF_UNIX, or AF_INET with SOCK_STREAM and protocol 0 or TCP.
// The namespace has only lo, so such a socket reaches the sandbox's own loopback and nothing
// else (and Landlock, where it handles TCP, narrows it to the relay's port).
Status AddLoopbackArgumentCheckRules(const Filter& filter) {
  const uint32_t refuse = SCMP_ACT_ERRNO(EPERM);
  constexpr uint64_t kUnix[] = {AF_UNIX};
  if (auto st = AddRulePerValue(filter, refuse, "socketpair", 0, SCMP_CMP_NE, 0, kUnix); !st) return st;
  // Domains 0 and above AF_INET (2) are refused; AF_UNIX (1) is as before.
  const scmp_arg_cmp zero{0, SCMP_CMP_EQ, 0, 0}, above{0, SCMP_CMP_GT, AF_INET, 0};
  if (auto st = AddRule(filter, refuse, "socket", {&zero, 1}); !st) return st;
  if (auto st = AddRule(filter, refuse, "socket", {&above, 1}); !st) return st;
  // AF_INET: the type's low four bits must be SOCK_STREAM (flags above them are the kernel's to
  // check), and the protocol 0 or IPPROTO_TCP.
  for (uint64_t type = 0; type < 16; ++type) {
    if (type == SOCK_STREAM) continue;
    const scmp_arg_cmp cmp[] = {{0, SCMP_CMP_EQ, AF_INET, 0}, {1, SCMP_CMP_MASKED_EQ, 0xf, type}};
    if (auto st = AddRule(filter, refuse, "socket", cmp); !st) return st;
  }
  const scmp_arg_cmp odd_protocol[] = {{0, SCMP_CMP_EQ, AF_INET, 0}, {2, SCMP_CMP_GT, IPPROTO_TCP, 0}};
  if (auto st = AddRule(filter, refuse, "socket", odd_protocol); !st) return st;
  for (uint64_t protocol = 1; protocol < IPPROTO_TCP; ++protocol) {
    const scmp_arg_cmp cmp[] = {{0, SCMP_CMP_EQ, AF_INET, 0}, {2, SCMP_CMP_EQ, protocol, 0}};
    if (auto st = AddRule(filter, refuse, "socket", cmp); !st) return st;
  }
  return AddCloneAndIoctlChecks(filter);
}

Status AddCloneAndIoctlChecks(const Filter& filter) {
  const uint32_t refuse = SCMP_ACT_ERRNO(EPERM);
  // clone's flags are an unsigned long but the kernel uses only the low 32 bits; a masked test
  // of a low bit is not fooled by the upper half. CLONE_NEWTIME shares its bit with the exit
  // signal byte of clone(), where it only matches invalid signals, so refusing it costs nothing.
  for (uint64_t flag : kNamespaceCloneFlags) {
    const uint64_t value[] = {flag};
    if (auto st = AddRulePerValue(filter, refuse, "clone", 0, SCMP_CMP_MASKED_EQ, flag, value); !st) {
      return st;
    }
  }
  // The kernel truncates the request to unsigned int, so TIOCSTI | (1 << 32) is still TIOCSTI.
  return AddRulePerValue(filter, refuse, "ioctl", 1, SCMP_CMP_MASKED_EQ, kLow32Bits, kRefusedIoctls);
}

Expected<std::vector<sock_filter>> Compile(uint32_t default_action, Status (*add_rules)(const Filter&)) {
  auto filter = NewFilter(default_action);
  if (!filter) return std::unexpected(filter.error());
  if (auto st = add_rules(*filter); !st) return std::unexpected(st.error());
  return Export(*filter);
}

int LoadOne(const std::vector<sock_filter>& program) noexcept {
  if (program.empty() || program.size() > BPF_MAXINSNS) return EINVAL;
  sock_fprog prog{};
  prog.len = static_cast<unsigned short>(program.size());
  prog.filter = const_cast<sock_filter*>(program.data());
  if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) != 0) return errno;
  return 0;
}

}  // namespace

Expected<SeccompProgram> CompileSeccompProgram(bool loopback_tcp) {
  SeccompProgram program;
  auto allowlist = Compile(SCMP_ACT_ERRNO(EPERM), AddAllowlistRules);
  if (!allowlist) return std::unexpected(Context("seccomp allowlist", allowlist.error()));
  auto checks = Compile(SCMP_ACT_ALLOW, loopback_tcp ? AddLoopbackArgumentCheckRules : AddArgumentCheckRules);
  if (!checks) return std::unexpected(Context("seccomp argument checks", checks.error()));
  program.allowlist = std::move(*allowlist);
  program.argument_checks = std::move(*checks);
  return program;
}

int LoadSeccompProgram(const SeccompProgram& program) noexcept {
  // The argument checks allow seccomp() itself, so loading them first never depends on what
  // the allowlist permits.
  if (int err = LoadOne(program.argument_checks); err != 0) return err;
  return LoadOne(program.allowlist);
}

const std::vector<SeccompRule>& RefusedSyscalls() {
  // Rows without a parenthesised condition are refused whatever the arguments; the compiler
  // above checks them against the allowlist. Every syscall absent from the allowlist is refused
  // with EPERM too; these rows name the ones worth explaining.
  static const auto* const kRules = new std::vector<SeccompRule>{
      {"ptrace process_vm_readv process_vm_writev kcmp pidfd_getfd process_madvise get_robust_list", "EPERM",
       "inspect or change other processes"},
      {"mount umount2 pivot_root chroot mount_setattr move_mount open_tree fsopen fsconfig fsmount fspick",
       "EPERM", "the filesystem view is fixed by the jail"},
      {"unshare setns", "EPERM",
       "new namespaces (user namespaces above all) open kernel attack surface and escape the jail's limits"},
      {"clone (with CLONE_NEWNS, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET, NEWCGROUP or NEWTIME)", "EPERM",
       "as unshare: no new namespaces"},
      {"clone3", "ENOSYS", "its flags are in memory seccomp cannot read; glibc falls back to clone"},
      {"socket socketpair (domain other than AF_UNIX)", "EPERM",
       "no network; local pipes and socketpairs only"},
      {"ioctl (TIOCSTI, TIOCLINUX or TIOCSETD, on the low 32 bits of the request)", "EPERM",
       "inject input into a terminal or switch its line discipline"},
      {"keyctl add_key request_key", "EPERM", "kernel keyrings are shared with the host and not needed"},
      {"bpf perf_event_open userfaultfd io_uring_setup io_uring_enter io_uring_register", "EPERM",
       "large kernel attack surface and common exploit primitives"},
      {"kexec_load kexec_file_load init_module finit_module delete_module reboot swapon swapoff acct",
       "EPERM", "host administration"},
      {"settimeofday clock_settime clock_adjtime adjtimex", "EPERM", "the system clock belongs to the host"},
      {"open_by_handle_at name_to_handle_at", "EPERM", "file handles reach files outside the mount view"},
      {"syslog vhangup quotactl lookup_dcookie iopl ioperm modify_ldt fanotify_init", "EPERM",
       "kernel log, terminals, quotas, I/O ports, LDT, filesystem-wide monitoring: not for sandboxed code"},
      {"mlock mlock2 mlockall vmsplice sync syncfs", "EPERM",
       "pinning memory or flushing host filesystems affects the host, and Python does not need them"},
      {"landlock_create_ruleset landlock_add_rule landlock_restrict_self", "EPERM",
       "not needed by the code; Landlock is applied before the filter is loaded"},
      {"personality (other than the query 0xffffffff and PER_LINUX)", "EPERM",
       "e.g. ADDR_NO_RANDOMIZE would turn off address randomisation for executed programs"},
      {"prctl (options other than PDEATHSIG, NAME, DUMPABLE read, KEEPCAPS read, SECCOMP, CAPBSET_READ, "
       "TIMERSLACK, NO_NEW_PRIVS, THP_DISABLE, CHILD_SUBREAPER read, SET_VMA)",
       "EPERM", "e.g. PR_SET_DUMPABLE, PR_SET_MM and PR_SET_PTRACER change how others may reach the process"},
      {"prlimit64 (pid other than 0)", "EPERM", "limits of other processes are not the code's business"},
      {"(any syscall of the x32 ABI or of another architecture)", "kill",
       "a second syscall table that the filter does not check"},
      {"(every syscall not on the allowlist)", "EPERM", "what is not known to be needed is refused"},
  };
  return *kRules;
}

}  // namespace execbox::jail
