#include "jail/cgroup.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <functional>
#include <iostream>
#include <string>
#include <vector>

#include "base/io.h"
#include "base/unique_fd.h"

namespace execbox::jail {
namespace {

constexpr uint64_t kMiB = 1 << 20;

std::string Describe(const CgroupSupport& s) {
  std::string out = std::string("tier=") + TierName(s.tier) + " base=" + s.base + " v1_bases=[";
  for (const auto& b : s.v1_bases) out += b + " ";
  out += "] memory_peak=" + std::to_string(s.memory_peak) + " swap_limit=" + std::to_string(s.swap_limit) +
         " why_not=" + s.why_not;
  return out;
}

std::string DescribeStatus(int status) {
  if (WIFEXITED(status)) return "exited " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return std::string("killed by ") + strsignal(WTERMSIG(status));
  return "status " + std::to_string(status);
}

bool Exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

// The directories a group of this name has, one per hierarchy.
std::vector<std::string> GroupDirs(const std::string& name) {
  const CgroupSupport& s = DetectCgroups();
  std::vector<std::string> dirs;
  if (s.tier == CgroupTier::kV2) dirs.push_back(s.base + "/" + name);
  if (s.tier == CgroupTier::kV1) {
    for (const auto& base : s.v1_bases) dirs.push_back(base + "/" + name);
  }
  return dirs;
}

// Group names follow the "<owner-pid>-..." convention that SweepStaleCgroups relies on.
std::string GroupName(const std::string& what) {
  static int counter = 0;
  return std::to_string(::getpid()) + "-test-" + what + "-" + std::to_string(++counter);
}

// Reaps `pid`, giving up (and failing the test) after ten seconds so that a broken kill shows
// as a failure rather than a hung test.
int WaitFor(pid_t pid) {
  int status = 0;
  for (int i = 0; i < 10'000; ++i) {
    pid_t got = ::waitpid(pid, &status, WNOHANG);
    if (got == pid) return status;
    if (got < 0) {
      ADD_FAILURE() << "waitpid(" << pid << "): " << std::strerror(errno);
      return 0;
    }
    ::usleep(1000);
  }
  ADD_FAILURE() << "pid " << pid << " still runs after 10 s";
  ::kill(pid, SIGKILL);
  ::waitpid(pid, &status, 0);
  return 0;
}

// A forked child that waits until the test has put it into a group before it runs `body`,
// so that everything it does is charged to the group.
class Child {
 public:
  explicit Child(const std::function<int()>& body) {
    auto pipe = MakePipe();
    if (!pipe) return;
    pid_ = ::fork();
    if (pid_ == 0) {
      pipe->second.Reset();
      char go = 0;
      if (::read(pipe->first.Get(), &go, 1) != 1) ::_exit(120);
      ::_exit(body());
    }
    go_ = std::move(pipe->second);
  }
  ~Child() {
    if (pid_ > 0 && !reaped_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  pid_t pid() const { return pid_; }
  void Go() {
    char go = 1;
    ASSERT_EQ(::write(go_.Get(), &go, 1), 1) << std::strerror(errno);
    go_.Reset();
  }
  int Wait() {
    reaped_ = true;
    return WaitFor(pid_);
  }

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
  UniqueFd go_;
};

class CgroupTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // Double-forked grandchildren are reparented to us, not to a pid 1 that may never reap them.
    ASSERT_EQ(::prctl(PR_SET_CHILD_SUBREAPER, 1), 0) << std::strerror(errno);
  }
  void SetUp() override {
    if (DetectCgroups().tier == CgroupTier::kNone) {
      GTEST_SKIP() << "cgroups unavailable: " << DetectCgroups().why_not;
    }
  }
  void TearDown() override {
    while (::waitpid(-1, nullptr, WNOHANG) > 0) {
    }
  }

  static std::unique_ptr<Cgroup> MakeGroup(const std::string& name, const CgroupLimits& limits) {
    auto group = Cgroup::Create(name, limits);
    EXPECT_TRUE(group) << group.error().message;
    return group ? std::move(*group) : nullptr;
  }
};

TEST(CgroupTier, Names) {
  EXPECT_STREQ(TierName(CgroupTier::kNone), "none");
  EXPECT_STREQ(TierName(CgroupTier::kV1), "cgroup-v1");
  EXPECT_STREQ(TierName(CgroupTier::kV2), "cgroup-v2");
}

TEST(DetectCgroups, FindsATierAsRootAndCachesIt) {
  const CgroupSupport& s = DetectCgroups();
  std::cout << Describe(s) << "\n";
  EXPECT_EQ(&s, &DetectCgroups());
  if (::geteuid() == 0) {
    EXPECT_NE(s.tier, CgroupTier::kNone) << s.why_not;
  }
  if (s.tier == CgroupTier::kNone) {
    EXPECT_FALSE(s.why_not.empty());
    auto group = Cgroup::Create(GroupName("none"), {});
    ASSERT_FALSE(group);
    EXPECT_NE(group.error().message.find("cgroups unavailable"), std::string::npos);
  }
  if (s.tier == CgroupTier::kV2) {
    EXPECT_TRUE(Exists(s.base));
  }
  if (s.tier == CgroupTier::kV1) {
    EXPECT_GE(s.v1_bases.size(), 1u);
    for (const auto& base : s.v1_bases) EXPECT_TRUE(Exists(base)) << base;
  }
  EXPECT_EQ(s.why_not.find('\n'), std::string::npos);
}

TEST_F(CgroupTest, RefusesBadNamesAndDuplicatesWithoutHarmingTheOriginal) {
  EXPECT_FALSE(Cgroup::Create("", {}));
  EXPECT_FALSE(Cgroup::Create("..", {}));
  EXPECT_FALSE(Cgroup::Create("a/b", {}));
  std::string name = GroupName("dup");
  auto group = MakeGroup(name, {.memory_bytes = 64 * kMiB, .max_pids = 8});
  ASSERT_TRUE(group);
  auto again = Cgroup::Create(name, {});
  ASSERT_FALSE(again);
  EXPECT_NE(again.error().message.find(name), std::string::npos) << again.error().message;
  for (const auto& dir : GroupDirs(name)) EXPECT_TRUE(Exists(dir)) << dir;
}

// Reads `file` from whichever of the group's directories holds it, without the newline.
std::string ReadControl(const std::string& name, const std::string& file) {
  for (const auto& dir : GroupDirs(name)) {
    if (auto text = ReadFile(dir + "/" + file)) {
      while (!text->empty() && text->back() == '\n') text->pop_back();
      return *text;
    }
  }
  return "<no " + file + ">";
}

TEST_F(CgroupTest, WritesTheLimitsIntoTheControlFiles) {
  std::string name = GroupName("limits");
  auto group = MakeGroup(name, {.memory_bytes = 48 * kMiB, .max_pids = 5});
  ASSERT_TRUE(group);
  const CgroupSupport& s = DetectCgroups();
  std::string bytes = std::to_string(48 * kMiB);
  EXPECT_EQ(ReadControl(name, "pids.max"), "5");
  if (s.tier == CgroupTier::kV2) {
    EXPECT_EQ(ReadControl(name, "memory.max"), bytes);
    if (s.swap_limit) {
      EXPECT_EQ(ReadControl(name, "memory.swap.max"), "0");
    }
  } else {
    EXPECT_EQ(ReadControl(name, "memory.limit_in_bytes"), bytes);
    if (s.swap_limit) {
      EXPECT_EQ(ReadControl(name, "memory.memsw.limit_in_bytes"), bytes);
    }
  }
}

TEST_F(CgroupTest, MemoryHogIsOomKilledAndCounted) {
  auto group = MakeGroup(GroupName("oom"), {.memory_bytes = 64 * kMiB, .max_pids = 8});
  ASSERT_TRUE(group);
  Child child([] {
    constexpr size_t kSize = 200 * kMiB;
    void* mem = ::mmap(nullptr, kSize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) return 2;
    for (size_t off = 0; off < kSize; off += kMiB) {
      std::memset(static_cast<char*>(mem) + off, 0x5a, kMiB);
      asm volatile("" : : "r"(mem) : "memory");  // the stores must happen, though nothing reads them
    }
    return 0;
  });
  ASSERT_TRUE(group->AddProcess(child.pid()));
  child.Go();
  int status = child.Wait();
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << DescribeStatus(status);
  CgroupUsage usage = group->ReadUsage();
  EXPECT_GE(usage.oom_kills, 1u);
  if (DetectCgroups().memory_peak) {
    EXPECT_GE(usage.peak_memory_bytes, 32 * kMiB);
    EXPECT_LE(usage.peak_memory_bytes, 68 * kMiB);
  }
}

TEST_F(CgroupTest, ProcessLimitMakesForkFail) {
  auto group = MakeGroup(GroupName("pids"), {.memory_bytes = 64 * kMiB, .max_pids = 8});
  ASSERT_TRUE(group);
  // Exits with the number of forks refused with EAGAIN, or 100 + errno for any other failure.
  Child child([] {
    std::vector<pid_t> kids;
    int refused = 0;
    for (int i = 0; i < 20; ++i) {
      pid_t kid = ::fork();
      if (kid == 0) {
        ::pause();
        ::_exit(0);
      }
      if (kid > 0) {
        kids.push_back(kid);
      } else if (errno == EAGAIN) {
        ++refused;
      } else {
        return 100 + errno;
      }
    }
    for (pid_t kid : kids) ::kill(kid, SIGKILL);
    for (pid_t kid : kids) ::waitpid(kid, nullptr, 0);
    return refused;
  });
  ASSERT_TRUE(group->AddProcess(child.pid()));
  child.Go();
  int status = child.Wait();
  ASSERT_TRUE(WIFEXITED(status)) << DescribeStatus(status);
  EXPECT_GE(WEXITSTATUS(status), 1) << "no fork was refused";
  EXPECT_LE(WEXITSTATUS(status), 20) << DescribeStatus(status);
  if (uint64_t peak = group->ReadUsage().pids_peak; peak > 0) {
    EXPECT_LE(peak, 8u);
  }
}

TEST_F(CgroupTest, CountsCpuTime) {
  auto group = MakeGroup(GroupName("cpu"), {.memory_bytes = 64 * kMiB, .max_pids = 8});
  ASSERT_TRUE(group);
  Child child([] {
    timespec now{};
    do {
      ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
    } while (now.tv_sec == 0 && now.tv_nsec < 200'000'000);
    return 0;
  });
  ASSERT_TRUE(group->AddProcess(child.pid()));
  child.Go();
  int status = child.Wait();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << DescribeStatus(status);
  CgroupUsage usage = group->ReadUsage();
  EXPECT_GE(usage.cpu_ns, 100'000'000u);
  EXPECT_LT(usage.cpu_ns, 10'000'000'000u);
}

// Reads a pid from `fd`, waiting at most five seconds.
pid_t ReadPid(int fd) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, 5000) != 1) return -1;
  pid_t pid = -1;
  if (::read(fd, &pid, sizeof pid) != sizeof pid) return -1;
  return pid;
}

TEST_F(CgroupTest, KillAllReachesDoubleForkedGrandchildrenThatIgnoreSigterm) {
  std::string name = GroupName("kill");
  auto group = MakeGroup(name, {.memory_bytes = 64 * kMiB, .max_pids = 8});
  ASSERT_TRUE(group);
  auto pipe = MakePipe();
  ASSERT_TRUE(pipe);
  int report = pipe->second.Get();
  Child child([report]() -> int {
    ::signal(SIGTERM, SIG_IGN);
    if (::fork() == 0) {
      ::setsid();
      if (::fork() == 0) {
        pid_t self = ::getpid();
        if (::write(report, &self, sizeof self) != sizeof self) ::_exit(3);
        for (;;) ::pause();
      }
      ::_exit(0);
    }
    for (;;) ::pause();
  });
  ASSERT_TRUE(group->AddProcess(child.pid()));
  child.Go();
  pid_t grandchild = ReadPid(pipe->first.Get());
  ASSERT_GT(grandchild, 0);
  ::kill(child.pid(), SIGTERM);
  ::kill(grandchild, SIGTERM);
  ::usleep(50'000);
  ASSERT_EQ(::waitpid(child.pid(), nullptr, WNOHANG), 0) << "the child should have ignored SIGTERM";

  group->KillAll();
  int status = child.Wait();
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << DescribeStatus(status);
  int grand_status = WaitFor(grandchild);
  EXPECT_TRUE(WIFSIGNALED(grand_status) && WTERMSIG(grand_status) == SIGKILL) << DescribeStatus(grand_status);
  EXPECT_EQ(::kill(grandchild, 0), -1);
  EXPECT_EQ(errno, ESRCH);
  for (const auto& dir : GroupDirs(name)) {
    auto procs = ReadFile(dir + "/cgroup.procs");
    ASSERT_TRUE(procs) << procs.error().message;
    EXPECT_EQ(*procs, "") << dir;
  }
}

TEST_F(CgroupTest, DestructorRemovesTheGroupInEveryHierarchy) {
  std::string name = GroupName("dtor");
  {
    auto group = MakeGroup(name, {.memory_bytes = 64 * kMiB, .max_pids = 8});
    ASSERT_TRUE(group);
    Child child([] { return 0; });
    ASSERT_TRUE(group->AddProcess(child.pid()));
    child.Go();
    child.Wait();
    for (const auto& dir : GroupDirs(name)) EXPECT_TRUE(Exists(dir)) << dir;
  }
  for (const auto& dir : GroupDirs(name)) EXPECT_FALSE(Exists(dir)) << dir;
}

TEST_F(CgroupTest, DestructorKillsWhatIsLeft) {
  std::string name = GroupName("dtor-live");
  Child child([]() -> int {
    for (;;) ::pause();
  });
  {
    auto group = MakeGroup(name, {.memory_bytes = 64 * kMiB, .max_pids = 8});
    ASSERT_TRUE(group);
    ASSERT_TRUE(group->AddProcess(child.pid()));
    child.Go();
  }
  int status = child.Wait();
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << DescribeStatus(status);
  // The group may outlive an unreaped member for a moment; the sweep removes it at the latest.
  SweepStaleCgroups();
}

TEST_F(CgroupTest, SweepRemovesOnlyGroupsOfDeadOwners) {
  pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  ASSERT_GT(dead, 0);
  ASSERT_EQ(::waitpid(dead, nullptr, 0), dead);
  std::string dead_name = std::to_string(dead) + "-x";
  std::string busy_name = std::to_string(dead) + "-busy";
  std::string live_name = std::to_string(::getpid()) + "-live";
  std::string foreign_name = "stale-" + std::to_string(dead);
  for (const auto& n : {dead_name, busy_name, live_name, foreign_name}) {
    for (const auto& dir : GroupDirs(n)) {
      ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0) << dir << ": " << strerror(errno);
    }
  }
  // A stale group with a process still in it: the sweep must kill it to remove the group.
  Child straggler([]() -> int {
    for (;;) ::pause();
  });
  for (const auto& dir : GroupDirs(busy_name)) {
    ASSERT_TRUE(WriteFile(dir + "/cgroup.procs", std::to_string(straggler.pid())));
  }

  SweepStaleCgroups();

  int status = straggler.Wait();
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << DescribeStatus(status);
  SweepStaleCgroups();  // the first sweep may have met the straggler not yet reaped
  for (const auto& dir : GroupDirs(dead_name)) EXPECT_FALSE(Exists(dir)) << dir;
  for (const auto& dir : GroupDirs(busy_name)) EXPECT_FALSE(Exists(dir)) << dir;
  for (const auto& n : {live_name, foreign_name}) {
    for (const auto& dir : GroupDirs(n)) {
      EXPECT_TRUE(Exists(dir)) << dir;
      ::rmdir(dir.c_str());
    }
  }
}

}  // namespace
}  // namespace execbox::jail
