// The sandbox's home on warm children, one-shot and in a session: /home/user is the work dir,
// the cwd and HOME of the code and of shell commands, the home of the user "user"; /work is
// another name of the same directory, both ways, and a file under it comes back once, named
// relative to the home.
#include <algorithm>
#include <string>
#include <vector>

#include "warm/warm_fixture.h"

namespace execbox::engine {
namespace {

using runtime::Mode;

// Where the code finds itself, as Python and as a shell started from it see it.
const char* const kWhereAmI = R"py(
import os, pwd, grp, subprocess
u = pwd.getpwuid(os.getuid())
print(os.getcwd(), os.environ['HOME'], os.path.expanduser('~'), u.pw_name, u.pw_dir, u.pw_shell,
      grp.getgrgid(os.getgid()).gr_name)
print(subprocess.run(['/bin/bash', '-c', 'pwd; echo ~; cd /work && pwd -P'], capture_output=True,
                     text=True).stdout, end='')
print(open('/etc/passwd').read().splitlines()[1])
)py";
const char* const kAtHome =
    "/home/user /home/user /home/user user /home/user /bin/bash user\n"
    "/home/user\n/home/user\n/home/user\n"
    "user:x:1000:1000:user:/home/user:/bin/bash\n";

// Writes under each name and reads under the other; lists the directory by both names.
const char* const kBothWays = R"py(
import os
open('/work/a.txt', 'w').write('via work')
open('/home/user/b.txt', 'w').write('via home')
print(open('/home/user/a.txt').read(), open('/work/b.txt').read(),
      sorted(os.listdir('/work')) == sorted(os.listdir('/home/user')) == sorted(os.listdir('.')))
)py";

std::vector<std::string> Names(const Result& r) {
  std::vector<std::string> names;
  for (const auto& f : r.files) names.push_back(f.name);
  std::sort(names.begin(), names.end());
  return names;
}

TEST_F(Warm, AOneShotChildIsAtHomeInHomeUser) {
  Result r = Run(kWhereAmI);
  EXPECT_EQ(r.status, Status::kOk) << Describe(r);
  EXPECT_EQ(Out(r), kAtHome) << Describe(r);
}

TEST_F(Warm, WorkAndHomeUserAreOneDirectoryBothWays) {
  Result r = Run(kBothWays);
  EXPECT_EQ(Out(r), "via work via home True\n") << Describe(r);
  EXPECT_EQ(Names(r), (std::vector<std::string>{"a.txt", "b.txt"})) << Describe(r);
}

class HomeSession : public WarmSessions {
 protected:
  void SetUp() override {
    WarmSessions::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    auto s = S().Create();
    ASSERT_TRUE(s.has_value()) << s.error().message;
    id_ = s->id;
  }
  void TearDown() override {
    if (!id_.empty()) {
      EXPECT_TRUE(S().Delete(id_).has_value());
    }
  }
  Result Do(Mode mode, const std::string& code) {
    auto p = Program(code);
    p.mode = mode;
    auto r = S().Execute(id_, p);
    EXPECT_TRUE(r.has_value()) << (r ? "" : r.error().message);
    return r ? std::move(*r) : Result{.status = Status::kInternalError};
  }

  std::string id_;
};

TEST_F(HomeSession, CodeAndCommandsAreAtHomeInHomeUser) {
  Result r = Do(Mode::kRun, kWhereAmI);
  EXPECT_EQ(Out(r), kAtHome) << Describe(r);
  // A shell command of the session (E2B's commands.run) starts there too.
  r = Do(Mode::kCommand, "pwd; echo \"$HOME\"; echo ~; id -un; id -gn; cd /work && pwd -P");
  EXPECT_EQ(Out(r), "/home/user\n/home/user\n/home/user\nuser\nuser\n/home/user\n") << Describe(r);
}

TEST_F(HomeSession, WorkAndHomeUserAreOneDirectoryAcrossExecutionsAndFileCalls) {
  Result r = Do(Mode::kRun, kBothWays);
  EXPECT_EQ(Out(r), "via work via home True\n") << Describe(r);
  EXPECT_EQ(Names(r), (std::vector<std::string>{"a.txt", "b.txt"})) << Describe(r);
  // The next execution reads each under the other name, and changes them so.
  r = Do(Mode::kRun,
         "print(open('/home/user/a.txt').read(), open('/work/b.txt').read())\n"
         "open('/home/user/a.txt', 'a').write('+home')\nopen('/work/b.txt', 'a').write('+work')");
  EXPECT_EQ(Out(r), "via work via home\n") << Describe(r);
  EXPECT_EQ(Names(r), (std::vector<std::string>{"a.txt", "b.txt"})) << Describe(r);
  r = Do(Mode::kCommand, "cat /work/a.txt; echo; cat /home/user/b.txt");
  EXPECT_EQ(Out(r), "via work+home\nvia home+work") << Describe(r);
  // The host's file calls name the same directory as both names do inside.
  ASSERT_TRUE(S().WriteFile(id_, "up.txt", "uploaded").has_value());
  r = Do(Mode::kRun,
         "print(open('/work/up.txt').read(), open('/home/user/up.txt').read())\n"
         "open('/work/down.txt', 'w').write('from code')");
  EXPECT_EQ(Out(r), "uploaded uploaded\n") << Describe(r);
  auto down = S().ReadFile(id_, "down.txt", 1 << 20);
  ASSERT_TRUE(down.has_value());
  EXPECT_EQ(*down, "from code");
}

}  // namespace
}  // namespace execbox::engine
