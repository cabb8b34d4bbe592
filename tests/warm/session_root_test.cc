// A session's root is writable like a machine's (jail/session_root.h): the code and its commands
// write /opt, /etc and new top-level directories; the writes last for the session, within its
// own quota, and nothing of them reaches another session or the host; the host's directories
// stay read-only.
#include <unistd.h>

#include <string>

#include "warm/warm_fixture.h"

namespace execbox::engine {
namespace {

using runtime::Mode;

class SessionRoot : public WarmSessions {
 protected:
  std::string Open() {
    auto s = S().Create();
    EXPECT_TRUE(s.has_value()) << (s ? "" : s.error().message);
    return s ? s->id : "";
  }
  Result Do(const std::string& id, Mode mode, const std::string& code) {
    auto p = Program(code);
    p.mode = mode;
    auto r = S().Execute(id, p);
    EXPECT_TRUE(r.has_value()) << (r ? "" : r.error().message);
    return r ? std::move(*r) : Result{.status = Status::kInternalError};
  }
};

// What a machine lets its user do outside the home, as code and as a shell command.
const char* const kWriteTheRoot = R"py(
import os, subprocess
os.makedirs('/opt/execbox-root-test/app', exist_ok=True)
open('/opt/execbox-root-test/app/config.txt', 'w').write('from code')
open('/etc/execbox-root-test.conf', 'w').write('etc')
os.remove('/etc/group')
print(subprocess.run(['/bin/bash', '-c',
    'mkdir -p /data/in && echo from shell > /data/in/f && cat /data/in/f /opt/execbox-root-test/app/config.txt'],
    capture_output=True, text=True).stdout)
)py";

const char* const kReadTheRoot = R"py(
import os
print(open('/opt/execbox-root-test/app/config.txt').read(), open('/data/in/f').read().strip(),
      open('/etc/execbox-root-test.conf').read(), os.path.exists('/etc/group'))
)py";

const char* const kTheHostsDirsStayReadOnly = R"py(
import errno
for path in ['/usr/execbox-root-test', '/usr/lib/execbox-root-test', '/dev/execbox-root-test']:
    try:
        open(path, 'w')
        print('written', path)
    except OSError as e:
        print(errno.errorcode[e.errno])
open('/dev/null', 'w').write('still a device')
)py";

TEST_F(SessionRoot, CodeAndCommandsWriteTheRootAndTheWritesLastForTheSessionOnly) {
  std::string a = Open(), b = Open();
  ASSERT_FALSE(a.empty() || b.empty());
  Result r = Do(a, Mode::kRun, kWriteTheRoot);
  EXPECT_EQ(r.status, Status::kOk) << Describe(r);
  EXPECT_EQ(Out(r), "from shell\nfrom code\n") << Describe(r);
  // The next execution and a command see them; the other session does not, nor the host.
  r = Do(a, Mode::kRun, kReadTheRoot);
  EXPECT_EQ(Out(r), "from code from shell etc False\n") << Describe(r);
  r = Do(a, Mode::kCommand, "ls /opt/execbox-root-test/app /data/in");
  EXPECT_EQ(Out(r), "/data/in:\nf\n\n/opt/execbox-root-test/app:\nconfig.txt\n") << Describe(r);
  r = Do(b, Mode::kRun,
         "import os\nprint([os.path.exists(p) for p in ['/opt/execbox-root-test', '/data', "
         "'/etc/execbox-root-test.conf', '/etc/group']])");
  EXPECT_EQ(Out(r), "[False, False, False, True]\n") << Describe(r);
  EXPECT_NE(::access("/opt/execbox-root-test", F_OK), 0);
  EXPECT_NE(::access("/data/in/f", F_OK), 0);
  // The home is still its own directory, with the session's files, and only those.
  EXPECT_TRUE(r.files.empty()) << Describe(r);
  EXPECT_TRUE(S().Delete(a).has_value());
  EXPECT_TRUE(S().Delete(b).has_value());
}

TEST_F(SessionRoot, TheHostsDirectoriesAndTheSharedDevStayReadOnly) {
  std::string a = Open();
  ASSERT_FALSE(a.empty());
  Result r = Do(a, Mode::kRun, kTheHostsDirsStayReadOnly);
  // /usr is the host's, bound read-only: refused by its mount (EROFS) or its owner (EACCES).
  // /dev is the zygote's, every child's: its mount is read-only in a session, its nodes work.
  EXPECT_TRUE(Out(r) == "EROFS\nEROFS\nEROFS\n" || Out(r) == "EACCES\nEACCES\nEROFS\n") << Describe(r);
  EXPECT_EQ(r.status, Status::kOk) << Describe(r);
  EXPECT_TRUE(S().Delete(a).has_value());
}

TEST_F(SessionRoot, TheRootsWritesAreHeldByTheSessionsDiskQuota) {
  std::string a = Open();
  ASSERT_FALSE(a.empty());
  auto limits = Program("").limits;
  uint64_t mib = limits.work_dir_bytes >> 20;
  Result r = Do(a, Mode::kRun, R"py(
import errno
n = 0
try:
    for i in range(100000):
        with open(f'/opt/fill{i}', 'wb') as f:
            f.write(b'x' * (1 << 20))
        n += 1
except OSError as e:
    print(errno.errorcode[e.errno], n)
)py");
  std::string out = Out(r);
  ASSERT_EQ(out.rfind("ENOSPC ", 0), 0u) << Describe(r);
  EXPECT_LE(std::stoull(out.substr(7)), mib) << Describe(r);
  // The session lives on; freeing the space gives it back.
  r = Do(a, Mode::kCommand, "rm -f /opt/fill* && echo ok > /opt/after && cat /opt/after");
  EXPECT_EQ(Out(r), "ok\n") << Describe(r);
  EXPECT_TRUE(S().Delete(a).has_value());
}

// The layer's descriptor (the kernel's fd 5, for snapshots) reads the session's own changes
// and nothing more: it writes nothing, leads nowhere above the layer, and no command holds it.
TEST_F(SessionRoot, TheLayersDescriptorIsReadOnlyLeadsNowhereElseAndStaysWithTheKernel) {
  std::string a = Open();
  ASSERT_FALSE(a.empty());
  Result r = Do(a, Mode::kRun, R"py(
import errno, os, stat, subprocess
open('/etc/changed.conf', 'w').write('x')
print(sorted(os.listdir(5)), sorted(os.listdir('/proc/self/fd/5/..')) == sorted(os.listdir(5)))
for attempt in [lambda: os.open('etc/new', os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=5),
                lambda: os.open('etc/changed.conf', os.O_WRONLY, dir_fd=5),
                lambda: os.mkdir('made', dir_fd=5)]:
    try:
        attempt()
        print('written')
    except OSError as e:
        print(errno.errorcode[e.errno])
print(subprocess.run(['/bin/sh', '-c', 'test -e /proc/self/fd/5 && echo held || echo not held'],
                     capture_output=True, text=True, close_fds=False).stdout, end='')
)py");
  EXPECT_EQ(Out(r), "['etc'] True\nEROFS\nEROFS\nEROFS\nnot held\n") << Describe(r);
  EXPECT_TRUE(S().Delete(a).has_value());
}

// A fork, an undo (and so a durable session's restore and an import, the same snapshot) carry
// the root's changes with the home's: new files, a removed file of the system.
TEST_F(SessionRoot, AForkAndAnUndoCarryTheRootsChanges) {
  auto s = S().CreateWithCheckpoints();
  ASSERT_TRUE(s.has_value()) << s.error().message;
  Result r = Do(s->id, Mode::kCommand,
                "mkdir -p /opt/app /data/empty && echo one > /opt/app/v.txt && rm /etc/group && echo h > home.txt");
  ASSERT_EQ(r.status, Status::kOk) << Describe(r);
  r = Do(s->id, Mode::kCommand, "echo two > /opt/app/v.txt && echo n > /opt/app/new.txt");
  ASSERT_EQ(r.status, Status::kOk) << Describe(r);
  const char* const kLook =
      "cat /opt/app/v.txt; ls /opt/app; ls -d /data/empty; test -e /etc/group && echo group; cat home.txt";

  auto forked = S().Fork(s->id);
  ASSERT_TRUE(forked.has_value()) << forked.error().message;
  EXPECT_TRUE(forked->left_out.empty());
  const std::string f = forked->info.id;
  r = Do(f, Mode::kCommand, kLook);
  EXPECT_EQ(Out(r), "two\nnew.txt\nv.txt\n/data/empty\nh\n") << Describe(r);
  // Undo puts back the state from before the second command: the root as the first left it.
  auto undone = S().Undo(s->id);
  ASSERT_TRUE(undone.has_value()) << undone.error().message;
  EXPECT_TRUE(undone->left_out.empty());
  r = Do(s->id, Mode::kCommand, kLook);
  EXPECT_EQ(Out(r), "one\nv.txt\n/data/empty\nh\n") << Describe(r);
  // Independent: what the fork writes, the original does not see.
  Do(f, Mode::kCommand, "echo fork > /opt/app/fork.txt");
  r = Do(s->id, Mode::kCommand, "test -e /opt/app/fork.txt || echo absent");
  EXPECT_EQ(Out(r), "absent\n") << Describe(r);
  EXPECT_TRUE(S().Delete(f).has_value());
  EXPECT_TRUE(S().Delete(s->id).has_value());
}

}  // namespace
}  // namespace execbox::engine
