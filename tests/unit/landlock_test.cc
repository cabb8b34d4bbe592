#include "jail/landlock.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>

#include "base/io.h"
#include "base/unique_fd.h"

namespace execbox::jail {
namespace {

// Forks; the child runs body and writes the failures it found to a pipe. Returns them, or a
// note when the child did not exit cleanly.
std::string RunInChild(const std::function<std::string()>& body) {
  auto pipe = MakePipe();
  if (!pipe) return pipe.error().message;
  const pid_t pid = fork();
  if (pid < 0) return std::string("fork: ") + std::strerror(errno);
  if (pid == 0) {
    pipe->first.Reset();
    (void)WriteAll(pipe->second.Get(), body());
    _exit(0);
  }
  pipe->second.Reset();
  std::string output;
  char buf[4096];
  for (;;) {
    const ssize_t n = read(pipe->first.Get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    output.append(buf, static_cast<size_t>(n));
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) output += "child status " + std::to_string(status);
  return output;
}

// rc is the raw return of a libc call; want_errno 0 means "must succeed".
std::string Check(std::string_view what, long rc, int want_errno) {
  const int err = errno;
  if (want_errno == 0 && rc < 0) return std::string(what) + ": failed with " + strerrorname_np(err) + "\n";
  if (want_errno != 0 && rc >= 0)
    return std::string(what) + ": succeeded, expected " + strerrorname_np(want_errno) + "\n";
  if (want_errno != 0 && err != want_errno) {
    return std::string(what) + ": " + strerrorname_np(err) + ", expected " + strerrorname_np(want_errno) +
           "\n";
  }
  return "";
}

long CreateFile(const std::string& path) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd >= 0) close(fd);
  return fd;
}

long WriteTo(const std::string& path, int flags = 0) {
  const int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC | flags);
  if (fd < 0) return fd;
  const long n = write(fd, "x", 1);
  close(fd);
  return n;
}

std::string ApplyInChild(const LandlockPlan& plan) {
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return "PR_SET_NO_NEW_PRIVS failed\n";
  if (int err = ApplyLandlock(plan); err != 0)
    return std::string("ApplyLandlock: ") + std::strerror(err) + "\n";
  return "";
}

class LandlockTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (LandlockAbi() == 0) GTEST_SKIP() << "the kernel has no Landlock (or it is disabled)";
    writable_ = MakeTempDir();
    other_ = MakeTempDir();
    ASSERT_FALSE(writable_.empty() || other_.empty());
    // A file that exists before the restriction, to read and (not) modify afterwards.
    ASSERT_GE(CreateFile(other_ + "/existing"), 0);
  }
  void TearDown() override {
    for (const std::string& dir : {writable_, other_}) {
      if (!dir.empty()) std::filesystem::remove_all(dir);
    }
  }

  static std::string MakeTempDir() {
    std::string tmpl = std::filesystem::temp_directory_path() / "execbox-landlock-XXXXXX";
    return mkdtemp(tmpl.data()) ? tmpl : "";
  }

  LandlockPlan Plan() const {
    return MakeLandlockPlan({writable_, "/nonexistent/execbox-dir"}, {"/dev/null"});
  }

  std::string writable_;
  std::string other_;
};

TEST(LandlockAbi, IsConsistentWithThePlan) {
  const int abi = LandlockAbi();
  EXPECT_GE(abi, 0);
  EXPECT_EQ(MakeLandlockPlan({}, {}).abi, abi);
}

TEST_F(LandlockTest, AbiZeroAppliesNothing) {
  LandlockPlan plan = Plan();
  plan.abi = 0;
  EXPECT_EQ(RunInChild([&] {
              std::string failures = ApplyInChild(plan);
              failures += Check("create outside", CreateFile(other_ + "/new"), 0);
              return failures;
            }),
            "");
}

TEST_F(LandlockTest, WritesOnlyWhereAllowed) {
  const LandlockPlan plan = Plan();
  EXPECT_EQ(RunInChild([&] {
              // Control: before the restriction everything below is possible.
              std::string failures = Check("create outside, before", CreateFile(other_ + "/before"), 0);
              failures += ApplyInChild(plan);
              failures += Check("create inside", CreateFile(writable_ + "/file"), 0);
              failures += Check("write inside", WriteTo(writable_ + "/file", O_TRUNC), 0);
              failures += Check("mkdir inside", mkdir((writable_ + "/dir").c_str(), 0700), 0);
              failures += Check("rename inside",
                                rename((writable_ + "/file").c_str(), (writable_ + "/dir/f").c_str()), 0);
              failures += Check("unlink inside", unlink((writable_ + "/dir/f").c_str()), 0);
              failures += Check("mkfifo inside", mkfifo((writable_ + "/fifo").c_str(), 0600), 0);
              failures += Check("symlink inside", symlink("/", (writable_ + "/link").c_str()), 0);
              failures += Check("create outside", CreateFile(other_ + "/new"), EACCES);
              failures += Check("mkdir outside", mkdir((other_ + "/dir").c_str(), 0700), EACCES);
              // Creating without opening for writing is still making a file.
              failures += Check("create read-only outside",
                                open((other_ + "/ro").c_str(), O_RDONLY | O_CREAT | O_CLOEXEC, 0600), EACCES);
              failures += Check("mkfifo outside", mkfifo((other_ + "/fifo").c_str(), 0600), EACCES);
              failures += Check("symlink outside", symlink("/", (other_ + "/link").c_str()), EACCES);
              failures += Check("rename outward",
                                rename((writable_ + "/dir").c_str(), (other_ + "/moved").c_str()), EACCES);
              failures += Check("write outside", WriteTo(other_ + "/existing"), EACCES);
              failures += Check("unlink outside", unlink((other_ + "/existing").c_str()), EACCES);
              failures +=
                  Check("read outside", open((other_ + "/existing").c_str(), O_RDONLY | O_CLOEXEC), 0);
              if (plan.abi >= 3) {
                failures += Check("truncate outside", truncate((other_ + "/existing").c_str(), 0), EACCES);
              }
              failures += Check("write /dev/null", WriteTo("/dev/null", O_TRUNC), 0);
              return failures;
            }),
            "");
}

TEST_F(LandlockTest, WritableEntryMayBeAFile) {
  const std::string file = writable_ + "/only";
  ASSERT_GE(CreateFile(file), 0);
  const LandlockPlan plan = MakeLandlockPlan({file}, {});
  EXPECT_EQ(RunInChild([&] {
              std::string failures = ApplyInChild(plan);
              failures += Check("write the file", WriteTo(file), 0);
              failures += Check("create beside it", CreateFile(writable_ + "/beside"), EACCES);
              return failures;
            }),
            "");
}

TEST_F(LandlockTest, RefusesTcp) {
  const LandlockPlan plan = Plan();
  if (plan.abi < 4) GTEST_SKIP() << "Landlock ABI " << plan.abi << " has no network control (needs 4)";
  UniqueFd listener(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  ASSERT_TRUE(listener.Valid());
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  ASSERT_EQ(bind(listener.Get(), reinterpret_cast<sockaddr*>(&addr), len), 0);
  ASSERT_EQ(listen(listener.Get(), 8), 0);
  ASSERT_EQ(getsockname(listener.Get(), reinterpret_cast<sockaddr*>(&addr), &len), 0);
  EXPECT_EQ(RunInChild([&] {
              auto connect_to_listener = [&] {
                UniqueFd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
                return connect(fd.Get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr);
              };
              std::string failures = Check("connect, before", connect_to_listener(), 0);
              failures += ApplyInChild(plan);
              failures += Check("connect", connect_to_listener(), EACCES);
              UniqueFd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
              sockaddr_in any{};
              any.sin_family = AF_INET;
              any.sin_port = htons(1);  // port 0 is not checked by Landlock
              failures +=
                  Check("bind", bind(fd.Get(), reinterpret_cast<const sockaddr*>(&any), sizeof any), EACCES);
              return failures;
            }),
            "");
}

TEST_F(LandlockTest, ScopesSignalsAndAbstractSockets) {
  const LandlockPlan plan = Plan();
  if (plan.abi < 6) GTEST_SKIP() << "Landlock ABI " << plan.abi << " has no scopes (needs 6)";
  UniqueFd listener(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  ASSERT_TRUE(listener.Valid());
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::string name = "execbox-landlock-test-" + std::to_string(getpid());
  std::memcpy(addr.sun_path + 1, name.data(), name.size());  // leading NUL: abstract namespace
  const auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  ASSERT_EQ(bind(listener.Get(), reinterpret_cast<sockaddr*>(&addr), len), 0);
  ASSERT_EQ(listen(listener.Get(), 8), 0);
  EXPECT_EQ(RunInChild([&] {
              auto connect_to_listener = [&] {
                UniqueFd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
                return connect(fd.Get(), reinterpret_cast<const sockaddr*>(&addr), len);
              };
              std::string failures = Check("signal parent, before", kill(getppid(), 0), 0);
              failures += Check("abstract connect, before", connect_to_listener(), 0);
              failures += ApplyInChild(plan);
              failures += Check("signal parent", kill(getppid(), 0), EPERM);
              failures += Check("abstract connect", connect_to_listener(), EPERM);
              // Processes inside the domain stay reachable.
              const pid_t child = fork();
              if (child == 0) {
                pause();
                _exit(0);
              }
              failures += Check("signal own child", kill(child, SIGKILL), 0);
              waitpid(child, nullptr, 0);
              return failures;
            }),
            "");
}

}  // namespace
}  // namespace execbox::jail

// What the result's isolation reports per ABI: Debian 12's 6.1 (ABI 2) restricts only the
// filesystem; TCP from ABI 4, signals and abstract sockets from ABI 6.
TEST(LandlockRestricts, NamesWhatEachAbiRestricts) {
  using V = std::vector<std::string>;
  EXPECT_EQ(execbox::jail::LandlockRestricts(0), V{});
  EXPECT_EQ(execbox::jail::LandlockRestricts(2), V{"filesystem"});
  EXPECT_EQ(execbox::jail::LandlockRestricts(3), V{"filesystem"});
  EXPECT_EQ(execbox::jail::LandlockRestricts(4), (V{"filesystem", "tcp"}));
  EXPECT_EQ(execbox::jail::LandlockRestricts(7),
            (V{"filesystem", "tcp", "signals", "abstract_unix_sockets"}));
}
