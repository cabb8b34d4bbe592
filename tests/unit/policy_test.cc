#include "jail/policy.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "base/io.h"
#include "jail/child_plan.h"

namespace execbox::jail {
namespace {

TEST(ValidateRelativeName, AcceptsPlainAndNestedNames) {
  EXPECT_TRUE(ValidateRelativeName("data.csv"));
  EXPECT_TRUE(ValidateRelativeName("out/plot.png"));
  EXPECT_TRUE(ValidateRelativeName("..hidden"));
}

TEST(ValidateRelativeName, RefusesTraversalAbsoluteAndControlCharacters) {
  EXPECT_FALSE(ValidateRelativeName(""));
  EXPECT_FALSE(ValidateRelativeName("/etc/passwd"));
  EXPECT_FALSE(ValidateRelativeName("../x"));
  EXPECT_FALSE(ValidateRelativeName("a/../../x"));
  EXPECT_FALSE(ValidateRelativeName("a//b"));
  EXPECT_FALSE(ValidateRelativeName("./a"));
  EXPECT_FALSE(ValidateRelativeName(std::string("a\0b", 3)));
  EXPECT_FALSE(ValidateRelativeName("a\nb"));
  EXPECT_FALSE(ValidateRelativeName(std::string(300, 'a')));
}

TEST(Validate, RefusesRootInsideAndRelativeArgv) {
  Policy p;
  p.argv = {"/usr/bin/python3"};
  EXPECT_TRUE(Validate(p));
  p.uid = 0;
  EXPECT_FALSE(Validate(p));
  p.uid = 1000;
  p.argv = {"python3"};
  EXPECT_FALSE(Validate(p));
}

TEST(Validate, TheWorkDirAliasIsAPlaceOfItsOwn) {
  Policy p;
  p.argv = {"/usr/bin/python3"};
  EXPECT_EQ(p.work_dir, "/home/user");
  EXPECT_EQ(p.work_dir_alias, "/work");
  EXPECT_TRUE(Validate(p));
  for (const char* bad : {"work", "/", "/home/user", "/home/user/work", "/home", "/a/../work"}) {
    p.work_dir_alias = bad;
    EXPECT_FALSE(Validate(p)) << bad;
  }
  p.work_dir_alias = "";  // none
  EXPECT_TRUE(Validate(p));
}

// The home is the work dir's tmpfs; /work is a link to it in the root, and writes are allowed
// beneath the home (the link leads there), not at a second place.
TEST(BuildChildPlan, TheHomeIsTheWorkDirAndWorkLinksToIt) {
  Policy p;
  p.argv = {"/usr/bin/python3"};
  auto plan = BuildChildPlan(p, false);
  ASSERT_TRUE(plan) << plan.error().message;
  EXPECT_STREQ(plan->work_dir, "/home/user");
  const std::string staged = plan->staging_root;
  int home_tmpfs = 0, links = 0, at_work = 0;
  for (const MountOp& op : plan->mounts) {
    const std::string target = op.target;
    if (op.kind == MountOp::Kind::kTmpfs && target == staged + "/home/user") ++home_tmpfs;
    if (target == staged + "/work") {
      ++at_work;
      if (op.kind == MountOp::Kind::kSymlink && std::string(op.source) == "/home/user") ++links;
    }
  }
  EXPECT_EQ(home_tmpfs, 1);
  EXPECT_EQ(links, 1);
  EXPECT_EQ(at_work, 1) << "nothing but the link at /work";
  const auto& writable = plan->landlock.writable;
  EXPECT_NE(std::find(writable.begin(), writable.end(), "/home/user"), writable.end());
  EXPECT_EQ(std::find(writable.begin(), writable.end(), "/work"), writable.end());

  p.work_dir_alias = "";
  plan = BuildChildPlan(p, false);
  ASSERT_TRUE(plan) << plan.error().message;
  for (const MountOp& op : plan->mounts) EXPECT_NE(std::string(op.target), staged + "/work");
}

TEST(ParseSize, UnderstandsUnits) {
  EXPECT_EQ(*ParseSize("4096"), 4096u);
  EXPECT_EQ(*ParseSize("64K"), 64u << 10);
  EXPECT_EQ(*ParseSize("256M"), 256u << 20);
  EXPECT_EQ(*ParseSize("1GiB"), 1ull << 30);
  EXPECT_FALSE(ParseSize("lots"));
  EXPECT_FALSE(ParseSize("12Q"));
  EXPECT_FALSE(ParseSize("99999999999999999999G"));
}

}  // namespace
}  // namespace execbox::jail
