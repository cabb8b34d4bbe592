#include "jail/policy.h"

#include <gtest/gtest.h>

#include "base/io.h"

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
