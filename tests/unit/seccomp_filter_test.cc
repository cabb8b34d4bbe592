#include "jail/seccomp_filter.h"

#include <asm/unistd.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "base/io.h"

namespace execbox::jail {
namespace {

constexpr const char* kPython = "/usr/bin/python3";

struct ChildResult {
  int status = 0;
  std::string output;  // what the child wrote to its pipe
};

// Forks; the child runs body with the write end of a pipe and exits 0 when body returns. The
// parent collects everything written and the exit status.
ChildResult RunInChild(const std::function<void(int out_fd)>& body) {
  auto pipe = MakePipe();
  EXPECT_TRUE(pipe) << pipe.error().message;
  if (!pipe) return {};
  const pid_t pid = fork();
  if (pid == 0) {
    pipe->first.Reset();
    body(pipe->second.Get());
    _exit(0);
  }
  EXPECT_GT(pid, 0) << std::strerror(errno);
  pipe->second.Reset();
  ChildResult result;
  char buf[4096];
  for (;;) {
    const ssize_t n = read(pipe->first.Get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    result.output.append(buf, static_cast<size_t>(n));
  }
  while (waitpid(pid, &result.status, 0) < 0 && errno == EINTR) {
  }
  return result;
}

// Collects failed expectations inside the filtered child, where gtest's own reporting cannot
// reach the parent.
class Checks {
 public:
  explicit Checks(int out_fd) : out_fd_(out_fd) {}
  ~Checks() { (void)WriteAll(out_fd_, failures_); }

  void Fail(std::string_view what) { failures_.append(what).append("\n"); }
  // rc is the raw return of a libc call; want_errno 0 means "must succeed".
  void Expect(std::string_view what, long rc, int want_errno) {
    const int err = errno;
    if (want_errno == 0 && rc < 0) {
      Fail(std::string(what) + ": failed with " + strerrorname_np(err));
    } else if (want_errno != 0 && rc >= 0) {
      Fail(std::string(what) + ": succeeded, expected " + strerrorname_np(want_errno));
    } else if (want_errno != 0 && err != want_errno) {
      Fail(std::string(what) + ": " + strerrorname_np(err) + ", expected " + strerrorname_np(want_errno));
    }
  }

 private:
  int out_fd_;
  std::string failures_;
};

const SeccompProgram& Program() {
  static const auto* const kProgram = [] {
    auto compiled = CompileSeccompProgram();
    EXPECT_TRUE(compiled) << compiled.error().message;
    return new SeccompProgram(compiled ? std::move(*compiled) : SeccompProgram{});
  }();
  return *kProgram;
}

// Runs body in a child under the filter; returns the failures it reported.
std::string UnderFilter(const std::function<void(Checks&)>& body) {
  const SeccompProgram& program = Program();
  const ChildResult child = RunInChild([&](int out_fd) {
    Checks checks(out_fd);
    // Own session: no controlling terminal for the refused terminal calls to touch.
    setsid();
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return checks.Fail("PR_SET_NO_NEW_PRIVS failed");
    if (int err = LoadSeccompProgram(program); err != 0) {
      return checks.Fail(std::string("LoadSeccompProgram: ") + std::strerror(err));
    }
    body(checks);
  });
  EXPECT_TRUE(WIFEXITED(child.status) && WEXITSTATUS(child.status) == 0) << "child status " << child.status;
  return child.output;
}

TEST(SeccompFilter, CompilesTwoLoadablePrograms) {
  auto program = CompileSeccompProgram();
  ASSERT_TRUE(program) << program.error().message;
  EXPECT_FALSE(program->allowlist.empty());
  EXPECT_FALSE(program->argument_checks.empty());
  EXPECT_LE(program->allowlist.size(), 4096u);
  EXPECT_LE(program->argument_checks.size(), 4096u);
}

TEST(SeccompFilter, RefusedTableIsWellFormed) {
  ASSERT_FALSE(RefusedSyscalls().empty());
  for (const SeccompRule& rule : RefusedSyscalls()) {
    const std::string verdict = rule.verdict;
    EXPECT_TRUE(verdict == "EPERM" || verdict == "ENOSYS" || verdict == "kill") << rule.syscalls;
    EXPECT_GT(std::strlen(rule.reason), 0u) << rule.syscalls;
  }
}

TEST(SeccompFilter, LoadRefusesEmptyPrograms) { EXPECT_EQ(LoadSeccompProgram(SeccompProgram{}), EINVAL); }

TEST(SeccompFilter, OrdinaryCallsWork) {
  EXPECT_EQ(UnderFilter([](Checks& c) {
              c.Expect("getpid", getpid(), 0);
              int fds[2];
              c.Expect("socketpair(AF_UNIX)", socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
              c.Expect("socket(AF_UNIX)", socket(AF_UNIX, SOCK_DGRAM, 0), 0);
              c.Expect("pipe2", pipe2(fds, O_CLOEXEC), 0);
              const int devnull = open("/dev/null", O_RDWR);
              c.Expect("open(/dev/null)", devnull, 0);
              int one = 1;
              c.Expect("ioctl(FIONBIO)", ioctl(devnull, FIONBIO, &one), 0);
              c.Expect("prctl(PR_SET_NAME)", prctl(PR_SET_NAME, "filtered", 0, 0, 0), 0);
              c.Expect("personality(query)", personality(0xffffffff), 0);
              rlimit limit{};
              c.Expect("prlimit(0)", prlimit(0, RLIMIT_NOFILE, nullptr, &limit), 0);
              c.Expect("setrlimit", setrlimit(RLIMIT_CORE, &limit), 0);
              const pid_t pid = fork();
              if (pid == 0) _exit(0);
              c.Expect("fork", pid, 0);
              int status = 0;
              c.Expect("waitpid", waitpid(pid, &status, 0), 0);
              if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) c.Fail("forked child did not exit 0");
              bool ran = false;
              std::thread([&] { ran = true; }).join();
              if (!ran) c.Fail("thread did not run");
            }),
            "");
}

TEST(SeccompFilter, RefusesNetworkSockets) {
  EXPECT_EQ(UnderFilter([](Checks& c) {
              c.Expect("socket(AF_INET)", socket(AF_INET, SOCK_STREAM, 0), EPERM);
              c.Expect("socket(AF_INET6)", socket(AF_INET6, SOCK_DGRAM, 0), EPERM);
              c.Expect("socket(AF_NETLINK)", socket(AF_NETLINK, SOCK_RAW, 0), EPERM);
              c.Expect("socket(AF_PACKET)", socket(AF_PACKET, SOCK_RAW, 0), EPERM);
              int fds[2];
              c.Expect("socketpair(AF_INET)", socketpair(AF_INET, SOCK_STREAM, 0, fds), EPERM);
              // Junk in the upper half is not AF_UNIX for the filter: refused, the safe side.
              c.Expect("socket(AF_UNIX | 1 << 32)",
                       syscall(SYS_socket, AF_UNIX | (1ULL << 32), SOCK_STREAM, 0), EPERM);
            }),
            "");
}

TEST(SeccompFilter, RefusesNamespaces) {
  EXPECT_EQ(
      UnderFilter([](Checks& c) {
        c.Expect("unshare(CLONE_NEWUSER)", unshare(CLONE_NEWUSER), EPERM);
        c.Expect("setns", setns(-1, 0), EPERM);
        for (unsigned long flag : {CLONE_NEWNET, CLONE_NEWUSER, CLONE_NEWNS, CLONE_NEWPID, CLONE_NEWCGROUP}) {
          // Junk in the upper half must not hide the flag.
          const long pid = syscall(SYS_clone, flag | SIGCHLD | (1ULL << 40), 0, 0, 0, 0);
          if (pid == 0) _exit(0);  // only if the filter let it through
          if (pid > 0) waitpid(static_cast<pid_t>(pid), nullptr, 0);
          c.Expect("clone(" + std::to_string(flag) + ")", pid, EPERM);
        }
        c.Expect("clone3", syscall(SYS_clone3, nullptr, 0), ENOSYS);
      }),
      "");
}

TEST(SeccompFilter, RefusesTerminalInjectionWhateverTheUpperBits) {
  EXPECT_EQ(UnderFilter([](Checks& c) {
              // /dev/null, not a terminal: were the filter to let the call through, the kernel
              // would answer ENOTTY and inject nothing.
              const int fd = open("/dev/null", O_RDWR);
              char ch = 'x';
              c.Expect("ioctl(TIOCSTI)", syscall(SYS_ioctl, fd, TIOCSTI, &ch), EPERM);
              c.Expect("ioctl(TIOCSTI | 1 << 32)", syscall(SYS_ioctl, fd, TIOCSTI | (1ULL << 32), &ch),
                       EPERM);
              c.Expect("ioctl(TIOCLINUX)", syscall(SYS_ioctl, fd, TIOCLINUX, &ch), EPERM);
              c.Expect("ioctl(TIOCSETD)", syscall(SYS_ioctl, fd, TIOCSETD, &ch), EPERM);
              c.Expect("ioctl(TCGETS)", syscall(SYS_ioctl, fd, TCGETS, &ch), ENOTTY);
            }),
            "");
}

TEST(SeccompFilter, RefusesDangerousCalls) {
  EXPECT_EQ(UnderFilter([](Checks& c) {
              c.Expect("ptrace(TRACEME)", syscall(SYS_ptrace, 0 /* PTRACE_TRACEME */, 0, 0, 0), EPERM);
              c.Expect("keyctl", syscall(SYS_keyctl, 0, 0, 0, 0, 0), EPERM);
              c.Expect("bpf", syscall(SYS_bpf, 0, nullptr, 0), EPERM);
              c.Expect("io_uring_setup", syscall(SYS_io_uring_setup, 1, nullptr), EPERM);
              c.Expect("perf_event_open", syscall(SYS_perf_event_open, nullptr, 0, -1, -1, 0), EPERM);
              c.Expect("userfaultfd", syscall(SYS_userfaultfd, 0), EPERM);
              // A null target: even unfiltered, this mounts nothing.
              c.Expect("mount", syscall(SYS_mount, nullptr, nullptr, nullptr, 0, nullptr), EPERM);
              c.Expect("personality(ADDR_NO_RANDOMIZE)", personality(ADDR_NO_RANDOMIZE), EPERM);
              c.Expect("prctl(PR_SET_DUMPABLE)", prctl(PR_SET_DUMPABLE, 1, 0, 0, 0), EPERM);
              rlimit limit{};
              c.Expect("prlimit(parent)", prlimit(getppid(), RLIMIT_NOFILE, nullptr, &limit), EPERM);
            }),
            "");
}

// Every unconditional row of the documented table, called with arguments that are invalid for
// each of them (so nothing happens even if a call slipped through).
TEST(SeccompFilter, EveryDocumentedRefusalHolds) {
  EXPECT_EQ(UnderFilter([](Checks& c) {
              for (const SeccompRule& rule : RefusedSyscalls()) {
                const std::string names = rule.syscalls;
                if (names.find('(') != std::string::npos) continue;
                const int want = std::string_view(rule.verdict) == "ENOSYS" ? ENOSYS : EPERM;
                size_t pos = 0;
                while (pos < names.size()) {
                  const size_t end = std::min(names.find(' ', pos), names.size());
                  const std::string name = names.substr(pos, end - pos);
                  pos = end + 1;
                  const int nr = seccomp_syscall_resolve_name(name.c_str());
                  if (nr < 0) {
                    c.Fail("unknown syscall in table: " + name);
                    continue;
                  }
                  c.Expect(name, syscall(nr, -1L, -1L, -1L, -1L, -1L, -1L), want);
                }
              }
            }),
            "");
}

TEST(SeccompFilter, KillsX32Syscalls) {
  const SeccompProgram& program = Program();
  const ChildResult child = RunInChild([&](int) {
    // SIGSYS dumps core by default; the kill is expected, the core file is litter.
    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    const rlimit no_core{};
    setrlimit(RLIMIT_CORE, &no_core);
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || LoadSeccompProgram(program) != 0) _exit(2);
    syscall(__X32_SYSCALL_BIT | __NR_getpid);
    _exit(3);
  });
  ASSERT_TRUE(WIFSIGNALED(child.status)) << "status " << child.status;
  EXPECT_EQ(WTERMSIG(child.status), SIGSYS);
}

// Runs a Python script under the filter with a minimal environment; returns exit status and
// the merged stdout and stderr.
ChildResult RunPython(const std::string& script, bool filtered) {
  const std::string mpl_dir =
      std::filesystem::temp_directory_path() / ("execbox-mpl-" + std::to_string(getpid()));
  std::filesystem::create_directories(mpl_dir);
  const std::string mpl_env = "MPLCONFIGDIR=" + mpl_dir;
  const SeccompProgram& program = Program();
  ChildResult child = RunInChild([&](int out_fd) {
    dup2(out_fd, STDOUT_FILENO);
    dup2(out_fd, STDERR_FILENO);
    if (filtered) {
      if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || LoadSeccompProgram(program) != 0) {
        (void)WriteAll(STDERR_FILENO, "could not load the filter\n");
        _exit(126);
      }
    }
    alarm(120);  // survives execve: a hung interpreter is killed rather than hanging the test
    const char* argv[] = {kPython, "-c", script.c_str(), nullptr};
    const char* envp[] = {"PATH=/usr/bin:/bin", "HOME=/tmp", "LANG=C.UTF-8", mpl_env.c_str(), nullptr};
    execve(kPython, const_cast<char**>(argv), const_cast<char**>(envp));
    _exit(127);
  });
  std::filesystem::remove_all(mpl_dir);
  return child;
}

// The control run without the filter (by default the script itself) tells a missing package
// apart from a missing syscall.
void ExpectPythonWorksUnderFilter(const std::string& script, const std::string& control_script = "") {
  if (access(kPython, X_OK) != 0) GTEST_SKIP() << kPython << " is not installed";
  const ChildResult control = RunPython(control_script.empty() ? script : control_script, /*filtered=*/false);
  if (!WIFEXITED(control.status) || WEXITSTATUS(control.status) != 0) {
    GTEST_SKIP() << "the script fails even without the filter (packages missing?):\n" << control.output;
  }
  const ChildResult child = RunPython(script, /*filtered=*/true);
  EXPECT_TRUE(WIFEXITED(child.status) && WEXITSTATUS(child.status) == 0)
      << "status " << child.status << ", output:\n"
      << child.output;
  EXPECT_NE(child.output.find("ok\n"), std::string::npos) << child.output;
}

TEST(SeccompFilterPython, ScientificStackWorks) {
  ExpectPythonWorksUnderFilter(
      "import numpy, pandas, matplotlib\n"
      "matplotlib.use('Agg')\n"
      "import matplotlib.pyplot as plt\n"
      "import scipy.linalg\n"
      "import os, tempfile\n"
      "plt.plot([1, 2])\n"
      "with tempfile.TemporaryDirectory() as d:\n"
      "    plt.savefig(os.path.join(d, 'x.png'))\n"
      "    assert os.path.getsize(os.path.join(d, 'x.png')) > 0\n"
      "a = numpy.random.rand(200, 200)\n"
      "assert scipy.linalg.inv(a).shape == (200, 200)\n"
      "print(pandas.DataFrame({'a': [1, 2, 3]}).describe())\n"
      "import threading, multiprocessing\n"
      "t = threading.Thread(target=print, args=('thread',)); t.start(); t.join()\n"
      "print('ok')\n");
}

TEST(SeccompFilterPython, MultiprocessingPoolWorks) {
  ExpectPythonWorksUnderFilter(
      "import multiprocessing as mp\n"
      "if __name__ == '__main__':\n"
      "    with mp.Pool(2) as pool:\n"
      "        assert pool.map(abs, [1, -2]) == [1, 2]\n"
      "    print('ok')\n");
}

TEST(SeccompFilterPython, SubprocessWorks) {
  ExpectPythonWorksUnderFilter(
      "import subprocess\n"
      "r = subprocess.run(['/bin/echo', 'hi'], capture_output=True, text=True)\n"
      "assert r.returncode == 0 and r.stdout == 'hi\\n', r\n"
      "r = subprocess.run('echo a | cat', shell=True, capture_output=True, text=True)\n"
      "assert r.stdout == 'a\\n', r\n"
      "print('ok')\n");
}

TEST(SeccompFilterPython, NetworkIsRefusedAsAPythonError) {
  ExpectPythonWorksUnderFilter(
      "import socket\n"
      "try:\n"
      "    socket.socket(socket.AF_INET, socket.SOCK_STREAM)\n"
      "except PermissionError:\n"
      "    print('ok')\n"
      "else:\n"
      "    import sys; sys.exit('AF_INET socket was allowed')\n",
      "import socket\n");
}

}  // namespace
}  // namespace execbox::jail
