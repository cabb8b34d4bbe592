// The guard (`execbox run --guard audit`, docs/security.md "The guard") through the real binary,
// as root and as an unprivileged user: each event it forbids fails in the code with a
// PermissionError naming it and is listed in the result's `guard`, ahead of the jail's own
// refusal; what it allows works; and without it the result has no `guard` at all.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "e2e/harness.h"

namespace execbox::e2e {
namespace {

using nlohmann::json;

class Guard : public BothModes {};

// Tries each action and prints "name: allowed" or "name: refused <event>" (the guard's message
// names its event; anything else is printed as the exception it was).
const char* const kAttempt = R"(
import os, sys
def attempt(name, action):
    try:
        action()
        print(name + ": allowed")
    except PermissionError as exc:
        text = str(exc)
        print(name + ": refused " + text.split()[2] if text.startswith("execbox guard:") else name + ": " + text)
    except Exception as exc:
        print(name + ": " + type(exc).__name__)
)";

TEST_P(Guard, EachForbiddenEventIsRefusedByTheGuardAndListed) {
  Invocation run = Code(std::string(kAttempt) + R"(
import socket, subprocess, ctypes, gc
attempt("write", lambda: open("/usr/guard-test", "w"))
attempt("remove", lambda: os.remove("/etc/passwd"))
attempt("link_out", lambda: (os.symlink("/etc", "out"), open("out/x", "w")))
attempt("socket", lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM))
attempt("lookup", lambda: socket.getaddrinfo("example.com", 80))
attempt("popen", lambda: subprocess.run(["/bin/true"]))
attempt("system", lambda: os.system("true"))
attempt("execv", lambda: os.execv("/bin/true", ["true"]))
attempt("dlopen", lambda: ctypes.CDLL("/tmp/libevil.so"))
attempt("libc", lambda: ctypes.CDLL(None).system(b"true"))
attempt("gc", lambda: gc.get_objects())
attempt("file", lambda: open("kept.txt", "w").write("fine"))
attempt("tmp", lambda: open("/tmp/t.txt", "w").write("fine"))
attempt("read", lambda: open("/etc/passwd").read())
attempt("unix", lambda: socket.socketpair())
)",
                        {"--guard", "audit"});
  ASSERT_EQ(run.json["status"], "ok") << run.out << run.err;
  EXPECT_EQ(run.json["stdout"],
            "write: refused open\nremove: refused os.remove\nlink_out: refused open\n"
            "socket: refused socket.__new__\nlookup: refused socket.getaddrinfo\n"
            "popen: refused subprocess.Popen\nsystem: refused os.system\nexecv: refused os.exec\n"
            "dlopen: refused ctypes.dlopen\nlibc: refused ctypes.dlsym\ngc: refused gc.get_objects\n"
            "file: allowed\ntmp: allowed\nread: allowed\nunix: allowed\n")
      << run.out;
  const json& guard = run.json["guard"];
  ASSERT_TRUE(guard.is_object()) << run.out;
  EXPECT_EQ(guard["mode"], "audit");
  EXPECT_EQ(guard["omitted"], 0);
  std::set<std::string> events;
  std::string details;
  for (const auto& e : guard["refused"]) {
    events.insert(e["event"].get<std::string>());
    details += e["detail"].get<std::string>() + "\n";
  }
  EXPECT_EQ(events, (std::set<std::string>{"open", "os.remove", "socket.__new__", "socket.getaddrinfo",
                                           "subprocess.Popen", "os.system", "os.exec", "ctypes.dlopen",
                                           "ctypes.dlsym", "gc.get_objects"}))
      << guard.dump();
  EXPECT_NE(details.find("writing /usr/guard-test"), std::string::npos) << details;
  EXPECT_NE(details.find("writing /etc/x"), std::string::npos) << details;  // the link, resolved
  // The file it was allowed to write is the run's like any other.
  bool kept = false;
  for (const auto& f : run.json["files"]) kept |= f["name"] == "kept.txt";
  EXPECT_TRUE(kept) << run.out;
}

// The agent's listing is the sandbox's word, which the code can silence; that the run was guarded
// is the host's, and the result says it either way.
TEST_P(Guard, CodeThatHidesTheGuardsEventStillGetsAGuardedResult) {
  Invocation run = Code(
      "import sys\nsys.modules['execbox_agent.guard'].take_event = lambda: None\n"
      "try:\n    open('/usr/x', 'w')\nexcept PermissionError as e:\n    print(e)\n",
      {"--guard", "audit"});
  ASSERT_EQ(run.json["status"], "ok") << run.out << run.err;
  EXPECT_TRUE(run.json["stdout"].get<std::string>().starts_with("execbox guard: open refused")) << run.out;
  EXPECT_EQ(run.json["guard"], json({{"mode", "audit"}, {"refused", json::array()}, {"omitted", 0}}))
      << run.out;
}

TEST_P(Guard, WithoutItTheJailRefusesAloneAndTheResultHasNoGuard) {
  Invocation run = Code(std::string(kAttempt) + "attempt('write', lambda: open('/usr/guard-test', 'w'))\n");
  ASSERT_EQ(run.json["status"], "ok") << run.out << run.err;
  // The kernel's refusal (a read-only mount, Landlock), not the guard's.
  const std::string out = run.json["stdout"];
  EXPECT_TRUE(out.starts_with("write: ") && out.find("refused") == std::string::npos) << run.out;
  EXPECT_FALSE(run.json.contains("guard")) << run.out;
  // And a program runs: the jail allows it.
  run = Code("import subprocess\nprint(subprocess.run(['/bin/echo', 'hi'], capture_output=True).stdout)\n");
  EXPECT_EQ(run.json["stdout"], "b'hi\\n'\n") << run.out;
}

INSTANTIATE_TEST_SUITE_P(Modes, Guard, ::testing::Values(Mode::kRoot, Mode::kUnprivileged),
                         [](const auto& param_info) { return ModeName(param_info.param); });

}  // namespace
}  // namespace execbox::e2e
