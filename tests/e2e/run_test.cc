// The seed's examples and the basic result shape, through the real binary, as root and as an
// unprivileged user.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "e2e/harness.h"
#include "lib/test_paths.h"

namespace execbox::e2e {
namespace {

class Run : public BothModes {};

TEST_P(Run, MedianPrintsThree) {
  Invocation r = Code("import statistics\ndata = [1, 5, 3, 9, 2]\nprint(statistics.median(data))\n");
  ASSERT_TRUE(r.json.is_object()) << r.out << r.err;
  EXPECT_EQ(r.json["status"], "ok");
  EXPECT_EQ(r.json["stdout"], "3\n");
  EXPECT_EQ(r.json["exit_code"], 0);
  EXPECT_TRUE(r.json["error"].is_null());
  EXPECT_EQ(r.exit_status, 0);
}

TEST_P(Run, StreamsLiveAndMirrorsExitStatus) {
  Invocation r = RunExecbox(
      {"run", "-c", "import sys\nprint('out')\nprint('err', file=sys.stderr)\nsys.exit(3)"}, GetParam());
  EXPECT_EQ(r.out, "out\n");
  EXPECT_EQ(r.err, "err\n");
  EXPECT_EQ(r.exit_status, 3);
}

TEST_P(Run, InfiniteLoopEndsAsTimeoutError) {
  Invocation r = Code("while True:\n    pass\n", {"--timeout", "5"});
  ASSERT_TRUE(r.json.is_object()) << r.out << r.err;
  EXPECT_EQ(r.json["status"], "timeout");
  EXPECT_EQ(r.json["error"]["ename"], "TimeoutError");
  EXPECT_EQ(r.exit_status, 124);
  // A 5 s limit may end anywhere from 4.5 s to well after on a busy machine.
  EXPECT_GE(r.json["usage"]["wall_ms"].get<int64_t>(), 4500);
  EXPECT_LT(r.seconds, 30);
}

TEST_P(Run, CpuTimeLimitEndsAsTimeout) {
  Invocation r = Code("while True:\n    pass\n", {"--cpu-time", "2", "--timeout", "60"});
  ASSERT_TRUE(r.json.is_object()) << r.out << r.err;
  EXPECT_EQ(r.json["status"], "timeout");
  EXPECT_EQ(r.json["error"]["ename"], "TimeoutError");
  EXPECT_GE(r.json["usage"]["cpu_ms"].get<int64_t>(), 1500);
}

TEST_P(Run, UncaughtExceptionHasUserFramesOnly) {
  Invocation r = Code("def f(x):\n    return 1 / x\n\nf(0)\n");
  ASSERT_TRUE(r.json.is_object()) << r.out << r.err;
  EXPECT_EQ(r.json["status"], "error");
  EXPECT_EQ(r.json["error"]["ename"], "ZeroDivisionError");
  EXPECT_EQ(r.json["error"]["evalue"], "division by zero");
  std::string tb;
  for (const auto& line : r.json["error"]["traceback"]) tb += line.get<std::string>() + "\n";
  EXPECT_NE(tb.find("File \"<cell>\", line 4"), std::string::npos) << tb;
  EXPECT_NE(tb.find("return 1 / x"), std::string::npos) << tb;
  EXPECT_EQ(tb.find("agent.py"), std::string::npos) << tb;
  EXPECT_EQ(r.exit_status, 1);
}

TEST_P(Run, RmRfLeavesHostUntouchedAndSystemReadOnly) {
  std::string marker = "/tmp/execbox-e2e-marker-" + std::to_string(::getpid()) + "-" + ModeName(GetParam());
  { std::ofstream(marker) << "still here"; }
  Invocation r = Code(
      "import os\n"
      "print(os.system('rm -rf / 2>/dev/null'))\n"
      "try:\n    open('/usr/evil', 'w')\nexcept OSError as e:\n    print('usr', e.errno)\n"
      "try:\n    open('/etc/evil', 'w')\nexcept OSError as e:\n    print('etc', e.errno)\n"
      "print(os.path.exists('/usr/bin/python3'))\n");
  ASSERT_TRUE(r.json.is_object()) << r.out << r.err;
  EXPECT_EQ(r.json["status"], "ok");
  std::string out = r.json["stdout"];
  EXPECT_NE(out.find("usr 30"), std::string::npos) << out;  // EROFS
  EXPECT_NE(out.find("etc 30"), std::string::npos) << out;
  EXPECT_NE(out.find("True"), std::string::npos) << out;
  EXPECT_TRUE(std::filesystem::exists(marker));
  std::filesystem::remove(marker);
}

TEST_P(Run, PlotComesBackWithKeepFiles) {
  std::string dir = "/tmp/execbox-e2e-keep-" + std::to_string(::getpid()) + "-" + ModeName(GetParam());
  std::filesystem::remove_all(dir);
  if (GetParam() == Mode::kUnprivileged) {
    std::filesystem::create_directory(dir);
    ASSERT_EQ(::chmod(dir.c_str(), 0777), 0);
  }
  Invocation r = Code(
      "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [3, 1, 2])\nplt.savefig('plot.png', dpi=50)\n",
      // The most time there is: a cold start of matplotlib takes ~15 s under the VM stage's
      // software emulation, and twice that on a busy machine.
      {"--keep-files", dir, "--timeout", "300", "--cpu-time", "300"});
  ASSERT_TRUE(r.json.is_object()) << r.out << r.err;
  EXPECT_EQ(r.json["status"], "ok") << r.json.dump(2);
  std::ifstream png(dir + "/plot.png", std::ios::binary);
  ASSERT_TRUE(png.good()) << r.err;
  char magic[8] = {};
  png.read(magic, 8);
  EXPECT_EQ(std::string(magic, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  ASSERT_EQ(r.json["files"].size(), 1u) << r.json["files"].dump();
  EXPECT_EQ(r.json["files"][0]["name"], "plot.png");
  std::filesystem::remove_all(dir);
}

TEST_P(Run, RunsAsUnprivilegedIdInside) {
  Invocation r =
      Code("import os, socket\nprint(os.getuid(), os.getgid(), socket.gethostname(), os.getcwd())\n");
  ASSERT_TRUE(r.json.is_object()) << r.out << r.err;
  EXPECT_EQ(r.json["stdout"], "1000 1000 sandbox /home/user\n");
}

// The home is the work dir: the cwd, HOME, the home of the user "user" (/etc/passwd), also for a
// shell; /work is the same directory, both ways, and a file written under either name comes
// back once, named relative to the home.
TEST_P(Run, TheHomeIsTheWorkDirAndWorkIsItsAlias) {
  Invocation r = Code(R"py(
import os, pwd, grp, subprocess
open('/work/a.txt', 'w').write('via work')
open('/home/user/b.txt', 'w').write('via home')
print(open('/home/user/a.txt').read(), open('/work/b.txt').read(), os.path.realpath('/work'))
u = pwd.getpwuid(os.getuid())
print(os.getcwd(), os.environ['HOME'], os.path.expanduser('~'), u.pw_name, u.pw_dir, u.pw_shell,
      grp.getgrgid(os.getgid()).gr_name)
print(subprocess.run(['/bin/bash', '-c', 'pwd; echo ~; cd /work && pwd -P'], capture_output=True,
                     text=True).stdout, end='')
print(open('/etc/passwd').read().splitlines()[:2])
)py");
  ASSERT_TRUE(r.json.is_object()) << r.out << r.err;
  EXPECT_EQ(r.json["status"], "ok") << r.json.dump(2);
  EXPECT_EQ(r.json["stdout"],
            "via work via home /home/user\n"
            "/home/user /home/user /home/user user /home/user /bin/bash user\n"
            "/home/user\n/home/user\n/home/user\n"
            "['root:x:0:0:root:/root:/usr/sbin/nologin', 'user:x:1000:1000:user:/home/user:/bin/bash']\n")
      << r.json.dump(2);
  std::vector<std::string> names;
  for (const auto& f : r.json["files"]) names.push_back(f["name"]);
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"a.txt", "b.txt"})) << r.json["files"].dump();
}

TEST_P(Run, ReportsLimitsAndLayers) {
  Invocation r = Code("pass", {"--memory", "128M", "--timeout", "7"});
  ASSERT_TRUE(r.json.is_object()) << r.out << r.err;
  EXPECT_EQ(r.json["limits"]["memory_mb"]["value"], 128);
  EXPECT_EQ(r.json["limits"]["timeout_seconds"]["value"], 7);
  EXPECT_FALSE(r.json["limits"]["memory_mb"]["enforced_by"].get<std::string>().empty());
  if (std::string tier = ExpectedCgroupTier(); !tier.empty()) {
    EXPECT_EQ(r.json["limits"]["memory_mb"]["enforced_by"], tier) << r.out;
    EXPECT_EQ(r.json["limits"]["max_processes"]["enforced_by"], tier + "+rlimit") << r.out;
    EXPECT_EQ(r.json["limits"]["cpu_seconds"]["enforced_by"], tier + "+rlimit") << r.out;
    EXPECT_EQ(r.json["isolation"]["cgroup"], tier) << r.out;
  }
  // Landlock's reach follows its ABI (ABI 2 on Debian 12's kernel: the filesystem only).
  int abi = r.json["isolation"]["landlock_abi"].get<int>();
  const auto& restricts = r.json["isolation"]["landlock_restricts"];
  ASSERT_TRUE(restricts.is_array()) << r.out;
  auto has = [&](const char* what) {
    return std::find(restricts.begin(), restricts.end(), what) != restricts.end();
  };
  EXPECT_EQ(has("filesystem"), abi >= 1) << restricts.dump();
  EXPECT_EQ(has("tcp"), abi >= 4) << restricts.dump();
  EXPECT_EQ(has("signals"), abi >= 6) << restricts.dump();
  EXPECT_EQ(r.json["isolation"]["seccomp"], true);
  EXPECT_EQ(r.json["isolation"]["namespaces"]["user"], true);
  EXPECT_EQ(r.json["isolation"]["namespaces"]["net"], true);
  EXPECT_EQ(r.json["isolation"]["hostname"], true);
  EXPECT_EQ(r.json["isolation"]["proc"], true);
}

TEST_P(Run, StdinAndInputFiles) {
  std::string in = "/tmp/execbox-e2e-in-" + std::to_string(::getpid()) + "-" + ModeName(GetParam());
  { std::ofstream(in) << "a,b\n1,2\n"; }
  ::chmod(in.c_str(), 0644);
  Invocation r = Code("import sys\nprint(open('data/in.csv').read().strip())\nprint(input())\n",
                      {"--file", "data/in.csv=" + in, "--stdin", in});
  ASSERT_TRUE(r.json.is_object()) << r.out << r.err;
  EXPECT_EQ(r.json["stdout"], "a,b\n1,2\na,b\n");
  EXPECT_TRUE(r.json["files"].empty()) << "an unchanged input file is not an output";
  std::filesystem::remove(in);
}

TEST_P(Run, BadUsageIsExitTwo) {
  EXPECT_EQ(RunExecbox({"run", "--memory", "lots", "-c", "pass"}, GetParam()).exit_status, 2);
  EXPECT_EQ(RunExecbox({"run", "--file", "../x=/etc/hostname", "-c", "pass"}, GetParam()).exit_status, 2);
  EXPECT_EQ(RunExecbox({"run"}, GetParam()).exit_status, 2);
  EXPECT_EQ(RunExecbox({"run", "--timeout", "-5", "-c", "pass"}, GetParam()).exit_status, 2);
  EXPECT_EQ(RunExecbox({"run", "--memory", "1K", "-c", "pass"}, GetParam()).exit_status, 2);
  EXPECT_EQ(RunExecbox({"run", "--max-processes", "0", "-c", "pass"}, GetParam()).exit_status, 2);
  // An input file larger than the work dir is refused up front, not half-copied into the jail.
  std::string big = "/tmp/execbox-e2e-big-" + std::to_string(::getpid()) + "-" + ModeName(GetParam());
  { std::ofstream(big) << std::string(3u << 20, 'x'); }
  ::chmod(big.c_str(), 0644);
  Invocation r = RunExecbox({"run", "--disk", "1M", "--file", "big=" + big, "-c", "pass"}, GetParam());
  EXPECT_EQ(r.exit_status, 2);
  EXPECT_NE(r.err.find("--disk"), std::string::npos) << r.err;
  std::filesystem::remove(big);
}

// memory_limit is what the sandbox enforced, never what the code says: a MemoryError the code
// raises itself is its own error, in the cgroup tier (root) and the rlimit tier alike.
TEST_P(Run, ARaisedMemoryErrorIsTheCodesOwnError) {
  for (const char* code : {"raise MemoryError", "raise MemoryError('pretend')",
                           "def f():\n    raise MemoryError('deep')\nf()\n"}) {
    Invocation r = Code(code);
    ASSERT_TRUE(r.json.is_object()) << r.out << r.err;
    EXPECT_EQ(r.json["status"], "error") << code << "\n" << r.json.dump(2);
    EXPECT_EQ(r.json["error"]["ename"], "MemoryError") << code;
    EXPECT_EQ(r.exit_status, 1) << code;
  }
  // The limit itself is still the limit.
  Invocation over =
      Code("x = bytearray(400 << 20)\nx[::4096] = b'x' * len(x[::4096])\n", {"--memory", "64M"});
  ASSERT_TRUE(over.json.is_object()) << over.out << over.err;
  EXPECT_EQ(over.json["status"], "memory_limit") << over.json.dump(2);
  EXPECT_EQ(over.json["limits"]["memory_mb"]["value"], 64);
}

// Limits are checked by the gate, as for any request: a bad value is bad usage, named.
TEST_P(Run, LimitsOutOfRangeAreBadUsageNamingTheOption) {
  Invocation low = RunExecbox({"run", "--memory", "8M", "-c", "pass"}, GetParam());
  EXPECT_EQ(low.exit_status, 2);
  EXPECT_NE(low.err.find("'--memory' must be at least 16 MiB"), std::string::npos) << low.err;
  Invocation high = RunExecbox({"run", "--max-processes", "99999999", "-c", "pass"}, GetParam());
  EXPECT_EQ(high.exit_status, 2);
  EXPECT_NE(high.err.find("'--max-processes' asks for 99999999"), std::string::npos) << high.err;
  Invocation junk = RunExecbox({"run", "--timeout", "soon", "-c", "pass"}, GetParam());
  EXPECT_EQ(junk.exit_status, 2);
  EXPECT_NE(junk.err.find("--timeout"), std::string::npos) << junk.err;
  // What was asked is what ran, by the schema's names.
  Invocation ran = Code("pass", {"--timeout", "7", "--disk", "8M", "--output-limit", "64K"});
  ASSERT_TRUE(ran.json.is_object()) << ran.out << ran.err;
  EXPECT_EQ(ran.json["limits"]["timeout_seconds"]["value"], 7);
  EXPECT_EQ(ran.json["limits"]["cpu_seconds"]["value"], 30) << "the default, above the timeout";
  EXPECT_EQ(ran.json["limits"]["disk_mb"]["value"], 8);
  EXPECT_EQ(ran.json["limits"]["output_bytes"]["value"], 65536);
}

// In a default container (podman/docker with runc or crun) parts of /proc are masked and the
// seccomp profile refuses sethostname: the jail goes on without a /proc and without its
// hostname, says so in `isolation`, and every limit still holds (make test-image does this in a
// real container).
TEST_P(Run, InAContainerThatMasksProcAndRefusesSethostname) {
  if (::getuid() != 0) GTEST_SKIP() << "container_like needs root to mask /proc";
  const std::vector<std::string> wrapper = {test::kContainerLike, "--"};
  Invocation r = RunExecbox({"run", "--json", "-c",
                             "import os, socket\nprint(sorted(os.listdir('/proc')), socket.gethostname() == "
                             "'sandbox')\nopen('out.txt', 'w').write('x')\n"},
                            GetParam(), "", {}, wrapper);
  ASSERT_TRUE(r.json.is_object()) << r.out << r.err;
  EXPECT_EQ(r.json["status"], "ok") << r.json.dump(2);
  EXPECT_EQ(r.json["stdout"], "[] False\n");
  EXPECT_EQ(r.json["isolation"]["proc"], false);
  EXPECT_EQ(r.json["isolation"]["hostname"], false);
  EXPECT_EQ(r.json["isolation"]["namespaces"]["uts"], true);
  EXPECT_EQ(r.json["isolation"]["seccomp"], true);
  ASSERT_EQ(r.json["files"].size(), 1u) << r.out;
  EXPECT_EQ(r.json["files"][0]["name"], "out.txt");
  // The limits hold as on the host.
  Invocation over = RunExecbox({"run", "--json", "--memory", "64M", "-c",
                                "x = bytearray(400 << 20)\nx[::4096] = b'x' * len(x[::4096])\n"},
                               GetParam(), "", {}, wrapper);
  ASSERT_TRUE(over.json.is_object()) << over.out << over.err;
  EXPECT_EQ(over.json["status"], "memory_limit") << over.json.dump(2);
  Invocation fork_bomb = RunExecbox({"run", "--json", "--max-processes", "8", "-c",
                                     "import os\nn = 0\ntry:\n    while True:\n        if os.fork() == 0:\n  "
                                     "          import time; time.sleep(30)\n"
                                     "        n += 1\nexcept OSError:\n    print('refused after', n)\n"},
                                    GetParam(), "", {}, wrapper);
  ASSERT_TRUE(fork_bomb.json.is_object()) << fork_bomb.out << fork_bomb.err;
  EXPECT_NE(fork_bomb.json["stdout"].get<std::string>().find("refused after"), std::string::npos)
      << fork_bomb.json.dump(2);
  // The warm engine (a zygote's children, where cgroups allow it) goes without both the same way.
  if (GetParam() == Mode::kRoot) {
    Invocation warm = RunExecbox({"repl", "--json"}, GetParam(),
                                 "import os\nprint(os.listdir('/proc'))\nx = 41\nx + 1\n", {}, wrapper);
    EXPECT_EQ(warm.exit_status, 0) << warm.err;
    EXPECT_NE(warm.out.find("\"stdout\":\"[]\\n\""), std::string::npos) << warm.out;
    EXPECT_NE(warm.out.find("\"text/plain\":\"42\""), std::string::npos) << warm.out;
    EXPECT_NE(warm.out.find("\"proc\":false"), std::string::npos) << warm.out;
  }
  // doctor names both, and the jail still works.
  Invocation doctor = RunExecbox({"doctor"}, GetParam(), "", {}, wrapper);
  EXPECT_NE(doctor.out.find("without /proc"), std::string::npos) << doctor.out;
  EXPECT_NE(doctor.out.find("hostname unchanged"), std::string::npos) << doctor.out;
  EXPECT_NE(doctor.out.find("masked: /proc/"), std::string::npos) << doctor.out;
}

INSTANTIATE_TEST_SUITE_P(Modes, Run, ::testing::Values(Mode::kRoot, Mode::kUnprivileged),
                         [](const auto& param_info) { return ModeName(param_info.param); });

}  // namespace
}  // namespace execbox::e2e
