// base/gzip.h: what /files inflates from a client and deflates for one (E2B's gzip option).
#include "base/gzip.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

namespace execbox {
namespace {

TEST(Gzip, RoundTripsTextBinaryAndNothing) {
  std::string binary;
  std::mt19937 random(7);
  for (int i = 0; i < 300000; ++i) binary.push_back(static_cast<char>(random()));
  for (const std::string& data : {std::string(), std::string("hello\n"), std::string(1 << 20, 'a'), binary}) {
    const std::string packed = Gzip(data);
    ASSERT_GE(packed.size(), 18u) << "a header and a trailer at least";
    EXPECT_EQ(static_cast<unsigned char>(packed[0]), 0x1f);
    EXPECT_EQ(static_cast<unsigned char>(packed[1]), 0x8b);
    auto back = Gunzip(packed, data.size());
    ASSERT_TRUE(back.has_value()) << back.error().message;
    EXPECT_EQ(*back, data);
  }
  EXPECT_LT(Gzip(std::string(1 << 20, 'a')).size(), 10000u);
}

TEST(Gzip, ConcatenatedMembersAreOneContent) {
  auto back = Gunzip(Gzip("one ") + Gzip("two"), 100);
  ASSERT_TRUE(back.has_value()) << back.error().message;
  EXPECT_EQ(*back, "one two");
}

TEST(Gzip, ABombIsRefusedAtTheCapNotHeld) {
  const std::string bomb = Gzip(std::string(64 << 20, '\0'));
  EXPECT_LT(bomb.size(), 400000u) << "compressed for speed, still 200 to 1";
  auto refused = Gunzip(bomb, 1 << 20);
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().kind, GunzipError::kTooLarge);
  EXPECT_NE(refused.error().message.find("1048576"), std::string::npos) << refused.error().message;
  EXPECT_TRUE(Gunzip(bomb, 64 << 20).has_value()) << "exactly at the cap is taken";
}

TEST(Gzip, MalformedAndTruncatedDataAreRefused) {
  const std::string packed = Gzip("some content that is long enough to be cut");
  for (const std::string& bad : {std::string("not gzip at all"), packed.substr(0, packed.size() - 4),
                                 packed.substr(0, 10), std::string(), packed + "trailing junk"}) {
    auto refused = Gunzip(bad, 1 << 20);
    ASSERT_FALSE(refused.has_value()) << bad.size();
    EXPECT_EQ(refused.error().kind, GunzipError::kMalformed);
  }
}

TEST(Gzip, AcceptEncodingIsReadAsRfc9110Says) {
  EXPECT_TRUE(AcceptsGzip("gzip"));
  EXPECT_TRUE(AcceptsGzip("br, GZIP;q=0.5"));
  EXPECT_TRUE(AcceptsGzip("x-gzip"));
  EXPECT_TRUE(AcceptsGzip("*"));
  EXPECT_TRUE(AcceptsGzip("deflate, gzip ; q=1.0"));
  EXPECT_FALSE(AcceptsGzip(""));
  EXPECT_FALSE(AcceptsGzip("identity"));
  EXPECT_FALSE(AcceptsGzip("gzip;q=0"));
  EXPECT_FALSE(AcceptsGzip("gzip; q=0.000"));
  EXPECT_FALSE(AcceptsGzip("*;q=0"));
  EXPECT_FALSE(AcceptsGzip("gzipx, br"));
  EXPECT_FALSE(AcceptsGzip("*, gzip;q=0")) << "gzip named and refused outweighs *";
}

}  // namespace
}  // namespace execbox
