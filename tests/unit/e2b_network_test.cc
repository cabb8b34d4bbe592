// E2B's network fields as the policy asked of the gate (api/e2b/e2b_network.h).
#include "api/e2b/e2b_network.h"

#include <gtest/gtest.h>

namespace execbox::api::e2b {
namespace {

using nlohmann::json;

engine::NetPolicy Widest() { return *engine::ParseNetPolicy({"*.example.test", "10.0.0.0/8"}, {}); }

std::vector<std::string> Texts(const std::vector<engine::NetRule>& rules) {
  std::vector<std::string> out;
  for (const auto& r : rules) out.push_back(r.text);
  return out;
}

TEST(E2bNetwork, InternetAccessIsTheWholeBoundOrNothing) {
  // The SDKs' default (true, or absent): the bound; none where it allows nothing.
  for (json body : {json::object(), json{{"allow_internet_access", true}}}) {
    auto ask = NetworkAsk(body, Widest());
    ASSERT_TRUE(ask.has_value()) << ask.error();
    ASSERT_TRUE(ask->has_value());
    EXPECT_EQ(Texts((*ask)->allow), (std::vector<std::string>{"*.example.test", "10.0.0.0/8"}));
    EXPECT_FALSE(NetworkAsk(body, engine::NetPolicy{})->has_value());
  }
  EXPECT_FALSE(NetworkAsk({{"allow_internet_access", false}}, Widest())->has_value());
  // E2B's ALL_TRAFFIC in denyOut says "nothing else".
  EXPECT_FALSE(NetworkAsk({{"network", {{"denyOut", {"0.0.0.0/0"}}}}}, Widest())->has_value());
}

TEST(E2bNetwork, AllowOutIsTheAllowListAndDenyOutTheDenyList) {
  auto ask = NetworkAsk(
      {{"allow_internet_access", false},
       {"network",
        {{"allowOut", {"a.example.test", "10.1.0.0/16"}}, {"denyOut", {"0.0.0.0/0", "10.1.2.3"}}}}},
      Widest());
  ASSERT_TRUE(ask.has_value()) << ask.error();
  ASSERT_TRUE(ask->has_value());
  EXPECT_EQ(Texts((*ask)->allow), (std::vector<std::string>{"a.example.test", "10.1.0.0/16"}));
  EXPECT_EQ(Texts((*ask)->deny), (std::vector<std::string>{"10.1.2.3"}));
  // Only denyOut, with internet: the bound less those.
  auto narrowed = NetworkAsk({{"network", {{"denyOut", {"10.1.2.3"}}}}}, Widest());
  ASSERT_TRUE(narrowed.has_value() && narrowed->has_value());
  EXPECT_EQ((*narrowed)->allow.size(), 2u);
  EXPECT_EQ(Texts((*narrowed)->deny), (std::vector<std::string>{"10.1.2.3"}));
}

TEST(E2bNetwork, WhatCannotBeHadIsSaid) {
  auto error = [](json body) {
    auto ask = NetworkAsk(body, Widest());
    return ask.has_value() ? std::string("accepted") : ask.error();
  };
  EXPECT_NE(error({{"allow_internet_access", "yes"}}).find("allow_internet_access"), std::string::npos);
  EXPECT_NE(error({{"network", "all"}}).find("network"), std::string::npos);
  EXPECT_NE(error({{"network", {{"allowOut", "a.test"}}}}).find("network.allowOut"), std::string::npos);
  EXPECT_NE(error({{"network", {{"allowOut", {1}}}}}).find("network.allowOut"), std::string::npos);
  EXPECT_NE(error({{"network", {{"allowOut", {"bad name"}}}}}).find("bad name"), std::string::npos);
  EXPECT_NE(error({{"network", {{"maskRequestHost", "x"}}}}).find("maskRequestHost"), std::string::npos);
  EXPECT_NE(error({{"network", {{"allowPublicTraffic", true}}}}).find("allowPublicTraffic"),
            std::string::npos);
  EXPECT_EQ(error({{"network", {{"allowPublicTraffic", false}}}}), "accepted");
}

}  // namespace
}  // namespace execbox::api::e2b
