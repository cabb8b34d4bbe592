#include "jail/cgroup.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <iostream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/io.h"
#include "base/unique_fd.h"
#include "jail/cgroup_internal.h"  // MoveToLeaf, EnableControllersMovingToLeaf

namespace execbox::jail {
namespace {

constexpr uint64_t kMiB = 1 << 20;

std::string Describe(const CgroupSupport& s) {
  std::string out = std::string("tier=") + TierName(s.tier) + " base=" + s.base + " v1_bases=[";
  for (const auto& b : s.v1_bases) out += b + " ";
  out += "] memory_peak=" + std::to_string(s.memory_peak) + " swap_limit=" + std::to_string(s.swap_limit) +
         " cpu_weight=" + std::to_string(s.cpu_weight) + " why_not=" + s.why_not;
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

// A session's memory limit changes with each execution, up and down (v1 keeps memory+swap at
// or above memory alone at every step, so the order of the writes matters).
TEST_F(CgroupTest, LimitsGoUpAndDownAfterCreation) {
  std::string name = GroupName("relimit");
  auto group = MakeGroup(name, {.memory_bytes = 48 * kMiB, .max_pids = 5});
  ASSERT_TRUE(group);
  const CgroupSupport& s = DetectCgroups();
  const std::string file = s.tier == CgroupTier::kV2 ? "memory.max" : "memory.limit_in_bytes";
  for (uint64_t mib : {200u, 32u, 512u, 64u}) {
    auto set = group->SetLimits({.memory_bytes = mib * kMiB, .max_pids = 7});
    ASSERT_TRUE(set.has_value()) << mib << " MiB: " << set.error().message;
    EXPECT_EQ(ReadControl(name, file), std::to_string(mib * kMiB));
    if (s.tier == CgroupTier::kV1 && s.swap_limit) {
      EXPECT_EQ(ReadControl(name, "memory.memsw.limit_in_bytes"), std::to_string(mib * kMiB));
    }
    EXPECT_EQ(ReadControl(name, "pids.max"), "7");
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

TEST_F(CgroupTest, CpuWeightIsWrittenClampedAndNotALimit) {
  if (!DetectCgroups().cpu_weight) GTEST_SKIP() << "the groups take no CPU weight here";
  std::string name = GroupName("weight");
  auto group = MakeGroup(name, {.memory_bytes = 64 * kMiB, .max_pids = 8});
  ASSERT_TRUE(group);
  const bool v2 = DetectCgroups().tier == CgroupTier::kV2;
  const std::string file = v2 ? "cpu.weight" : "cpu.shares";
  EXPECT_EQ(ReadControl(name, file), v2 ? "100" : "1024");  // a new group has the default
  group->SetCpuWeight(50);
  EXPECT_EQ(ReadControl(name, file), v2 ? "50" : "512");
  group->SetCpuWeight(0);
  EXPECT_EQ(ReadControl(name, file), v2 ? "1" : "10");
  group->SetCpuWeight(1'000'000);
  EXPECT_EQ(ReadControl(name, file), v2 ? "10000" : "102400");
  if (!v2) {
    group->SetCpuWeight(1);
    EXPECT_EQ(ReadControl(name, file), "10");
  }
}

// Two groups whose only process spins on the same CPU: the one of weight 100 gets clearly more of
// it than the one of weight 20 (the kernel aims at 5 to 1; asserted: more than 2 to 1).
TEST_F(CgroupTest, AHeavierGroupGetsMoreOfAContendedCpu) {
  if (!DetectCgroups().cpu_weight) GTEST_SKIP() << "the groups take no CPU weight here";
  auto heavy = MakeGroup(GroupName("heavy"), {.memory_bytes = 64 * kMiB, .max_pids = 8});
  auto light = MakeGroup(GroupName("light"), {.memory_bytes = 64 * kMiB, .max_pids = 8});
  ASSERT_TRUE(heavy && light);
  heavy->SetCpuWeight(100);
  light->SetCpuWeight(20);
  cpu_set_t one{};
  CPU_ZERO(&one);
  ASSERT_EQ(::sched_getaffinity(0, sizeof one, &one), 0) << std::strerror(errno);
  int cpu = 0;
  while (cpu < CPU_SETSIZE && !CPU_ISSET(cpu, &one)) ++cpu;
  ASSERT_LT(cpu, CPU_SETSIZE);
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  auto spin = [one] {
    if (::sched_setaffinity(0, sizeof one, &one) != 0) return 3;
    timespec start{}, now{};
    ::clock_gettime(CLOCK_MONOTONIC, &start);
    do {
      ::clock_gettime(CLOCK_MONOTONIC, &now);
    } while ((now.tv_sec - start.tv_sec) * 1'000'000'000L + (now.tv_nsec - start.tv_nsec) < 1'500'000'000L);
    return 0;
  };
  Child a(spin), b(spin);
  ASSERT_TRUE(heavy->AddProcess(a.pid()));
  ASSERT_TRUE(light->AddProcess(b.pid()));
  a.Go();
  b.Go();
  for (Child* c : {&a, &b}) {
    int status = c->Wait();
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << DescribeStatus(status);
  }
  const uint64_t heavy_ns = heavy->ReadUsage().cpu_ns, light_ns = light->ReadUsage().cpu_ns;
  EXPECT_GT(heavy_ns, 2 * light_ns) << "heavy " << heavy_ns / 1'000'000 << " ms, light "
                                    << light_ns / 1'000'000 << " ms of CPU";
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

// ---------------------------------------------------------------------------------------------
// The leaf move for delegated cgroup v2 groups. It never runs on the test runner itself: a
// throwaway group under the runner's own v2 group stands in for "the own group", and forked
// children stand in for "this process". Nothing here touches a v1 hierarchy.

std::vector<std::string> Fields(const std::string& text, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(sep, start);
    if (end == std::string::npos) end = text.size();
    out.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

// The cgroup2 mount whose root is the hierarchy's root, or nothing.
std::optional<std::string> V2MountPoint() {
  auto info = ReadFile("/proc/self/mountinfo");
  if (!info) return std::nullopt;
  for (const auto& line : Fields(*info, '\n')) {
    auto f = Fields(line, ' ');
    auto dash = std::find(f.begin(), f.end(), "-");
    if (dash == f.end() || dash + 1 == f.end() || *(dash + 1) != "cgroup2" || f.size() < 5) continue;
    if (f[3] == "/") return f[4];
  }
  return std::nullopt;
}

// The cgroup v2 path of `pid` ("0::/a/b" gives "/a/b"), or "" when it has none.
std::string V2Path(pid_t pid) {
  auto text = ReadFile("/proc/" + std::to_string(pid) + "/cgroup");
  if (!text) return "";
  for (const auto& line : Fields(*text, '\n')) {
    if (line.starts_with("0::")) return line.substr(3);
  }
  return "";
}

std::vector<std::string> Lines(const std::string& path) {
  std::vector<std::string> out;
  auto text = ReadFile(path);
  if (!text) return out;
  for (auto& line : Fields(*text, '\n')) {
    if (!line.empty()) out.push_back(line);
  }
  return out;
}

// A child that sits in pause() with one extra thread, so that moving it moves two threads.
class Sleeper {
 public:
  Sleeper() {
    auto pipe = MakePipe();
    if (!pipe) return;
    pid_ = ::fork();
    if (pid_ == 0) {
      pipe->first.Reset();
      std::thread([] {
        for (;;) ::pause();
      }).detach();
      char ready = 1;
      if (::write(pipe->second.Get(), &ready, 1) != 1) ::_exit(3);
      for (;;) ::pause();
    }
    pipe->second.Reset();
    char ready = 0;
    pollfd p{pipe->first.Get(), POLLIN, 0};
    if (pid_ < 0 || ::poll(&p, 1, 5000) != 1 || ::read(pipe->first.Get(), &ready, 1) != 1) {
      ADD_FAILURE() << "the sleeper did not start";
    }
  }
  ~Sleeper() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  Sleeper(const Sleeper&) = delete;
  Sleeper& operator=(const Sleeper&) = delete;
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
};

class LeafMoveTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto mount = V2MountPoint();
    if (!mount) GTEST_SKIP() << "no cgroup2 mount showing its hierarchy's root";
    std::string own = V2Path(::getpid());
    if (own.empty()) GTEST_SKIP() << "this process has no cgroup v2 line";
    parent_ = own == "/" ? *mount : *mount + own;
    static int counter = 0;
    dir_ = parent_ + "/leaftest-" + std::to_string(::getpid()) + "-" + std::to_string(++counter);
    if (::mkdir(dir_.c_str(), 0755) != 0) {
      std::string why = std::strerror(errno);
      dir_.clear();
      GTEST_SKIP() << "cannot make a throwaway cgroup v2 group under " << parent_ << ": " << why;
    }
    leaf_ = dir_ + "/supervisor";
  }
  void TearDown() override {
    sleepers_.clear();  // kills and reaps them, emptying the groups
    if (dir_.empty()) return;
    for (int i = 0; i < 1000; ++i) {
      ::rmdir(leaf_.c_str());
      if (::rmdir(dir_.c_str()) == 0 || errno == ENOENT) break;
      ::usleep(1000);
    }
    EXPECT_FALSE(Exists(dir_)) << dir_;
    if (added_ != nullptr) {
      // Hands the controller lent to the throwaway group back; fails harmlessly if others use it.
      (void)WriteFile(parent_ + "/cgroup.subtree_control", std::string("-") + added_);
    }
  }

  // A new sleeper put into `group`.
  pid_t SleeperIn(const std::string& group) {
    sleepers_.push_back(std::make_unique<Sleeper>());
    pid_t pid = sleepers_.back()->pid();
    auto moved = WriteFile(group + "/cgroup.procs", std::to_string(pid));
    EXPECT_TRUE(moved) << moved.error().message;
    return pid;
  }

  // The v2 path of the throwaway group (what /proc/<pid>/cgroup shows for its members).
  std::string PathOf(const std::string& dir) const {
    auto mount = V2MountPoint();
    return dir.substr(mount->size());
  }

  // A controller the throwaway group has for its children, lending one from its parent only when
  // that is the hierarchy's root (which may always do so), as root. Empty when there is none.
  std::string HandDownAController() {
    auto have = Fields(ReadFile(dir_ + "/cgroup.controllers").value_or(""), ' ');
    for (auto& c : have) {
      while (!c.empty() && c.back() == '\n') c.pop_back();
      if (!c.empty()) return c;
    }
    if (::geteuid() != 0 || Exists(parent_ + "/cgroup.type")) return "";
    for (auto c : {"hugetlb", "rdma", "misc", "perf_event"}) {
      auto at_root = Fields(ReadFile(parent_ + "/cgroup.controllers").value_or(""), ' ');
      for (auto& r : at_root) {
        while (!r.empty() && r.back() == '\n') r.pop_back();
      }
      if (std::find(at_root.begin(), at_root.end(), c) == at_root.end()) continue;
      auto enabled = ReadFile(parent_ + "/cgroup.subtree_control").value_or("");
      bool was = enabled.find(c) != std::string::npos;
      if (WriteFile(parent_ + "/cgroup.subtree_control", std::string("+") + c)) {
        if (!was) added_ = c;
        return c;
      }
    }
    return "";
  }

  std::string parent_;
  std::string dir_;
  std::string leaf_;
  const char* added_ = nullptr;
  std::vector<std::unique_ptr<Sleeper>> sleepers_;
};

TEST_F(LeafMoveTest, MovesTheWholeThreadGroupIntoTheLeaf) {
  pid_t pid = SleeperIn(dir_);
  ASSERT_EQ(Lines(dir_ + "/cgroup.threads").size(), 2u);

  auto moved = cgroup_internal::MoveToLeaf(dir_, pid);
  ASSERT_TRUE(moved) << moved.error().message;

  EXPECT_EQ(V2Path(pid), PathOf(leaf_));
  EXPECT_TRUE(Lines(dir_ + "/cgroup.procs").empty());
  EXPECT_TRUE(Lines(dir_ + "/cgroup.threads").empty());
  EXPECT_EQ(Lines(leaf_ + "/cgroup.procs"), std::vector<std::string>{std::to_string(pid)});
  EXPECT_EQ(Lines(leaf_ + "/cgroup.threads").size(), 2u);
}

TEST_F(LeafMoveTest, UsesALeafThatExistsAlready) {
  ASSERT_EQ(::mkdir(leaf_.c_str(), 0755), 0) << std::strerror(errno);
  pid_t pid = SleeperIn(dir_);
  auto moved = cgroup_internal::MoveToLeaf(dir_, pid);
  ASSERT_TRUE(moved) << moved.error().message;
  EXPECT_EQ(V2Path(pid), PathOf(leaf_));
}

TEST_F(LeafMoveTest, NeverMovesAProcessThatSharesTheGroup) {
  pid_t self = SleeperIn(dir_);
  pid_t other = SleeperIn(dir_);
  auto moved = cgroup_internal::MoveToLeaf(dir_, self);
  ASSERT_FALSE(moved);
  EXPECT_NE(moved.error().message.find("other processes share"), std::string::npos) << moved.error().message;
  EXPECT_NE(moved.error().message.find(std::to_string(other)), std::string::npos) << moved.error().message;
  EXPECT_EQ(V2Path(self), PathOf(dir_));
  EXPECT_EQ(V2Path(other), PathOf(dir_));
  EXPECT_FALSE(Exists(leaf_));
}

TEST_F(LeafMoveTest, RefusesAPidOutsideTheGroup) {
  SleeperIn(dir_);
  sleepers_.push_back(std::make_unique<Sleeper>());
  pid_t outside = sleepers_.back()->pid();
  std::string before = V2Path(outside);
  auto moved = cgroup_internal::MoveToLeaf(dir_, outside);
  ASSERT_FALSE(moved);
  EXPECT_NE(moved.error().message.find("is not a member"), std::string::npos) << moved.error().message;
  EXPECT_EQ(V2Path(outside), before);
  EXPECT_FALSE(Exists(leaf_));
}

TEST_F(LeafMoveTest, RefusesTheRootAndV1Hierarchies) {
  // Only a sleeper's pid is ever offered; the checks come before any write.
  sleepers_.push_back(std::make_unique<Sleeper>());
  pid_t pid = sleepers_.back()->pid();
  std::string before = V2Path(pid);
  auto root = cgroup_internal::MoveToLeaf(*V2MountPoint(), pid);
  ASSERT_FALSE(root);
  EXPECT_NE(root.error().message.find("not a non-root cgroup v2 group"), std::string::npos)
      << root.error().message;
  EXPECT_EQ(V2Path(pid), before);
  for (const auto& v1 : DetectCgroups().v1_bases) {
    auto refused = cgroup_internal::MoveToLeaf(v1.substr(0, v1.rfind('/')), pid);
    EXPECT_FALSE(refused) << v1;
    EXPECT_FALSE(Exists(v1.substr(0, v1.rfind('/')) + "/supervisor")) << v1;
  }
}

TEST_F(LeafMoveTest, EnablingControllersInAGroupWithoutProcessesMovesNothing) {
  std::string controller = HandDownAController();
  if (controller.empty()) GTEST_SKIP() << "no cgroup v2 controller to hand down under " << parent_;
  auto enabled = cgroup_internal::EnableControllersMovingToLeaf(dir_, ::getpid(), {controller});
  ASSERT_TRUE(enabled) << enabled.error().message;
  EXPECT_FALSE(*enabled);
  EXPECT_NE(ReadFile(dir_ + "/cgroup.subtree_control").value_or("").find(controller), std::string::npos);
  EXPECT_FALSE(Exists(leaf_));
}

TEST_F(LeafMoveTest, EbusyMovesTheProcessIntoTheLeafAndEnablesTheControllers) {
  std::string controller = HandDownAController();
  if (controller.empty()) GTEST_SKIP() << "no cgroup v2 controller to hand down under " << parent_;
  pid_t pid = SleeperIn(dir_);
  // The kernel's "no internal processes" rule, which the move works around.
  ASSERT_FALSE(WriteFile(dir_ + "/cgroup.subtree_control", "+" + controller));

  auto enabled = cgroup_internal::EnableControllersMovingToLeaf(dir_, pid, {controller});
  ASSERT_TRUE(enabled) << enabled.error().message;
  EXPECT_TRUE(*enabled);
  EXPECT_EQ(V2Path(pid), PathOf(leaf_));
  EXPECT_NE(ReadFile(dir_ + "/cgroup.subtree_control").value_or("").find(controller), std::string::npos);
  // Siblings of the leaf get the controller, as <own>/execbox does.
  std::string sibling = dir_ + "/execbox";
  ASSERT_EQ(::mkdir(sibling.c_str(), 0755), 0) << std::strerror(errno);
  EXPECT_NE(ReadFile(sibling + "/cgroup.controllers").value_or("").find(controller), std::string::npos);
  ::rmdir(sibling.c_str());
}

TEST_F(LeafMoveTest, OtherRefusalsMoveNothing) {
  pid_t pid = SleeperIn(dir_);
  // A controller the group was not given fails with ENOENT before the kernel looks at members.
  auto enabled = cgroup_internal::EnableControllersMovingToLeaf(dir_, pid, {"no-such-controller"});
  ASSERT_FALSE(enabled);
  EXPECT_EQ(enabled.error().message.find(std::strerror(EBUSY)), std::string::npos) << enabled.error().message;
  EXPECT_EQ(V2Path(pid), PathOf(dir_));
  EXPECT_FALSE(Exists(leaf_));
}

TEST_F(LeafMoveTest, EbusyWithOtherProcessesGivesUpAndSaysWhy) {
  std::string controller = HandDownAController();
  if (controller.empty()) GTEST_SKIP() << "no cgroup v2 controller to hand down under " << parent_;
  pid_t self = SleeperIn(dir_);
  pid_t other = SleeperIn(dir_);
  auto enabled = cgroup_internal::EnableControllersMovingToLeaf(dir_, self, {controller});
  ASSERT_FALSE(enabled);
  const std::string& why = enabled.error().message;
  EXPECT_NE(why.find(std::strerror(EBUSY)), std::string::npos) << why;
  EXPECT_NE(why.find("other processes share"), std::string::npos) << why;
  EXPECT_NE(why.find(std::to_string(other)), std::string::npos) << why;
  EXPECT_EQ(V2Path(self), PathOf(dir_));
  EXPECT_EQ(V2Path(other), PathOf(dir_));
  EXPECT_FALSE(Exists(leaf_));
  auto subtree = ReadFile(dir_ + "/cgroup.subtree_control");
  ASSERT_TRUE(subtree) << subtree.error().message;
  EXPECT_EQ(subtree->find(controller), std::string::npos) << *subtree;
}

}  // namespace
}  // namespace execbox::jail
