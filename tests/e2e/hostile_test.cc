// Hostile code through the real binary, as root and as an unprivileged user: resource bombs,
// processes that try to outlive the run, probes of the host and of the kernel, and traps for
// the host side of --keep-files. Each case asserts the structured result and that the host is
// left as it was. Timing is never asserted tightly: these runs share a busy 2-core machine
// with other tests.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "e2e/harness.h"

namespace execbox::e2e {
namespace {

using nlohmann::json;

// Survivors are found by name. The code gives itself a name unique to this test process and
// mode (PR_SET_NAME) before anything else, and every process or thread it then starts
// inherits it. A scan by uid and start time would not do: other e2e tests run at the same time
// (ctest -j) and their code runs as the same host uid.
std::string ProcessTag(const std::string& what, Mode mode) {
  std::string tag =
      "xb" + what.substr(0, 4) + std::to_string(::getpid() % 1000000) + (mode == Mode::kRoot ? "r" : "u");
  return tag.substr(0, 15);  // a comm holds 15 characters
}

// Python that takes the tag as its process name and prints the name /proc shows, which proves
// the host-side scan below would see it.
std::string NameSelf(const std::string& tag) {
  return "import ctypes\nctypes.CDLL(None).prctl(15, b'" + tag + "', 0, 0, 0)  # PR_SET_NAME\n" +
         "print('name', open('/proc/self/comm').read().strip(), flush=True)\n";
}

// "pid (uid ...)" of every host process named `tag`.
std::vector<std::string> HostProcessesNamed(const std::string& tag) {
  std::vector<std::string> found;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    std::string pid = entry.path().filename();
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream comm(entry.path() / "comm");
    std::string name;
    if (!std::getline(comm, name) || name != tag) continue;
    std::ifstream status(entry.path() / "status");
    std::string line, uid = "?";
    while (std::getline(status, line)) {
      if (line.rfind("Uid:", 0) == 0) uid = line.substr(4);
    }
    found.push_back(pid + " (uid" + uid + ")");
  }
  return found;
}

// The JSON object the code printed as its only stdout.
json PrintedJson(const Invocation& r) {
  if (!r.json.is_object() || !r.json.contains("stdout") || !r.json["stdout"].is_string()) return nullptr;
  json j = json::parse(r.json["stdout"].get<std::string>(), nullptr, false);
  return j.is_discarded() ? json(nullptr) : j;
}

// Python that forges the agent's report: the report pipe is open in the code's process too (at
// fd 3, or moved higher by the agent), so it writes one line to every pipe write end from fd 3
// on. The line parses as an event of either report format, with `items` (a bytes expression)
// as the elements of the array under `key`. Then it exits at once, before the agent writes.
std::string ForgeReport(const std::string& items, const std::string& key = "findings") {
  return "ITEMS = " + items + "\nKEY = b'" + key + "'\n" + R"py(
import os, stat
line = (b'{"type": "findings", "ename": "Forged", "error": {"ename": "Forged"}, "' + KEY + b'": ['
        + ITEMS + b']}\n')
for fd in sorted(int(name) for name in os.listdir('/proc/self/fd')):
    try:
        if fd < 3 or not stat.S_ISFIFO(os.fstat(fd).st_mode):
            continue
        flags = open(f'/proc/self/fdinfo/{fd}').read().split('flags:')[1].split()[0]
        if int(flags, 8) & os.O_WRONLY:
            os.write(fd, line)
            print('forged report on fd', fd)
    except OSError:
        pass
os._exit(0)
)py";
}

class Hostile : public BothModes {
 protected:
  // A bomb that only the wall-time limit (5 s) can end: timed out, nothing of it left.
  void ExpectBombTimedOutAndGone(const Invocation& r, const std::string& tag) {
    ASSERT_TRUE(r.json.is_object()) << r.out << r.err;
    EXPECT_EQ(r.json["status"], "timeout") << r.json.dump(2);
    EXPECT_EQ(r.json["error"]["ename"], "TimeoutError");
    EXPECT_EQ(r.exit_status, 124);
    EXPECT_EQ(r.json["stdout"], "name " + tag + "\n");
    EXPECT_LT(r.seconds, 60) << "a 5 s limit must end the run";
    ExpectNoSurvivors(tag);
    ExpectHostResponsive();
  }

  // A host path for this test process and mode, removed first.
  std::string FreshPath(const std::string& what) {
    std::string path =
        "/tmp/execbox-hostile-" + what + "-" + std::to_string(::getpid()) + "-" + ModeName(GetParam());
    std::filesystem::remove_all(path);
    return path;
  }

  // A directory execbox can write into in either mode (the unprivileged user owns nothing in /tmp).
  std::string SharedDir(const std::string& what) {
    std::string dir = FreshPath(what);
    std::filesystem::create_directory(dir);
    ::chmod(dir.c_str(), 0777);
    return dir;
  }

  void ExpectNoSurvivors(const std::string& tag) {
    std::vector<std::string> left = HostProcessesNamed(tag);
    std::string list;
    for (const auto& p : left) list += p + " ";
    EXPECT_TRUE(left.empty()) << "processes of the run are still alive on the host: " << list;
  }

  // The host still starts and finishes a trivial run.
  void ExpectHostResponsive() {
    Invocation r = Code("print(1)");
    ASSERT_TRUE(r.json.is_object()) << r.out << r.err;
    EXPECT_EQ(r.json["status"], "ok");
    EXPECT_EQ(r.json["stdout"], "1\n");
  }
};

// ---- Resource bombs ----

TEST_P(Hostile, MemoryBombIsMemoryLimit) {
  // As root the cgroup's OOM killer ends it; without cgroups RLIMIT_DATA makes Python raise
  // MemoryError itself. Either way the status is memory_limit.
  const char* const kBombs[] = {
      R"py(
x = []
while True:
    x.append(bytearray(10 * 2**20))
)py",
      R"py(
x = bytearray(2**31)
print('allocated', len(x))
)py"};
  for (const char* code : kBombs) {
    SCOPED_TRACE(code);
    Invocation r = Code(code, {"--memory", "128M"});
    ASSERT_TRUE(r.json.is_object()) << r.out << r.err;
    EXPECT_EQ(r.json["status"], "memory_limit") << r.json.dump(2);
    EXPECT_EQ(r.json["error"]["ename"], "MemoryError");
    EXPECT_EQ(r.json["limits"]["memory_mb"]["value"], 128);
    EXPECT_EQ(r.json["stdout"], "");
    EXPECT_EQ(r.exit_status, 137);
  }
}

TEST_P(Hostile, ForkBombEndsAndLeavesNothing) {
  std::string tag = ProcessTag("fork", GetParam());
  Invocation r = Code(NameSelf(tag) + R"py(
import os
while True:
    try:
        os.fork()
    except OSError:
        pass
)py",
                      {"--timeout", "5"});
  // The main process never stops forking, so only the wall-time limit can end it.
  ExpectBombTimedOutAndGone(r, tag);
}

TEST_P(Hostile, ThreadBombEndsAndLeavesNothing) {
  std::string tag = ProcessTag("thread", GetParam());
  // Start fails with RuntimeError, or MemoryError where RLIMIT_DATA counts the thread stacks.
  Invocation r = Code(NameSelf(tag) + R"py(
import threading, time
while True:
    try:
        threading.Thread(target=time.sleep, args=(10**6,)).start()
    except Exception:
        pass
)py",
                      {"--timeout", "5"});
  ExpectBombTimedOutAndGone(r, tag);
}

// ---- Processes that try to outlive the run ----

TEST_P(Hostile, DetachedGrandchildDiesWithTheMainProcess) {
  std::string tag = ProcessTag("grand", GetParam());
  // The grandchild reports its pid through a pipe once it is running, so the main process
  // exits only when there really is a detached process left behind.
  Invocation r = Code(NameSelf(tag) + R"py(
import os, time
r, w = os.pipe()
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.write(w, str(os.getpid()).encode())
        time.sleep(10**6)
    os._exit(0)
os.close(w)
os.wait()
print('grandchild', os.read(r, 64).decode())
)py",
                      {"--timeout", "30"});
  ASSERT_TRUE(r.json.is_object()) << r.out << r.err;
  // Ended with the main process: a grandchild keeping the run alive would make it a timeout.
  EXPECT_EQ(r.json["status"], "ok") << r.json.dump(2);
  EXPECT_EQ(r.json["exit_code"], 0);
  EXPECT_EQ(r.exit_status, 0);
  std::string out = r.json["stdout"];
  EXPECT_NE(out.find("grandchild "), std::string::npos) << out;
  ExpectNoSurvivors(tag);
}

TEST_P(Hostile, SigtermIgnoringTreeIsKilledAtTimeout) {
  std::string tag = ProcessTag("term", GetParam());
  Invocation r = Code(NameSelf(tag) + R"py(
import os, signal
for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(sig, signal.SIG_IGN)
if os.fork() == 0:
    print('child ignoring', flush=True)
while True:
    pass
)py",
                      // Room for the fork and the print on a slow machine (the VM stage emulates
                      // its CPU): the child must have run before the timeout for the test to say
                      // anything about killing it.
                      {"--timeout", "8"});
  ASSERT_TRUE(r.json.is_object()) << r.out << r.err;
  EXPECT_EQ(r.json["status"], "timeout") << r.json.dump(2);
  EXPECT_EQ(r.json["error"]["ename"], "TimeoutError");
  EXPECT_EQ(r.exit_status, 124);
  std::string out = r.json["stdout"];
  EXPECT_NE(out.find("child ignoring"), std::string::npos) << out;
  ExpectNoSurvivors(tag);
}

// ---- Output and disk ----

// Peak RSS of execbox for a trivial run in this build and mode: sanitizer builds start far
// higher, so memory bounds are stated above this, not as absolute numbers.
long BaselineRssKib(Mode mode) {
  static std::map<Mode, long> cache;
  auto it = cache.find(mode);
  if (it != cache.end()) return it->second;
  Invocation r = RunCode("print(1)", mode);
  EXPECT_GT(r.max_rss_kib, 0) << r.err;
  return cache[mode] = r.max_rss_kib;
}

TEST_P(Hostile, HundredMegabytesOfStdoutIsStoppedAndCostsTheSupervisorLittle) {
  // 1600 lines of 64 KiB, ~100 MiB: past 64 x the default 1 MiB cap, where the supervisor stops
  // the run. It reads the pipe as the code writes, so the code cannot finish first.
  Invocation r = Code(R"py(
import sys
chunk = 'x' * 65536 + '\n'
for _ in range(1600):
    sys.stdout.write(chunk)
print('finished', file=sys.stderr)
)py");
  ASSERT_TRUE(r.json.is_object()) << r.out.substr(0, 1000) << r.err;
  EXPECT_EQ(r.json["status"], "output_limit") << r.json["error"].dump();
  EXPECT_EQ(r.json["error"]["ename"], "OutputLimitError");
  EXPECT_EQ(r.exit_status, 125);
  EXPECT_EQ(r.json["stdout_truncated"], true);
  EXPECT_GT(r.json["stdout_bytes"].get<uint64_t>(), 64ull << 20);
  // The kept head and tail, 1 MiB together, with the truncation marker between them.
  std::string out = r.json["stdout"];
  EXPECT_LE(out.size(), (1u << 20) + 100);
  EXPECT_GE(out.size(), 1u << 20);
  EXPECT_EQ(out.substr(0, 16), std::string(16, 'x'));
  // What execbox holds is bounded by the cap, not by what the code writes (~100 MiB here).
  ASSERT_GT(r.max_rss_kib, 0);
  EXPECT_LT(r.max_rss_kib, BaselineRssKib(GetParam()) + 48 * 1024) << "peak RSS of execbox in KiB";
}

TEST_P(Hostile, ForgedReportCostsTheSupervisorLittle) {
  // One line of 8 MiB of tiny JSON values: it must not cost execbox much more than 8 MiB.
  Invocation r = Code(ForgeReport("b'\"\",' * (8 * 2**20 // 3) + b'\"\"'"), {"--timeout", "60"});
  ASSERT_TRUE(r.json.is_object()) << r.out.substr(0, 1000) << r.err;
  std::string out = r.json["stdout"];
  EXPECT_NE(out.find("forged report on fd"), std::string::npos) << out;
  ASSERT_GT(r.max_rss_kib, 0);
  EXPECT_LT(r.max_rss_kib, BaselineRssKib(GetParam()) + 48 * 1024) << "peak RSS of execbox in KiB";
  EXPECT_LT(r.out.size(), 16u << 20) << "the JSON result grows with what the code wrote";
}

TEST_P(Hostile, ForgedReportOfManyObjectsDoesNotStallTheSupervisor) {
  // 500k empty objects in one array, 1.5 MB. A linear parser reads them about as fast as the
  // same bytes as one string (the baseline, measured here in the same run); one that rescans
  // the array for each object takes minutes on this host and hours under the VM stage's
  // emulation. The bound scales with the baseline, so a busy or emulated machine passes.
  Invocation baseline = Code(ForgeReport("b'\"' + b'x' * 1500000 + b'\"'", "pad"), {"--timeout", "120"});
  ASSERT_TRUE(baseline.json.is_object()) << baseline.out.substr(0, 1000) << baseline.err;
  EXPECT_NE(baseline.json["stdout"].get<std::string>().find("forged report on fd"), std::string::npos);
  Invocation r = Code(ForgeReport("b'{},' * 500000 + b'{}'", "pad"), {"--timeout", "120"});
  ASSERT_TRUE(r.json.is_object()) << r.out.substr(0, 1000) << r.err;
  std::string out = r.json["stdout"];
  EXPECT_NE(out.find("forged report on fd"), std::string::npos) << out;
  EXPECT_LT(r.seconds, 4 * baseline.seconds + 10)
      << "execbox took this long to read a 1.5 MB report of 500k objects; the same bytes as one string took "
      << baseline.seconds << " s";
}

TEST_P(Hostile, FillingTheWorkDirFailsInsideWithEnospcOrEfbig) {
  Invocation r = Code(R"py(
import os
block = b'x' * 2**20
def fill(name, limit):
    written = 0
    fd = os.open(name, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        while written < limit:
            written += os.write(fd, block)
        return None, written
    except OSError as e:
        return e.errno, written
    finally:
        os.close(fd)
# One 100 MB file: stopped by the 8 MiB tmpfs (ENOSPC) or RLIMIT_FSIZE (EFBIG; Python ignores
# SIGXFSZ).
err, written = fill('big.bin', 100 * 2**20)
print('big', err, written <= 8 * 2**20)
os.unlink('big.bin')
# Files under RLIMIT_FSIZE each: only the size of the tmpfs can stop them.
n = 0
while True:
    err, written = fill(f'part{n}.bin', 2**20)
    if err is not None:
        break
    n += 1
print('parts', err, n <= 8)
for i in range(n + 1):
    os.unlink(f'part{i}.bin')
with open('after.txt', 'w') as f:
    f.write('writable again\n')
print('after ok')
)py",
                      {"--disk", "8M"});
  ASSERT_TRUE(r.json.is_object()) << r.out << r.err;
  EXPECT_EQ(r.json["status"], "ok") << r.json.dump(2);
  std::string out = r.json["stdout"];
  bool enospc_or_efbig =
      out.find("big 28 True\n") != std::string::npos || out.find("big 27 True\n") != std::string::npos;
  EXPECT_TRUE(enospc_or_efbig) << out;
  EXPECT_NE(out.find("parts 28 True\n"), std::string::npos) << out;
  EXPECT_NE(out.find("after ok\n"), std::string::npos) << out;
  ASSERT_EQ(r.json["files"].size(), 1u) << r.json["files"].dump();
  EXPECT_EQ(r.json["files"][0]["name"], "after.txt");
}

// ---- Network ----

TEST_P(Hostile, NetworkIsUnreachable) {
  // A host service on an abstract unix socket; abstract names belong to a network namespace.
  std::string abstract = "execbox-hostile-" + std::to_string(::getpid()) + "-" + ModeName(GetParam());
  int listener = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  ASSERT_GE(listener, 0);
  struct sockaddr_un addr {};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path + 1, abstract.data(), abstract.size());
  auto len = static_cast<socklen_t>(offsetof(struct sockaddr_un, sun_path) + 1 + abstract.size());
  ASSERT_EQ(::bind(listener, reinterpret_cast<struct sockaddr*>(&addr), len), 0) << std::strerror(errno);
  ASSERT_EQ(::listen(listener, 4), 0);

  Invocation r = Code("HOST_ABSTRACT = '\\0" + abstract + "'\n" + R"py(
import json, socket, time
out = {}
for host in ('127.0.0.1', '192.0.2.1'):
    start = time.monotonic()
    try:
        socket.create_connection((host, 80), timeout=10).close()
        out[host] = 'connected'
    except OSError as e:
        out[host] = [type(e).__name__, e.errno]
    out[host + ' seconds'] = time.monotonic() - start
for name, family, kind in (('inet6', socket.AF_INET6, socket.SOCK_STREAM),
                           ('udp', socket.AF_INET, socket.SOCK_DGRAM),
                           ('netlink', socket.AF_NETLINK, socket.SOCK_RAW),
                           ('packet', socket.AF_PACKET, socket.SOCK_RAW)):
    try:
        socket.socket(family, kind).close()
        out[name] = 'created'
    except OSError as e:
        out[name] = [type(e).__name__, e.errno]
try:
    socket.socket(socket.AF_UNIX).connect(HOST_ABSTRACT)
    out['host_abstract'] = 'connected'
except OSError as e:
    out['host_abstract'] = [type(e).__name__, e.errno]
a, b = socket.socketpair(socket.AF_UNIX)
a.sendall(b'ping')
out['socketpair'] = b.recv(4).decode()
print(json.dumps(out))
)py");
  int accepted = ::accept(listener, nullptr, nullptr);
  int accept_errno = errno;
  ::close(listener);
  if (accepted >= 0) ::close(accepted);
  EXPECT_LT(accepted, 0) << "the code reached a host socket";
  EXPECT_EQ(accept_errno, EAGAIN);

  ASSERT_TRUE(r.json.is_object()) << r.out << r.err;
  ASSERT_EQ(r.json["status"], "ok") << r.json.dump(2);
  json out = PrintedJson(r);
  ASSERT_TRUE(out.is_object()) << r.json["stdout"];
  for (const char* host : {"127.0.0.1", "192.0.2.1"}) {
    SCOPED_TRACE(host);
    // Refused by socket() itself (seccomp), not by a connect that waits.
    EXPECT_EQ(out[host], json::array({"PermissionError", EPERM}));
    // At once: far below the 10 s socket timeout, with room for a busy machine.
    EXPECT_LT(out[std::string(host) + " seconds"].get<double>(), 5.0);
  }
  for (const char* family : {"inet6", "udp", "netlink", "packet"}) {
    EXPECT_EQ(out[family], json::array({"PermissionError", EPERM})) << family;
  }
  // Not found in the jail's network namespace (refused), or Landlock's scope (EPERM).
  ASSERT_TRUE(out["host_abstract"].is_array()) << out.dump();
  EXPECT_TRUE(out["host_abstract"][1] == ECONNREFUSED || out["host_abstract"][1] == EPERM) << out.dump();
  EXPECT_EQ(out["socketpair"], "ping");
}

// ---- The host is invisible ----

TEST_P(Hostile, HostFilesEnvironmentAndProcessesAreInvisible) {
  const std::string canary = "canary-" + std::to_string(::getpid());
  std::string code = "CANARY = '" + canary + "'\n" + R"py(
import json, os
out = {}
def attempt(name, fn):
    try:
        fn()
        out[name] = 'ok'
    except OSError as e:
        out[name] = [type(e).__name__, e.errno]
attempt('shadow', lambda: open('/etc/shadow').read())
attempt('root_home', lambda: os.listdir('/root'))
out['home'] = sorted(os.listdir('/home'))  # the sandbox's own home only, none of the host's
attempt('proc1_environ', lambda: open('/proc/1/environ', 'rb').read())
attempt('proc1_mem', lambda: open('/proc/1/mem', 'rb').read(1))
attempt('proc1_root', lambda: os.listdir('/proc/1/root'))
attempt('sysrq', lambda: open('/proc/sysrq-trigger', 'w').write('h'))
attempt('drop_caches', lambda: open('/proc/sys/vm/drop_caches', 'w').write('3'))
out['env_keys'] = sorted(os.environ)
out['canary_seen'] = (CANARY in open('/proc/self/environ').read()
                      or any(CANARY in v for v in os.environ.values()))
out['pids'] = sorted(int(p) for p in os.listdir('/proc') if p.isdigit())
print(json.dumps(out))
)py";
  Invocation r = RunExecbox({"run", "--json", "-c", code}, GetParam(), "", {"EXECBOX_CANARY=" + canary});
  ASSERT_TRUE(r.json.is_object()) << r.out << r.err;
  ASSERT_EQ(r.json["status"], "ok") << r.json.dump(2);
  json out = PrintedJson(r);
  ASSERT_TRUE(out.is_object()) << r.json["stdout"];
  EXPECT_EQ(out["shadow"], json::array({"FileNotFoundError", ENOENT}));
  EXPECT_EQ(out["root_home"], json::array({"FileNotFoundError", ENOENT}));
  EXPECT_EQ(out["home"], json::array({"user"}));
  // pid 1 is the jail's init, which is not dumpable.
  EXPECT_EQ(out["proc1_environ"], json::array({"PermissionError", EACCES}));
  EXPECT_EQ(out["proc1_mem"], json::array({"PermissionError", EACCES}));
  EXPECT_EQ(out["proc1_root"], json::array({"PermissionError", EACCES}));
  EXPECT_TRUE(out["sysrq"].is_array()) << out.dump();
  EXPECT_TRUE(out["drop_caches"].is_array()) << out.dump();
  for (const auto& key : out["env_keys"]) EXPECT_NE(key, "EXECBOX_CANARY");
  EXPECT_EQ(out["canary_seen"], false);
  // Only the jail's processes: its init (1) and the code.
  std::set<int> pids;
  for (const auto& pid : out["pids"]) pids.insert(pid.get<int>());
  EXPECT_LT(pids.size(), 10u) << out["pids"].dump();
  EXPECT_EQ(pids.count(1), 1u) << out["pids"].dump();
}

// ---- The kernel ----

TEST_P(Hostile, ProcShowsOnlyTheSandboxsProcesses) {
  // /proc is mounted with subset=pid: no host facts (cpuinfo, meminfo, sysctls, kallsyms, keys).
  Invocation r = Code(
      "import os\n"
      "print(sorted(os.listdir('/proc')))\n"
      "for p in ('/proc/cpuinfo', '/proc/meminfo', '/proc/sys/kernel/hostname', '/proc/kallsyms', "
      "'/proc/keys'):\n"
      "    print(p, os.path.exists(p))\n");
  ASSERT_TRUE(r.json.is_object()) << r.out << r.err;
  std::string out = r.json["stdout"];
  EXPECT_NE(out.find("['1', '2', 'self', 'thread-self']"), std::string::npos) << out;
  EXPECT_EQ(out.find("True"), std::string::npos) << out;
}

TEST_P(Hostile, KernelInterfacesAreRefused) {
  Invocation r = Code(R"py(
import ctypes, json
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
L = ctypes.c_long
out = {}
def probe(name, fn):
    ctypes.set_errno(0)
    rc = fn()
    out[name] = [rc, ctypes.get_errno()]
ch = ctypes.create_string_buffer(b'x')
probe('ptrace', lambda: libc.ptrace(L(0), L(0), None, None))  # PTRACE_TRACEME
probe('mount', lambda: libc.mount(b'none', b'/tmp', b'tmpfs', L(0), None))
probe('umount', lambda: libc.umount2(b'/proc', 2))
probe('unshare_user', lambda: libc.unshare(0x10000000))
probe('unshare_mount', lambda: libc.unshare(0x00020000))
probe('clone_newuser', lambda: libc.syscall(L(56), L(0x10000000 | 17), None, None, None, L(0)))
probe('setns', lambda: libc.syscall(L(308), L(0), L(0)))
probe('chroot', lambda: libc.chroot(b'/tmp'))
probe('keyctl', lambda: libc.syscall(L(250), L(0), L(0), L(0), L(0), L(0)))
probe('bpf', lambda: libc.syscall(L(321), L(0), None, L(0)))
probe('io_uring_setup', lambda: libc.syscall(L(425), L(1), None))
probe('perf_event_open', lambda: libc.syscall(L(298), None, L(0), L(-1), L(-1), L(0)))
probe('userfaultfd', lambda: libc.syscall(L(323), L(0)))
probe('process_vm_readv', lambda: libc.syscall(L(310), L(1), None, L(0), None, L(0), L(0)))
probe('init_module', lambda: libc.syscall(L(175), None, L(0), b''))
probe('personality_no_aslr', lambda: libc.personality(L(0x0040000)))
probe('clone3', lambda: libc.syscall(L(435), None, L(0)))
probe('tiocsti', lambda: libc.syscall(L(16), L(0), L(0x5412), ch))
# The kernel reads the request as 32 bits: junk above them must not dodge the check.
probe('tiocsti_high_bits', lambda: libc.syscall(L(16), L(0), L(0x5412 | (1 << 32)), ch))
print(json.dumps(out))
)py");
  ASSERT_TRUE(r.json.is_object()) << r.out << r.err;
  ASSERT_EQ(r.json["status"], "ok") << r.json.dump(2);
  json out = PrintedJson(r);
  ASSERT_TRUE(out.is_object()) << r.json["stdout"];
  for (const char* name :
       {"ptrace", "mount", "umount", "unshare_user", "unshare_mount", "clone_newuser", "setns", "chroot",
        "keyctl", "bpf", "io_uring_setup", "perf_event_open", "userfaultfd", "process_vm_readv",
        "init_module", "personality_no_aslr", "tiocsti", "tiocsti_high_bits"}) {
    EXPECT_EQ(out[name], json::array({-1, EPERM})) << name;
  }
  // clone3 is ENOSYS so that glibc falls back to clone, whose flags seccomp can check.
  EXPECT_EQ(out["clone3"], json::array({-1, ENOSYS}));
}

TEST_P(Hostile, NoRootAndNoCapabilities) {
  Invocation r = Code(R"py(
import os
print('ids', os.getuid(), os.geteuid(), os.getgid(), os.getegid())
for line in open('/proc/self/status'):
    if line.startswith(('Cap', 'NoNewPrivs', 'Seccomp:')):
        print(line.split()[0], line.split()[1])
try:
    os.setuid(0)
    print('setuid worked')
except OSError as e:
    print('setuid', e.errno)
)py");
  ASSERT_TRUE(r.json.is_object()) << r.out << r.err;
  ASSERT_EQ(r.json["status"], "ok") << r.json.dump(2);
  std::string out = r.json["stdout"];
  EXPECT_NE(out.find("ids 1000 1000 1000 1000\n"), std::string::npos) << out;
  for (const char* set : {"CapInh:", "CapPrm:", "CapEff:", "CapBnd:", "CapAmb:"}) {
    EXPECT_NE(out.find(std::string(set) + " 0000000000000000\n"), std::string::npos) << set << "\n" << out;
  }
  EXPECT_NE(out.find("NoNewPrivs: 1\n"), std::string::npos) << out;
  EXPECT_NE(out.find("Seccomp: 2\n"), std::string::npos) << out;
  // EINVAL: uid 0 does not exist in the jail's user namespace (EPERM if it ever did).
  bool refused = out.find("setuid 22\n") != std::string::npos || out.find("setuid 1\n") != std::string::npos;
  EXPECT_TRUE(refused) << out;
}

// ---- Traps for the host ----

TEST_P(Hostile, TmpAndShmWritesStayInside) {
  std::string name = "execbox-trap-" + std::to_string(::getpid()) + "-" + ModeName(GetParam());
  std::string tmp = "/tmp/" + name, shm = "/dev/shm/" + name;
  std::filesystem::remove(tmp);
  std::filesystem::remove(shm);
  Invocation r = Code("PATHS = ('" + tmp + "', '" + shm + "')\n" + R"py(
for path in PATHS:
    with open(path, 'w') as f:
        f.write('trap')
    print(path, open(path).read())
)py");
  ASSERT_TRUE(r.json.is_object()) << r.out << r.err;
  EXPECT_EQ(r.json["status"], "ok") << r.json.dump(2);
  EXPECT_EQ(r.json["stdout"], tmp + " trap\n" + shm + " trap\n");
  EXPECT_FALSE(std::filesystem::exists(tmp));
  EXPECT_FALSE(std::filesystem::exists(shm));
  EXPECT_TRUE(r.json["files"].empty()) << "/tmp and /dev/shm are not the work dir";
}

TEST_P(Hostile, PlantedLinksFifosAndBadNamesAreNotCopiedOut) {
  std::string dir = SharedDir("keep-planted");
  Invocation r = Code(R"py(
import os
os.symlink('/etc/passwd', 'link')
os.mkfifo('fifo')
os.mkdir('d')
os.symlink('/etc', 'd/dirlink')
open('bad\nname.txt', 'w').write('x')
with open('normal.txt', 'w') as f:
    f.write('plain\n')
)py",
                      {"--keep-files", dir});
  ASSERT_TRUE(r.json.is_object()) << r.out << r.err;
  EXPECT_EQ(r.json["status"], "ok") << r.json.dump(2);
  std::set<std::string> on_host;
  for (const auto& e : std::filesystem::directory_iterator(dir)) on_host.insert(e.path().filename());
  EXPECT_EQ(on_host, std::set<std::string>{"normal.txt"});
  struct stat st {};
  EXPECT_NE(::lstat((dir + "/link").c_str(), &st), 0);
  EXPECT_NE(::lstat((dir + "/fifo").c_str(), &st), 0);
  std::ifstream normal(dir + "/normal.txt");
  std::string content((std::istreambuf_iterator<char>(normal)), std::istreambuf_iterator<char>());
  EXPECT_EQ(content, "plain\n");
  ASSERT_EQ(r.json["files"].size(), 1u) << r.json["files"].dump();
  EXPECT_EQ(r.json["files"][0]["name"], "normal.txt");
  // Each planted entry is named, with a reason.
  for (const char* name : {"link: ", "fifo: ", "d/dirlink: ", "bad\nname.txt: "}) {
    bool found = false;
    for (const auto& s : r.json["skipped_files"]) {
      std::string entry = s;
      if (entry.rfind(name, 0) == 0 && entry.size() > std::strlen(name)) found = true;
    }
    EXPECT_TRUE(found) << name << " not in " << r.json["skipped_files"].dump();
  }
  std::filesystem::remove_all(dir);
}

// The work dir's alias (/work, a link to /home/user in the read-only root) cannot be replaced
// to point the collection elsewhere, nor the home moved; links planted in the home, under the
// alias's name too, are passed over. What was written through the alias comes back, once.
TEST_P(Hostile, TheWorkAliasCannotBeReplacedAndLinksInTheHomeAreNotFollowed) {
  std::string dir = SharedDir("keep-alias");
  Invocation r = Code(R"py(
import os
attempts = [lambda: os.unlink('/work'), lambda: os.rename('/work', '/work.old'),
            lambda: os.symlink('/etc', '/work'), lambda: os.rmdir('/home/user'),
            lambda: os.rename('/home/user', '/home/other'), lambda: os.symlink('/etc', '/home/other')]
for attempt in attempts:
    try:
        attempt()
        print('done')
    except OSError:
        print('refused')
os.symlink('/etc', 'work')
os.symlink('/', 'home')
os.symlink('/work', 'loop')
open('/work/kept.txt', 'w').write('kept')
print(os.readlink('/work'), os.path.samefile('/work', '/home/user'))
)py",
                      {"--keep-files", dir});
  ASSERT_TRUE(r.json.is_object()) << r.out << r.err;
  EXPECT_EQ(r.json["status"], "ok") << r.json.dump(2);
  EXPECT_EQ(r.json["stdout"], "refused\nrefused\nrefused\nrefused\nrefused\nrefused\n/home/user True\n");
  std::set<std::string> on_host;
  for (const auto& e : std::filesystem::directory_iterator(dir)) on_host.insert(e.path().filename());
  EXPECT_EQ(on_host, std::set<std::string>{"kept.txt"});
  ASSERT_EQ(r.json["files"].size(), 1u) << r.json["files"].dump();
  EXPECT_EQ(r.json["files"][0]["name"], "kept.txt");
  for (const char* name : {"work: ", "home: ", "loop: "}) {
    bool found = false;
    for (const auto& s : r.json["skipped_files"]) found = found || s.get<std::string>().rfind(name, 0) == 0;
    EXPECT_TRUE(found) << name << " not in " << r.json["skipped_files"].dump();
  }
  std::filesystem::remove_all(dir);
}

TEST_P(Hostile, KeepFilesDoesNotFollowASymlinkedDirOnTheHost) {
  std::string dir = SharedDir("keep-subdir");
  std::string elsewhere = SharedDir("elsewhere-dir");
  std::filesystem::create_directory_symlink(elsewhere, dir + "/sub");
  Invocation r = Code(R"py(
import os
os.mkdir('sub')
with open('sub/x.txt', 'w') as f:
    f.write('through the link?\n')
)py",
                      {"--keep-files", dir});
  ASSERT_TRUE(r.json.is_object()) << r.out << r.err;
  EXPECT_EQ(r.json["status"], "ok") << r.json.dump(2);
  EXPECT_FALSE(std::filesystem::exists(elsewhere + "/x.txt")) << "written through the host's symlink";
  EXPECT_TRUE(std::filesystem::is_empty(elsewhere));
  EXPECT_TRUE(std::filesystem::is_symlink(dir + "/sub"));
  EXPECT_NE(r.err.find("--keep-files"), std::string::npos) << r.err;
  std::filesystem::remove_all(dir);
  std::filesystem::remove_all(elsewhere);
}

TEST_P(Hostile, KeepFilesDoesNotFollowASymlinkedFileOnTheHost) {
  std::string dir = SharedDir("keep-leaf");
  std::string elsewhere = SharedDir("elsewhere-leaf");
  std::filesystem::create_symlink(elsewhere + "/victim.txt", dir + "/out.txt");
  Invocation r =
      Code("open('out.txt', 'w').write('through the link?\\n')\nopen('z.txt', 'w').write('fine')\n",
           {"--keep-files", dir});
  ASSERT_TRUE(r.json.is_object()) << r.out << r.err;
  EXPECT_EQ(r.json["status"], "ok") << r.json.dump(2);
  EXPECT_FALSE(std::filesystem::exists(elsewhere + "/victim.txt")) << "written through the host's symlink";
  EXPECT_TRUE(std::filesystem::is_symlink(dir + "/out.txt"));
  EXPECT_TRUE(std::filesystem::is_regular_file(dir + "/z.txt"))
      << "one refused file must not cost the others";
  EXPECT_NE(r.err.find("--keep-files"), std::string::npos) << r.err;
  std::filesystem::remove_all(dir);
  std::filesystem::remove_all(elsewhere);
}

INSTANTIATE_TEST_SUITE_P(Modes, Hostile, ::testing::Values(Mode::kRoot, Mode::kUnprivileged),
                         [](const auto& param_info) { return ModeName(param_info.param); });

// A warm session (execbox repl) whose code writes the agent's done marker on its own channel and
// goes on running: the host does not take the marker (the process never parks on its channel),
// so the cell is not ok, the state is reported lost, and the next cell runs in a fresh process.
class HostileSession : public BothModes {};

TEST_P(HostileSession, AForgedDoneMarkerIsNotOk) {
  const std::string cells =
      "x = 41\nimport os\nif True:\n    os.write(3, b'D')\n    print('after', flush=True)\n    while True: "
      "pass\n\n"
      "print('x' in globals())\n";
  Invocation r = RunExecbox({"repl", "--json", "--timeout", "3"}, GetParam(), cells);
  if (GetParam() == Mode::kUnprivileged && r.exit_status == 70) {
    GTEST_SKIP() << "no warm sandbox for this user: " << r.err;
  }
  std::vector<json> lines;
  for (size_t at = 0, end; at < r.out.size(); at = end + 1) {  // one JSON result per line
    end = r.out.find('\n', at);
    if (end == std::string::npos) end = r.out.size();
    lines.push_back(json::parse(r.out.substr(at, end - at), nullptr, false));
  }
  ASSERT_EQ(lines.size(), 4u) << r.out << r.err;
  auto field = [](const json& j, const char* pointer) {
    return j.is_object() ? j.value(json::json_pointer(pointer), json()) : json();
  };
  const json& forged = lines[2];
  EXPECT_EQ(field(forged, "/status"), "error") << forged.dump(2);
  EXPECT_EQ(field(forged, "/error/ename"), "SandboxError") << forged.dump(2);
  EXPECT_EQ(field(forged, "/session/state"), "lost") << forged.dump(2);
  EXPECT_EQ(field(forged, "/stdout"), "after\n") << forged.dump(2);
  const json& next = lines[3];
  EXPECT_EQ(field(next, "/status"), "ok") << next.dump(2);
  EXPECT_EQ(field(next, "/stdout"), "False\n") << next.dump(2);
}

INSTANTIATE_TEST_SUITE_P(Modes, HostileSession, ::testing::Values(Mode::kRoot, Mode::kUnprivileged),
                         [](const auto& param_info) { return ModeName(param_info.param); });

}  // namespace
}  // namespace execbox::e2e
