// The jail's input: a plain value that says what runs, what it sees and what it may use.
// The jail knows nothing of Python; the runtime layer fills a Policy for the interpreter.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "base/error.h"

namespace execbox::jail {

// Every limit, with the defaults of docs/design.md, "Defaults". One source of truth: the CLI and
// docs read these.
struct Limits {
  std::chrono::milliseconds wall_time{30'000};
  std::chrono::milliseconds cpu_time{30'000};
  uint64_t memory_bytes = 256ull << 20;   // RAM, no swap
  uint32_t max_processes = 64;            // processes + threads
  uint64_t output_bytes = 1ull << 20;     // kept per stream (head + tail)
  uint64_t output_kill_factor = 64;       // a stream past factor * output_bytes is stopped
  uint64_t work_dir_bytes = 64ull << 20;  // tmpfs size of the work dir; also RLIMIT_FSIZE
  uint64_t tmp_bytes = 64ull << 20;       // tmpfs size of /tmp
  uint64_t shm_bytes = 16ull << 20;       // tmpfs size of /dev/shm
  uint64_t inodes = 16384;                // per writable tmpfs
  uint32_t open_files = 256;              // RLIMIT_NOFILE
};

// A host path made visible read-only (nosuid, nodev), at the same place inside or at `inside`.
struct Bind {
  std::string path;
  bool required = false;  // a missing required path fails the run; others are skipped
  std::string inside;     // absolute; "" for `path` itself
  // A directory the code may write into (still nosuid, nodev; Landlock lets writes through
  // here as in the work dir). Only for trusted runs that produce something the host keeps (a
  // package set built from the wheelhouse): never for a request's own code, whose writes go to
  // its tmpfs work dir, and never in a zygote, whose children inherit its mounts.
  bool writable = false;
};

// A file the jail writes into its read-only root before the code starts.
struct SyntheticFile {
  std::string path;  // absolute, inside the jail
  std::string content;
  mode_t mode = 0444;
};

// A file placed in the work dir before the code starts.
struct InputFile {
  std::string name;  // relative, validated with ValidateRelativeName
  std::string content;
};

// The work dir is the code's home, its working directory and, with /tmp and /dev/shm, the only
// place it may write: a size-limited tmpfs. The alias names the same directory for the clients
// and code written when it was /work. It is a symbolic link in the read-only root, not a second
// mount: the code cannot replace it, and a rename from one name to the other works (across two
// mounts of one tmpfs it would fail with EXDEV).
inline constexpr char kHomeDir[] = "/home/user";
inline constexpr char kWorkDirAlias[] = "/work";

// Entries at the top of the work dir whose names start with this are execbox's own (a
// session's installed packages, a snapshot being made): never collected as output files.
inline constexpr char kPrivatePrefix[] = ".execbox-";

struct FileCollection {
  bool enabled = false;
  uint32_t max_files = 32;
  uint64_t max_file_bytes = 8ull << 20;
};

// Where the code's process finds Policy::egress_fd.
inline constexpr int kEgressFd = 4;

struct Policy {
  std::vector<std::string> argv;  // argv[0] is an absolute path inside the jail
  std::vector<std::string> env;   // the complete environment, "KEY=value"
  std::vector<Bind> binds;
  // Top-level host entries such as /bin or /lib64: a symlink is recreated, a dir bound.
  std::vector<std::string> root_links;
  std::vector<SyntheticFile> files;
  std::vector<InputFile> inputs;
  std::string stdin_data;
  std::string hostname = "sandbox";
  std::string work_dir = kHomeDir;
  std::string work_dir_alias = kWorkDirAlias;  // a link to work_dir in the root; "" for none
  uid_t uid = 1000;                            // the id the code runs as inside
  gid_t gid = 1000;
  Limits limits;
  FileCollection collect;
  // Hands the code a pipe as fd 3 for a structured report (read by the runtime).
  bool report_channel = false;
  // A trusted zygote worker rather than untrusted code: fd 3 is a SOCK_SEQPACKET socket to
  // the host (its commands), and the process keeps CAP_SYS_ADMIN, CAP_SETPCAP, CAP_DAC_OVERRIDE
  // and CAP_NET_ADMIN inside its user namespace, with no seccomp, Landlock or no_new_privs, so that it can give every
  // child it forks fresh namespaces and mounts and then lock that child down completely
  // (jail/zygote_loop.h). Only our own worker binary may run so.
  bool zygote = false;
  // Network through the host (engine/egress_proxy.h), off unless set: a descriptor of the
  // caller's (open until Run returns) that the code's process gets as kEgressFd, and the
  // loopback port its relay listens on. The net namespace stays empty but for `lo`, which is
  // brought up; seccomp then allows AF_INET stream sockets (on that loopback only: there is
  // no other interface) and Landlock, where it handles TCP, this one port.
  int egress_fd = -1;
  uint16_t egress_port = 0;
  // Run even when cgroups are missing (limits then fall back to rlimits; reported).
  bool allow_rlimit_fallback = true;
};

// Names inside the work dir: relative, no "..", no NUL or control characters, bounded length.
Status ValidateRelativeName(const std::string& name);
// Checks limits are usable (positive times, at least 16 MiB of memory, ...).
Status ValidateLimits(const Limits& limits);
// Checks a policy before anything is created, so a bad request fails with a clear message.
Status Validate(const Policy& policy);

}  // namespace execbox::jail
