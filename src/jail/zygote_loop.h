// Inside a zygote worker (a jail started with Policy::zygote): forks one fully isolated child
// per execution or session, before any request exists.
//
// Each child is one process, forked from the zygote as pid 1 of a new pid namespace (so when it
// ends the kernel kills everything it started). It reports itself to the host (which moves it
// into a cgroup of its own), makes new mount, network, IPC, UTS and cgroup namespaces, mounts a
// fresh work dir, /tmp and /dev/shm, hands the zygote its work dir by descriptor, mounts its own
// /proc, drops every capability, sets no_new_privs, Landlock and seccomp, writes one ready byte
// on its channel and only then returns to the caller (the worker's Python) to wait for code.
// The zygote stays outside: it reaps the child and reports how it ended, stops it when the host
// says so, and sends the work dir's files back, as the cold jail's init does.
#pragma once

#include <sys/types.h>

#include <cstdint>

#include "jail/landlock.h"
#include "jail/policy.h"
#include "jail/seccomp_filter.h"

namespace execbox::jail {

inline constexpr uint32_t kWarmSpawnMagic = 0x65785731;  // "exW1"

// What the host asks of one child: sent over the zygote's command socket with two
// descriptors attached (the child's control socket and the code's channel), and for a session
// a third: the socket its init serves the host on (session_init.h).
struct WarmChildSpec {
  uint32_t magic = kWarmSpawnMagic;
  uint32_t session = 0;  // 1: the code's process serves many executions
  uint64_t work_dir_bytes = 0;
  uint64_t tmp_bytes = 0;
  uint64_t shm_bytes = 0;
  uint64_t inodes = 0;
  uint64_t open_files = 0;
  uint32_t max_files = 0;
  uint32_t collect = 0;  // 1: send the work dir's files when the code's process ends
  uint64_t max_file_bytes = 0;
  // A session's network through the host (engine/egress_proxy.h): the port of the relay its
  // init listens on, on the sandbox's own loopback; 0: no network. With it the command carries
  // a fourth descriptor, the connector.
  uint32_t egress_port = 0;
  // 1: the child runs a throwaway execution before it reads the first request, so that its
  // copy-on-write faults are paid ahead of demand (a prepared child). 0: one forked for a
  // request waiting now, for which it would be work on the request's path.
  uint32_t prewarm = 1;
};

// Sent once by the zygote when it is warm (or could not become so).
struct ZygoteReady {
  uint32_t magic = kWarmSpawnMagic;
  uint32_t ok = 0;
  char message[2048] = {};  // preload failures, or why the zygote cannot serve
};

// Built once in the zygote.
struct ZygoteSetup {
  const SeccompProgram* seccomp = nullptr;
  // For a session with network: AF_INET stream sockets allowed too (its namespace has only lo).
  const SeccompProgram* seccomp_loopback = nullptr;
  LandlockPlan landlock;
  // A session's: its root is an overlay of its own (session_root.h), writable wherever its user
  // owns a directory, so writes are allowed beneath / (the host's directories stay read-only
  // mounts, which Landlock does not loosen).
  LandlockPlan session_landlock;
  // Each child's own tmpfs, mounted over the zygote's; the zygote's root already holds the
  // alias (Policy::work_dir_alias), a link that then leads to the child's.
  const char* work_dir = kHomeDir;
  // Around each fork of a process that goes on to run the interpreter (PyOS_BeforeFork and
  // friends); may be null.
  void (*before_fork)() = nullptr;
  void (*after_fork_parent)() = nullptr;
  void (*after_fork_child)() = nullptr;
  // Runs in the locked-down code process with its channel as fd 3; must not return. (A
  // session's init, its pid 1, runs jail code only: RunSessionInit.) `layer`: a session's
  // root's upper layer, read-only (session_root.h), for its snapshots; else -1. `egress_port`:
  // a session's relay port (its proxies' address for the code's environment), else 0.
  // `prewarm`: WarmChildSpec::prewarm.
  void (*run_code)(int channel, bool session, int layer, int egress_port, bool prewarm) = nullptr;
};

// Collapses this process's private anonymous memory (the heap and anonymous mappings, in whole
// 2 MiB blocks) into transparent huge pages (MADV_COLLAPSE, Linux 6.1; a kernel without it
// leaves the memory as it is). For a zygote before it serves: each fork then copies and each
// exit tears down one entry per 2 MiB instead of 512, and a child still copies only the 4 KiB
// pages it writes. No VM_HUGEPAGE is set, so the children's own new memory stays in small
// pages. A range the kernel will not collapse stays as it is.
void CollapseIntoHugePages();

// The zygote's loop: sends `ready`, then forks a child for every command until the host
// closes the command socket (then exits 0). Never returns.
[[noreturn]] void ServeZygote(int command_fd, const ZygoteReady& ready, const ZygoteSetup& setup);

}  // namespace execbox::jail
