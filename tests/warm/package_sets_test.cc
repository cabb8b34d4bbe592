// Package sets (engine/package_sets.h) and the jail's writable bind they are built through, on
// the real kernel: cold jails only, so these run as root and as the unprivileged user alike.
#include "engine/package_sets.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "base/io.h"
#include "jail/sandbox.h"
#include "runtime/python_program.h"

namespace execbox::engine {
namespace {

namespace fs = std::filesystem;

// A directory of the test's own, not under /tmp (the jail's root is staged on a tmpfs there).
class TempDir {
 public:
  TempDir() {
    std::string pattern = "/var/tmp/execbox-sets-test-XXXXXX";
    path_ = ::mkdtemp(pattern.data()) != nullptr ? pattern : "";
    if (!path_.empty()) ::chmod(path_.c_str(), 0755);
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// A wheel written the way pip writes one, without building anything: one module.
void WriteWheel(const std::string& dir, const std::string& module, const std::string& source) {
  const std::string script =
      "import sys, zipfile\n"
      "d, m, src = sys.argv[1:4]\n"
      "dist = m + '-1.0.dist-info/'\n"
      "with zipfile.ZipFile('%s/%s-1.0-py3-none-any.whl' % (d, m), 'w') as z:\n"
      "    z.writestr(m + '.py', src)\n"
      "    z.writestr(dist + 'METADATA', 'Metadata-Version: 2.1\\nName: %s\\nVersion: 1.0\\n' % "
      "m.replace('_', "
      "'-'))\n"
      "    z.writestr(dist + 'WHEEL', 'Wheel-Version: 1.0\\nGenerator: test\\nRoot-Is-Purelib: true\\nTag: "
      "py3-none-any\\n')\n"
      "    z.writestr(dist + 'top_level.txt', m + '\\n')\n"
      "    z.writestr(dist + 'RECORD', '')\n";
  const std::string file = dir + "/make_wheel.py";
  std::ofstream(file) << script;
  const std::string command = "/usr/bin/python3 " + file + " " + dir + " " + module + " '" + source + "'";
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  fs::remove(file);
}

// pip takes about a second of CPU here and 30 s or more under the VM stage's software emulation
// (tests/vm), where the default 30 s CPU limit ended the build as a timeout: generous limits.
runtime::PythonProgram Program(const std::string& code) {
  runtime::PythonProgram p;
  p.code = code;
  p.limits.wall_time = std::chrono::seconds(300);
  p.limits.cpu_time = std::chrono::seconds(300);
  return p;
}

TEST(WritableBind, TheCodeWritesThereAsItsHostUserAndNowhereElse) {
  TempDir out, ro;
  ASSERT_FALSE(out.path().empty());
  ASSERT_EQ(::chown(out.path().c_str(), jail::CodeHostUid(), jail::CodeHostGid()), 0);
  auto policy =
      runtime::MakePolicy(Program("open('/opt/out/made', 'w').write('written inside')\n"
                                  "try:\n"
                                  "    open('/opt/ro/made', 'w')\n"
                                  "except OSError as e:\n"
                                  "    open('/opt/out/ro_errno', 'w').write(str(e.errno))\n"));
  ASSERT_TRUE(policy) << policy.error().message;
  policy->binds.push_back({.path = out.path(), .required = true, .inside = "/opt/out", .writable = true});
  policy->binds.push_back({.path = ro.path(), .required = true, .inside = "/opt/ro"});
  auto outcome = jail::Run(*policy);
  ASSERT_TRUE(outcome) << outcome.error().message;
  EXPECT_EQ(outcome->ending, jail::Ending::kExited);
  EXPECT_EQ(outcome->exit_code, 0);
  auto ro_errno = ReadFile(out.path() + "/ro_errno");
  ASSERT_TRUE(ro_errno);
  EXPECT_EQ(*ro_errno, "30");  // EROFS
  auto made = ReadFile(out.path() + "/made");
  ASSERT_TRUE(made);
  EXPECT_EQ(*made, "written inside");
  struct stat st {};
  ASSERT_EQ(::stat((out.path() + "/made").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, jail::CodeHostUid());
  EXPECT_FALSE(fs::exists(ro.path() + "/made"));
}

TEST(WritableBind, AZygoteIsNeverGivenOne) {
  jail::Policy p = runtime::BasePythonPolicy();
  p.argv = {"/usr/bin/true"};
  p.zygote = true;
  p.binds.push_back({.path = "/var/tmp", .inside = "/opt/out", .writable = true});
  auto s = jail::Validate(p);
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find("writable"), std::string::npos) << s.error().message;
}

class PackageSetsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(house_.path().empty());
    WriteWheel(house_.path(), "execbox_sets_demo", "VALUE = 7\n");
    WriteWheel(house_.path(), "execbox_sets_broken", "raise RuntimeError(\"on purpose\")\n");
  }
  TempDir house_, parent_;
};

TEST_F(PackageSetsTest, ASetIsBuiltOnceSealedAndReused) {
  auto sets = PackageSets::Open(parent_.path(), house_.path());
  ASSERT_TRUE(sets) << sets.error().message;
  const std::string dir = (*sets)->dir();
  auto program = Program("");
  program.packages = {"execbox-sets-demo"};
  std::string name;
  {
    auto lease = (*sets)->Acquire(program, {});
    ASSERT_TRUE(lease.has_value());
    name = lease->name();
    EXPECT_TRUE(runtime::IsPackageSetName(name)) << name;
  }
  auto manifest = ReadFile(dir + "/" + name + "/manifest.json");
  ASSERT_TRUE(manifest);
  EXPECT_NE(manifest->find("\"modules\":[\"execbox_sets_demo\"]"), std::string::npos) << *manifest;
  // Everything in it is the server's, and nobody else may write there.
  for (const auto& entry : fs::recursive_directory_iterator(dir + "/" + name)) {
    struct stat st {};
    ASSERT_EQ(::lstat(entry.path().c_str(), &st), 0);
    EXPECT_EQ(st.st_uid, ::geteuid()) << entry.path();
    if (!S_ISLNK(st.st_mode)) {
      EXPECT_EQ(st.st_mode & 022, 0u) << entry.path();
    }
  }
  struct stat before {};
  ASSERT_EQ(::stat((dir + "/" + name + "/manifest.json").c_str(), &before), 0);
  auto again = (*sets)->Acquire(program, {});
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->name(), name);
  struct stat after {};
  ASSERT_EQ(::stat((dir + "/" + name + "/manifest.json").c_str(), &after), 0);
  EXPECT_EQ(before.st_ino, after.st_ino);  // not built again
  EXPECT_EQ((*sets)->ready_count(), 1u);
  // Its directory goes with it.
  again.reset();
  sets->reset();
  EXPECT_FALSE(fs::exists(dir));
}

TEST_F(PackageSetsTest, AFailedInstallLeavesNoSet) {
  auto sets = PackageSets::Open(parent_.path(), house_.path());
  ASSERT_TRUE(sets) << sets.error().message;
  // Each for its own reason, which the server's log says.
  for (auto [name, why] :
       {std::pair{"execbox-sets-broken", "but it does not import: RuntimeError: on purpose"},
        std::pair{"execbox-sets-missing", "the wheelhouse has no wheel for execbox-sets-missing"}}) {
    auto program = Program("");
    program.packages = {name};
    testing::internal::CaptureStderr();
    EXPECT_FALSE((*sets)->Acquire(program, {}).has_value()) << name;
    const std::string logged = testing::internal::GetCapturedStderr();
    EXPECT_NE(logged.find(why), std::string::npos) << logged;
  }
  EXPECT_EQ((*sets)->ready_count(), 0u);
  size_t left = 0;
  for (const auto& entry : fs::directory_iterator((*sets)->dir())) left += entry.path().filename() != ".lock";
  EXPECT_EQ(left, 0u);
}

TEST_F(PackageSetsTest, AWheelOfMoreFilesThanASetMayHoldBuildsNone) {
  // Tiny files, far below disk_mb in bytes: the host disk's inodes are what it would use up.
  const std::string script =
      "import sys, zipfile\n"
      "n = int(sys.argv[2])\n"
      "with zipfile.ZipFile(sys.argv[1] + '/execbox_sets_many-1.0-py3-none-any.whl', 'w') as z:\n"
      "    for i in range(n):\n"
      "        z.writestr('execbox_sets_many/m%d.py' % i, '')\n"
      "    z.writestr('execbox_sets_many/__init__.py', '')\n"
      "    dist = 'execbox_sets_many-1.0.dist-info/'\n"
      "    z.writestr(dist + 'METADATA', 'Metadata-Version: 2.1\\nName: execbox-sets-many\\nVersion: "
      "1.0\\n')\n"
      "    z.writestr(dist + 'WHEEL', 'Wheel-Version: 1.0\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n')\n"
      "    z.writestr(dist + 'RECORD', '')\n";
  const std::string file = house_.path() + "/make_many.py";
  std::ofstream(file) << script;
  const std::string command =
      "/usr/bin/python3 " + file + " " + house_.path() + " " + std::to_string(runtime::kMaxPackageSetFiles);
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  fs::remove(file);
  auto sets = PackageSets::Open(parent_.path(), house_.path());
  ASSERT_TRUE(sets) << sets.error().message;
  auto program = Program("");
  program.packages = {"execbox-sets-many"};
  testing::internal::CaptureStderr();
  EXPECT_FALSE((*sets)->Acquire(program, {}).has_value());
  const std::string logged = testing::internal::GetCapturedStderr();
  EXPECT_NE(logged.find("a package set may hold"), std::string::npos) << logged;
  EXPECT_EQ((*sets)->ready_count(), 0u);
}

TEST_F(PackageSetsTest, AWheelhouseOfMoreEntriesThanAreReadGetsNoSets) {
  // Its name would digest part of the listing, so it gets none (and no build is tried).
  for (int i = 0; i <= 10000; ++i) std::ofstream(house_.path() + "/pad-" + std::to_string(i) + ".txt") << "";
  auto sets = PackageSets::Open(parent_.path(), house_.path());
  ASSERT_TRUE(sets) << sets.error().message;
  auto program = Program("");
  program.packages = {"execbox-sets-demo"};
  EXPECT_FALSE((*sets)->Acquire(program, {}).has_value());
  EXPECT_EQ((*sets)->ready_count(), 0u);
  // One entry fewer, and the same names make a set.
  fs::remove(house_.path() + "/pad-0.txt");
  fs::remove(house_.path() + "/pad-1.txt");
  fs::remove(house_.path() + "/pad-2.txt");
  EXPECT_TRUE((*sets)->Acquire(program, {}).has_value());
}

TEST_F(PackageSetsTest, AGoneServersDirectoryIsRemovedAndALiveOnesKept) {
  auto live = PackageSets::Open(parent_.path(), house_.path());
  ASSERT_TRUE(live) << live.error().message;
  const std::string stale = parent_.path() + "/server-0123456789abcdef";
  fs::create_directories(stale + "/abc");
  std::ofstream(stale + "/.lock") << "";
  auto second = PackageSets::Open(parent_.path(), house_.path());
  ASSERT_TRUE(second) << second.error().message;
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_TRUE(fs::exists((*live)->dir()));
  EXPECT_NE((*live)->dir(), (*second)->dir());
}

}  // namespace
}  // namespace execbox::engine
