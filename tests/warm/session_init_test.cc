// A session child's init (jail/session_init.h) end to end, on real warm children in real jails:
// the kernel is its child, the init starts, signals and reaps processes for the host over its
// own socket (jail/init_link.h), code cannot reach it, and when the kernel ends the host still
// learns how, and nothing else of the session lives on.
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <functional>
#include <optional>
#include <string>

#include "base/io.h"
#include "jail/init_link.h"
#include "jail/policy.h"
#include "jail/zygote.h"
#include "runtime/python_program.h"
#include "warm/warm_fixture.h"

namespace execbox::engine {
namespace {

using jail::InitEvent;
using Kind = jail::InitEvent::Kind;
using std::chrono::steady_clock;

class SessionInit : public Warm {
 protected:
  void SetUp() override {
    Warm::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    auto child = g_engine->pool()->Acquire(g_engine->pool()->options().limits, true);
    ASSERT_TRUE(child.has_value()) << child.error().message;
    child_ = std::move(*child);
    link_ = child_->init();
    ASSERT_NE(link_, nullptr);
  }
  void TearDown() override {
    link_.reset();
    child_.reset();
  }

  jail::Outcome Exec(const std::string& code) {
    auto p = Program(code);
    auto request = runtime::MakeRequest(p, true);
    EXPECT_TRUE(request.has_value());
    auto o = child_->Execute(request.value_or(""), "", p.limits, {});
    EXPECT_TRUE(o.has_value()) << (o ? "" : o.error().message);
    if (!o) return jail::Outcome{.ending = jail::Ending::kSetupFailed};
    return std::move(*o);
  }
  static std::string Out(const jail::Outcome& o) { return o.stdout_capture.Text(""); }

  // The first event `match` accepts, read within `timeout`; the others are kept for later.
  std::optional<InitEvent> Next(const std::function<bool(const InitEvent&)>& match,
                                std::chrono::seconds timeout = std::chrono::seconds(20)) {
    const auto deadline = steady_clock::now() + timeout;
    for (;;) {
      for (auto it = seen_.begin(); it != seen_.end(); ++it) {
        if (match(*it)) {
          InitEvent e = std::move(*it);
          seen_.erase(it);
          return e;
        }
      }
      if (steady_clock::now() >= deadline) return std::nullopt;
      struct pollfd p = {.fd = link_->fd(), .events = POLLIN, .revents = 0};
      (void)::poll(&p, 1, 100);
      bool open = link_->Receive();
      for (auto& e : link_->TakeEvents()) seen_.push_back(std::move(e));
      if (!open && seen_.empty()) return std::nullopt;
    }
  }
  std::optional<InitEvent> Answer(uint32_t id) {
    return Next([id](const InitEvent& e) {
      return (e.kind == Kind::kStarted || e.kind == Kind::kStartFailed) && e.id == id;
    });
  }
  std::optional<InitEvent> ExitOf(pid_t pid) {
    return Next([pid](const InitEvent& e) { return e.kind == Kind::kExited && e.pid == pid; });
  }

  // A process on pipes: its pid (0 when it did not start, with the event in `failed`).
  struct Piped {
    pid_t pid = 0;
    UniqueFd out, err, in;
    std::optional<InitEvent> failed;
  };
  Piped StartPiped(std::vector<std::string> argv, bool with_stdin = false) {
    Piped p;
    auto out = MakePipe(), err = MakePipe(), in = MakePipe();
    EXPECT_TRUE(out && err && in);
    jail::ProcessStart start{.argv = std::move(argv),
                             .stdout_write = out->second.Get(),
                             .stderr_write = err->second.Get(),
                             .stdin_read = with_stdin ? in->first.Get() : -1};
    const uint32_t id = ++next_id_;
    auto sent = link_->Start(id, start);
    EXPECT_TRUE(sent.has_value()) << (sent ? "" : sent.error().message);
    p.out = std::move(out->first);
    p.err = std::move(err->first);
    if (with_stdin) p.in = std::move(in->second);
    auto answer = Answer(id);
    EXPECT_TRUE(answer.has_value()) << "no answer to the start";
    if (answer && answer->kind == Kind::kStarted) p.pid = answer->pid;
    if (answer && answer->kind == Kind::kStartFailed) p.failed = std::move(answer);
    return p;
  }
  // What `fd` gives until its end (all writers gone); "<no end>" follows when `timeout` came
  // first.
  static std::string ReadToEnd(int fd, std::chrono::seconds timeout = std::chrono::seconds(20)) {
    std::string out;
    const auto deadline = steady_clock::now() + timeout;
    while (steady_clock::now() < deadline) {
      struct pollfd p = {.fd = fd, .events = POLLIN, .revents = 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      char buf[4096];
      ssize_t n = ::read(fd, buf, sizeof buf);
      if (n <= 0) return out;  // EOF; EIO for a pty whose slave side is all closed
      out.append(buf, static_cast<size_t>(n));
    }
    return out + "<no end>";
  }

  std::unique_ptr<jail::WarmChild> child_;
  std::shared_ptr<jail::InitLink> link_;
  std::vector<InitEvent> seen_;
  uint32_t next_id_ = 0;
};

TEST_F(SessionInit, TheKernelIsTheInitsChildAndCodeCannotReachTheInit) {
  jail::Outcome o = Exec(
      "import os, signal, ctypes\n"
      "libc = ctypes.CDLL(None, use_errno=True)\n"
      "def err(f):\n"
      "    try:\n        f(); return 'ok'\n    except OSError as e:\n        return e.errno\n"
      "print(os.getpid(), os.getppid(), open('/proc/1/comm').read().strip())\n"
      "print(err(lambda: os.listdir('/proc/1/fd')), err(lambda: open('/proc/1/environ').read()),\n"
      "      err(lambda: open('/proc/1/mem', 'rb').read(1)), libc.ptrace(16, 1, 0, 0))\n"
      "os.kill(1, signal.SIGKILL); os.kill(1, signal.SIGTERM)\n"
      "import time; time.sleep(0.2)\n"
      "print(open('/proc/1/comm').read().strip())");
  EXPECT_EQ(o.ending, jail::Ending::kExited);
  EXPECT_EQ(Out(o), "2 1 execbox-init\n13 13 13 -1\nexecbox-init\n");
  EXPECT_TRUE(child_->alive());
}

TEST_F(SessionInit, StartsAProcessOnPipesAndReportsItsExit) {
  Piped p = StartPiped({"/bin/sh", "-c", "echo out; echo err >&2; pwd; exit 7"});
  ASSERT_GT(p.pid, 2) << (p.failed ? p.failed->step : "");
  EXPECT_EQ(ReadToEnd(p.out.Get()), "out\n" + jail::Policy{}.work_dir + "\n");
  EXPECT_EQ(ReadToEnd(p.err.Get()), "err\n");
  auto exited = ExitOf(p.pid);
  ASSERT_TRUE(exited.has_value());
  EXPECT_TRUE(WIFEXITED(exited->value));
  EXPECT_EQ(WEXITSTATUS(exited->value), 7);
}

TEST_F(SessionInit, StdinEnvCwdAndThePathSearch) {
  Exec("import os\nos.mkdir('sub')");
  Piped p = StartPiped({"sh", "-c", "cat; echo \"$EXTRA $HOME\"; pwd"}, true);
  ASSERT_GT(p.pid, 2);
  ASSERT_TRUE(WriteAll(p.in.Get(), "fed\n").has_value());
  p.in.Reset();
  EXPECT_NE(ReadToEnd(p.out.Get()).find("fed\n"), std::string::npos);
  ASSERT_TRUE(ExitOf(p.pid).has_value());

  auto out = MakePipe(), err = MakePipe();
  ASSERT_TRUE(out && err);
  jail::ProcessStart start{.argv = {"sh", "-c", "echo $EXTRA; pwd"},
                           .env = {"EXTRA=yes"},
                           .cwd = "sub",
                           .stdout_write = out->second.Get(),
                           .stderr_write = err->second.Get()};
  ASSERT_TRUE(link_->Start(++next_id_, start).has_value());
  out->second.Reset();
  err->second.Reset();
  auto answer = Answer(next_id_);
  ASSERT_TRUE(answer && answer->kind == Kind::kStarted);
  std::string text = ReadToEnd(out->first.Get());
  EXPECT_EQ(text.substr(0, 4), "yes\n");
  EXPECT_NE(text.find("/sub\n"), std::string::npos) << text;
}

TEST_F(SessionInit, AStartThatFailsSaysWhy) {
  Piped p = StartPiped({"no-such-program-here"});
  EXPECT_EQ(p.pid, 0);
  ASSERT_TRUE(p.failed.has_value());
  EXPECT_EQ(p.failed->value, ENOENT);
  EXPECT_NE(p.failed->step.find("exec"), std::string::npos) << p.failed->step;
  Piped q = StartPiped({"/bin/true"}, false);
  ASSERT_GT(q.pid, 2) << "the init serves on after a failed start";
}

TEST_F(SessionInit, SignalsReachTheProcessGroupAndOrphansAreReaped) {
  Piped p = StartPiped({"/bin/sh", "-c", "sleep 100 & sleep 100 & wait"});
  ASSERT_GT(p.pid, 2);
  ASSERT_TRUE(link_->Signal(p.pid, SIGTERM).has_value());
  auto exited = ExitOf(p.pid);
  ASSERT_TRUE(exited.has_value());
  EXPECT_TRUE(WIFSIGNALED(exited->value));
  EXPECT_EQ(WTERMSIG(exited->value), SIGTERM);
  // The group's sleeps went with it; nothing but the init, the kernel and this look are left.
  jail::Outcome o = Exec(
      "import os, time\ntime.sleep(0.3)\nprint(sorted(int(p) for p in os.listdir('/proc') "
      "if p.isdigit() and open(f'/proc/{p}/stat').read().split()[2] != 'Z'))");
  EXPECT_EQ(Out(o), "[1, 2]\n");
}

TEST_F(SessionInit, APtyIsTheControllingTerminalAndTiocstiIsStillRefused) {
  jail::ProcessStart start{.argv = {"/bin/sh", "-c",
                                    "tty; stty size; python3 -c \"import fcntl, termios\n"
                                    "try:\n    fcntl.ioctl(0, termios.TIOCSTI, b'x'); print('injected')\n"
                                    "except OSError as e:\n    print('refused', e.errno)\""},
                           .pty = true,
                           .rows = 33,
                           .cols = 101};
  ASSERT_TRUE(link_->Start(++next_id_, start).has_value());
  auto answer = Answer(next_id_);
  ASSERT_TRUE(answer.has_value());
  ASSERT_EQ(answer->kind, Kind::kStarted) << answer->step << ": " << std::strerror(answer->value);
  ASSERT_TRUE(answer->pty_master.Valid());
  std::string text = ReadToEnd(answer->pty_master.Get());
  EXPECT_NE(text.find("/dev/pts/"), std::string::npos) << text;
  EXPECT_NE(text.find("33 101"), std::string::npos) << text;
  EXPECT_NE(text.find("refused 1"), std::string::npos) << text;
  EXPECT_EQ(text.find("injected"), std::string::npos) << text;
  ASSERT_TRUE(ExitOf(answer->pid).has_value());
}

TEST_F(SessionInit, TheKernelsEndIsReportedAndANewKernelTakesOver) {
  Piped p = StartPiped({"/bin/sh", "-c", "sleep 100 & echo started; wait"});
  ASSERT_GT(p.pid, 2);
  jail::Outcome o = Exec("import os\nx = 1\nos._exit(3)");
  EXPECT_EQ(o.ending, jail::Ending::kExited);
  EXPECT_EQ(o.exit_code, 3) << "the kernel's own status, not the init's";
  EXPECT_EQ(o.signal, 0);
  EXPECT_TRUE(o.kernel_restarted);
  EXPECT_TRUE(child_->alive());
  EXPECT_FALSE(link_->kernel_status().has_value()) << "the new kernel runs";
  // The new kernel: the init's child, fresh, beside the process the host started.
  jail::Outcome next = Exec("import os\nprint(os.getppid(), 'x' in globals())");
  EXPECT_EQ(Out(next), "1 False\n");
  EXPECT_FALSE(Next([&](const InitEvent& e) { return e.kind == Kind::kExited && e.pid == p.pid; },
                    std::chrono::seconds(1))
                   .has_value())
      << "the host's process lived on";
  jail::Outcome killed = Exec("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)");
  EXPECT_EQ(killed.ending, jail::Ending::kSignaled);
  EXPECT_TRUE(killed.kernel_restarted);
  EXPECT_EQ(Out(Exec("print(3)")), "3\n");
  child_.reset();  // the session's close ends the process
  EXPECT_EQ(ReadToEnd(p.out.Get(), std::chrono::seconds(10)), "started\n");
}

TEST_F(SessionInit, AKernelKilledByASignalIsReportedSo) {
  jail::Outcome o = Exec("import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)");
  EXPECT_EQ(o.ending, jail::Ending::kSignaled);
  EXPECT_EQ(o.signal, SIGSEGV);
}

TEST_F(SessionInit, AProcessCannotOutliveItsSession) {
  Piped p = StartPiped({"/bin/sh", "-c", "setsid sh -c 'trap \"\" TERM HUP; sleep 100' & sleep 100"});
  ASSERT_GT(p.pid, 2);
  jail::Outcome o = Exec("import os\nprint(len([p for p in os.listdir('/proc') if p.isdigit()]))");
  EXPECT_EQ(o.ending, jail::Ending::kExited);
  child_.reset();  // as a session's close does
  auto exited = ExitOf(p.pid);
  EXPECT_TRUE(!exited || WIFSIGNALED(exited->value));
  EXPECT_EQ(ReadToEnd(p.out.Get(), std::chrono::seconds(10)), "") << "every writer of the pipe is gone";
}

}  // namespace
}  // namespace execbox::engine
