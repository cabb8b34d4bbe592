#include "jail/capture.h"

#include <gtest/gtest.h>

namespace execbox::jail {
namespace {

TEST(Capture, KeepsEverythingUnderTheCap) {
  Capture c(100);
  c.Append("hello ");
  c.Append("world");
  EXPECT_FALSE(c.truncated());
  EXPECT_EQ(c.Text("[cut]"), "hello world");
  EXPECT_EQ(c.total_bytes(), 11u);
}

TEST(Capture, KeepsHeadAndTailAndCountsTheMiddle) {
  Capture c(100);  // 75 head + 25 tail
  std::string all;
  for (int i = 0; i < 1000; ++i) {
    std::string chunk = std::to_string(i) + ",";
    all += chunk;
    c.Append(chunk);
  }
  EXPECT_TRUE(c.truncated());
  EXPECT_EQ(c.head(), all.substr(0, 75));
  EXPECT_EQ(c.tail(), all.substr(all.size() - 25));
  EXPECT_EQ(c.dropped_bytes(), all.size() - 100);
  EXPECT_EQ(c.Text("|"), all.substr(0, 75) + "|" + all.substr(all.size() - 25));
}

TEST(Capture, OneHugeAppend) {
  Capture c(1000);
  std::string big(1'000'000, 'x');
  big.back() = 'E';
  c.Append(big);
  EXPECT_EQ(c.head().size(), 750u);
  EXPECT_EQ(c.tail().size(), 250u);
  EXPECT_EQ(c.tail().back(), 'E');
}

}  // namespace
}  // namespace execbox::jail
