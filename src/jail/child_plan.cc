// Host side: turns a Policy into the jail's build steps. Runs before clone, may allocate.
#include "jail/child_plan.h"

#include <linux/capability.h>
#include <sys/stat.h>
#include <unistd.h>

#include <set>

namespace execbox::jail {
namespace {

using Kind = MountOp::Kind;

class PlanBuilder {
 public:
  explicit PlanBuilder(ChildPlan& plan) : plan_(plan) {}

  // Absolute jail path -> path under the staging root.
  const char* Staged(const std::string& inside) {
    return plan_.Keep(std::string(plan_.staging_root) + inside);
  }

  void Dir(const std::string& inside, mode_t mode = 0755) {
    if (!made_.insert(inside).second) return;
    plan_.mounts.push_back({.kind = Kind::kDir, .target = Staged(inside), .mode = mode});
  }
  // Makes every directory above `inside`.
  void Parents(const std::string& inside) {
    for (size_t slash = inside.find('/', 1); slash != std::string::npos;
         slash = inside.find('/', slash + 1)) {
      Dir(inside.substr(0, slash));
    }
  }
  void Tmpfs(const std::string& inside, const std::string& options, mode_t mode) {
    Parents(inside);
    Dir(inside, mode);
    plan_.mounts.push_back(
        {.kind = Kind::kTmpfs, .target = Staged(inside), .source = plan_.Keep(options), .mode = mode});
  }
  void File(const std::string& inside, const std::string& content, mode_t mode) {
    Parents(inside);
    const char* target = Staged(inside);
    const char* data = plan_.Keep(content);
    plan_.mounts.push_back(
        {.kind = Kind::kFile, .target = target, .data = data, .size = content.size(), .mode = mode});
  }
  void Symlink(const std::string& inside, const std::string& link_text) {
    Parents(inside);
    plan_.mounts.push_back(
        {.kind = Kind::kSymlink, .target = Staged(inside), .source = plan_.Keep(link_text)});
  }
  // A host path bound read-only at `inside` ("": the same place); a file needs an empty file
  // to cover.
  Status Bind(const std::string& path, bool required, Kind kind = Kind::kBindReadOnly,
              const std::string& inside = "") {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) {
      if (required) return FailErrno("bind source " + path);
      return {};
    }
    const std::string& target = inside.empty() ? path : inside;
    if (S_ISDIR(st.st_mode)) {
      Parents(target);
      Dir(target);
    } else {
      File(target, "", 0444);
    }
    plan_.mounts.push_back({.kind = kind, .target = Staged(target), .source = plan_.Keep(path)});
    return {};
  }
  // Top-level entries like /lib64: a symlink on the host (merged /usr) is recreated.
  Status RootLink(const std::string& path) {
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0) return {};
    if (S_ISLNK(st.st_mode)) {
      char buf[4096];
      ssize_t n = ::readlink(path.c_str(), buf, sizeof buf - 1);
      if (n < 0) return FailErrno("readlink(" + path + ")");
      Symlink(path, std::string(buf, static_cast<size_t>(n)));
      return {};
    }
    return Bind(path, false);
  }

 private:
  ChildPlan& plan_;
  std::set<std::string> made_;
};

std::string TmpfsOptions(uint64_t bytes, uint64_t inodes, const char* mode, const std::string& owner = "") {
  std::string o = "size=" + std::to_string(bytes) + ",nr_inodes=" + std::to_string(inodes) + ",mode=" + mode;
  if (!owner.empty()) o += "," + owner;
  return o;
}

void AddDev(PlanBuilder& b, const Limits& l, bool zygote) {
  b.Tmpfs("/dev", "size=65536,nr_inodes=64,mode=0755", 0755);
  for (const char* dev : {"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"}) {
    (void)b.Bind(dev, true, Kind::kBindDevice);
  }
  b.Symlink("/dev/fd", "/proc/self/fd");
  b.Symlink("/dev/stdin", "/proc/self/fd/0");
  b.Symlink("/dev/stdout", "/proc/self/fd/1");
  b.Symlink("/dev/stderr", "/proc/self/fd/2");
  // A private /dev/shm: multiprocessing's semaphores live here.
  b.Tmpfs("/dev/shm", TmpfsOptions(l.shm_bytes, 1024, "1777"), 01777);
  // Where a warm session mounts its own devpts instance (warm_child_setup.cc).
  if (zygote) {
    b.Dir("/dev/pts");
    b.Symlink("/dev/ptmx", "pts/ptmx");
  }
}

std::vector<ResourceLimit> MakeRlimits(const Limits& l, bool rlimit_memory) {
  auto cpu_s = static_cast<rlim_t>((l.cpu_time.count() + 999) / 1000);
  std::vector<ResourceLimit> r = {
      // Soft limit sends SIGXCPU; the hard limit a second later is SIGKILL.
      {RLIMIT_CPU, cpu_s, cpu_s + 1},
      {RLIMIT_FSIZE, l.work_dir_bytes, l.work_dir_bytes},
      {RLIMIT_NOFILE, l.open_files, l.open_files},
      {RLIMIT_CORE, 0, 0},
      // Counted per user namespace, and each run has its own: a per-run process bound.
      {RLIMIT_NPROC, l.max_processes, l.max_processes},
      {RLIMIT_MSGQUEUE, 0, 0},
      {RLIMIT_MEMLOCK, 64 << 10, 64 << 10},
  };
  if (rlimit_memory) r.push_back({RLIMIT_DATA, l.memory_bytes, l.memory_bytes});
  return r;
}

}  // namespace

Expected<ChildPlan> BuildChildPlan(const Policy& policy, bool rlimit_memory) {
  ChildPlan plan;
  PlanBuilder b(plan);
  const Limits& l = policy.limits;

  uint64_t synthetic = 0;
  for (const auto& f : policy.files) synthetic += f.content.size();
  plan.mounts.push_back({.kind = Kind::kTmpfs,
                         .target = plan.staging_root,
                         .source = plan.Keep(TmpfsOptions(synthetic + (4 << 20), 4096, "0755")),
                         .mode = 0755});
  for (const auto& link : policy.root_links) {
    if (auto s = b.RootLink(link); !s) return std::unexpected(s.error());
  }
  std::vector<std::string> writable = {policy.work_dir, "/tmp", "/dev/shm"};
  for (const auto& bind : policy.binds) {
    if (auto s = b.Bind(bind.path, bind.required, bind.writable ? Kind::kBindWritable : Kind::kBindReadOnly,
                        bind.inside);
        !s)
      return std::unexpected(s.error());
    if (bind.writable) writable.push_back(bind.inside.empty() ? bind.path : bind.inside);
  }
  AddDev(b, l, policy.zygote);
  b.Tmpfs("/tmp", TmpfsOptions(l.tmp_bytes, l.inodes, "1777"), 01777);
  std::string owner = "uid=" + std::to_string(policy.uid) + ",gid=" + std::to_string(policy.gid);
  b.Tmpfs(policy.work_dir, TmpfsOptions(l.work_dir_bytes, l.inodes, "0700", owner), 0700);
  // The root is made read-only after pivot_root: the code cannot swap the link for another.
  if (!policy.work_dir_alias.empty()) b.Symlink(policy.work_dir_alias, policy.work_dir);
  b.Dir("/proc", 0555);
  plan.mounts.push_back({.kind = Kind::kProc, .target = b.Staged("/proc")});
  for (const auto& f : policy.files) b.File(f.path, f.content, f.mode);

  plan.hostname = plan.Keep(policy.hostname);
  plan.work_dir = plan.Keep(policy.work_dir);
  plan.uid = policy.uid;
  plan.gid = policy.gid;
  for (const auto& a : policy.argv) plan.argv.push_back(const_cast<char*>(plan.Keep(a)));
  plan.argv.push_back(nullptr);
  for (const auto& e : policy.env) plan.envp.push_back(const_cast<char*>(plan.Keep(e)));
  plan.envp.push_back(nullptr);
  plan.rlimits = MakeRlimits(l, rlimit_memory);
  plan.landlock = MakeLandlockPlan(std::move(writable), {"/dev/null", "/dev/zero", "/dev/full"});
  plan.collect_files = policy.collect.enabled;
  plan.zygote = policy.zygote;
  // CAP_DAC_OVERRIDE for a session's overlay root (session_root.h): overlayfs does its work in
  // a directory of mode 0 with the mounter's credentials. Inside the user namespace it
  // overrides only the modes of files whose owner is mapped there: the sandbox's own.
  // CAP_NET_ADMIN brings a session's loopback up for its network relay (warm_child_setup.h);
  // it is over the children's own net namespaces only, and dropped with the rest at lockdown.
  plan.zygote_capabilities = (1ull << CAP_SYS_ADMIN) | (1ull << CAP_SETPCAP) | (1ull << CAP_DAC_OVERRIDE) |
                             (1ull << CAP_NET_ADMIN);
  plan.max_files = policy.collect.max_files;
  plan.max_file_bytes = policy.collect.max_file_bytes;
  return plan;
}

}  // namespace execbox::jail
