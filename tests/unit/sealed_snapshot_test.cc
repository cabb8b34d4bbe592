// Sealed snapshots: what the server wrote comes back exactly; anything else -- a changed byte
// anywhere, a cut, another server's key, junk -- is refused before any of it is used.
#include "engine/sealed_snapshot.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "engine/limit_schema.h"
#include "engine/snapshot_shelf.h"

namespace execbox::engine {
namespace {

SealedSession Sample() {
  SealedSession s{.owner = "alice", .id = "s_0123456789abcdef0123456789abcdef", .checkpoint = true};
  s.limits.memory_bytes = 512ull << 20;
  s.limits.wall_time = std::chrono::seconds(12);
  s.generation = 2;
  s.executions = 7;
  s.created_unix = 1'700'000'000;
  s.last_used_unix = 1'700'000'100;
  s.state = SealedSession::State::kCheckpoint;
  s.included = 6;
  return s;
}

TEST(SealedSnapshot, WhatWasSealedComesBack) {
  auto key = SnapshotKey::Ephemeral();
  ASSERT_TRUE(key.has_value());
  const std::string body("\x80\x05pickled\0bytes", 16);
  auto u = Unseal(Seal(Sample(), body, *key), *key, jail::Limits{});
  ASSERT_TRUE(u.has_value()) << u.error().message;
  EXPECT_EQ(u->body, body);
  EXPECT_EQ(u->session.owner, "alice");
  EXPECT_EQ(u->session.id, Sample().id);
  EXPECT_TRUE(u->session.checkpoint);
  EXPECT_EQ(u->session.limits.memory_bytes, 512ull << 20);
  EXPECT_EQ(u->session.limits.wall_time, std::chrono::seconds(12));
  EXPECT_EQ(u->session.generation, 2u);
  EXPECT_EQ(u->session.executions, 7u);
  EXPECT_EQ(u->session.included, 6u);
  EXPECT_EQ(u->session.state, SealedSession::State::kCheckpoint);
  EXPECT_EQ(u->session.created_unix, 1'700'000'000);
  EXPECT_FALSE(u->session.network.has_value());
}

TEST(SealedSnapshot, ANetworkPolicyComesBackAsWritten) {
  auto key = SnapshotKey::Ephemeral();
  ASSERT_TRUE(key.has_value());
  SealedSession s = Sample();
  auto policy = ParseNetPolicy({"*.example.test:443", "10.1.2.0/24"}, {"secret.example.test"});
  ASSERT_TRUE(policy.has_value());
  s.network = *policy;
  auto u = Unseal(Seal(s, "body", *key), *key, jail::Limits{});
  ASSERT_TRUE(u.has_value()) << u.error().message;
  ASSERT_TRUE(u->session.network.has_value());
  ASSERT_EQ(u->session.network->allow.size(), 2u);
  EXPECT_EQ(u->session.network->allow[0].text, "*.example.test:443");
  EXPECT_EQ(u->session.network->allow[1].text, "10.1.2.0/24");
  ASSERT_EQ(u->session.network->deny.size(), 1u);
  EXPECT_EQ(u->session.network->deny[0].text, "secret.example.test");
}

TEST(SealedSnapshot, AnyChangeCutOrOtherKeyIsRefused) {
  auto key = SnapshotKey::Ephemeral(), other = SnapshotKey::Ephemeral();
  ASSERT_TRUE(key.has_value() && other.has_value());
  const std::string sealed = Seal(Sample(), std::string(300, 'b'), *key);
  for (size_t at = 0; at < sealed.size(); at += 7) {
    std::string changed = sealed;
    changed[at] = static_cast<char>(changed[at] ^ 0x20);
    EXPECT_FALSE(Unseal(changed, *key, {}).has_value()) << "a change at byte " << at << " was accepted";
  }
  for (size_t cut : {size_t{0}, size_t{8}, sealed.size() / 2, sealed.size() - 1}) {
    EXPECT_FALSE(Unseal(sealed.substr(0, cut), *key, {}).has_value()) << cut;
  }
  auto foreign = Unseal(sealed, *other, {});
  ASSERT_FALSE(foreign.has_value());
  EXPECT_NE(foreign.error().message.find("snapshot key"), std::string::npos) << foreign.error().message;
  EXPECT_FALSE(Unseal("EXBSEAL1" + std::string(100, '\0'), *key, {}).has_value());
  EXPECT_FALSE(Unseal(sealed + "x", *key, {}).has_value());
}

TEST(SealedSnapshot, TheKeyFileIsMadeOwnerOnlyAndKept) {
  auto dir = std::filesystem::temp_directory_path() / ("execbox-key-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "snapshot.key").string();
  auto made = SnapshotKey::LoadOrCreate(path);
  ASSERT_TRUE(made.has_value()) << made.error().message;
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto again = SnapshotKey::LoadOrCreate(path);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->bytes(), made->bytes());
  ::chmod(path.c_str(), 0644);
  EXPECT_FALSE(SnapshotKey::LoadOrCreate(path).has_value());  // readable by others: not trusted
  std::filesystem::remove_all(dir);
}

// The shelf of kept snapshots (snapshot_shelf.h): by owner, by id or name, a name's second
// put is the same snapshot's new content, and a directory gives back what it was given,
// refusing a file whose owner cannot be read.
Expected<std::string> OwnerOfText(std::string_view sealed) {
  if (sealed.starts_with("owner=")) return std::string(sealed.substr(6, sealed.find(';') - 6));
  return Fail("not sealed here");
}

TEST(SnapshotShelf, KeepsEachOwnersSnapshotsByIdAndNameAndComesBackFromItsDirectory) {
  char tmpl[] = "/tmp/execbox-shelf-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = std::string(tmpl) + "/snapshots";
  {
    auto shelf = SnapshotShelf::Open(dir, OwnerOfText);
    ASSERT_TRUE(shelf.has_value()) << shelf.error().message;
    auto a = (*shelf)->Put("alice", "s_1", std::nullopt, "owner=alice;one");
    ASSERT_TRUE(a.has_value()) << a.error().message;
    EXPECT_TRUE(a->id.starts_with("snap_"));
    EXPECT_TRUE(a->names.empty());
    auto named = (*shelf)->Put("alice", "s_1", "my-snap", "owner=alice;two");
    ASSERT_TRUE(named.has_value());
    EXPECT_NE(named->id, a->id);
    EXPECT_EQ(named->names, std::vector<std::string>{"my-snap"});
    // The same name again: the same snapshot, its content replaced.
    auto again = (*shelf)->Put("alice", "s_2", "my-snap", "owner=alice;three");
    ASSERT_TRUE(again.has_value());
    EXPECT_EQ(again->id, named->id);
    EXPECT_EQ(*(*shelf)->Find("alice", "my-snap")->sealed, "owner=alice;three");
    // Another owner neither sees alice's nor takes her name.
    EXPECT_FALSE((*shelf)->Find("bob", "my-snap").has_value());
    EXPECT_FALSE((*shelf)->Find("bob", a->id).has_value());
    EXPECT_FALSE((*shelf)->Remove("bob", a->id));
    auto bobs = (*shelf)->Put("bob", "s_3", "my-snap", "owner=bob;x");
    ASSERT_TRUE(bobs.has_value());
    EXPECT_NE(bobs->id, named->id);
    EXPECT_EQ((*shelf)->List("alice").size(), 2u);
    EXPECT_EQ((*shelf)->BytesOf("alice"),
              std::string("owner=alice;one").size() + std::string("owner=alice;three").size());
    EXPECT_EQ((*shelf)->CountOf("bob"), 1u);
    EXPECT_FALSE((*shelf)->Put("alice", "s_1", "with space", "owner=alice;y").has_value());
    EXPECT_FALSE((*shelf)->Put("alice", "s_1", "", "owner=alice;y").has_value());
    EXPECT_TRUE((*shelf)->Remove("alice", a->id));
    EXPECT_FALSE((*shelf)->Find("alice", a->id).has_value());
  }
  // A file no seal vouches for is refused (renamed aside), the rest come back.
  { std::ofstream(dir + "/snap_0123456789abcdef01234567.snapshot") << "forged"; }
  auto shelf = SnapshotShelf::Open(dir, OwnerOfText);
  ASSERT_TRUE(shelf.has_value());
  auto alice = (*shelf)->List("alice");
  ASSERT_EQ(alice.size(), 1u);
  EXPECT_EQ(alice[0].names, std::vector<std::string>{"my-snap"});
  EXPECT_EQ(alice[0].source, "s_2");
  EXPECT_EQ(*alice[0].sealed, "owner=alice;three");
  EXPECT_EQ((*shelf)->List("bob").size(), 1u);
  EXPECT_TRUE(std::filesystem::exists(dir + "/snap_0123456789abcdef01234567.snapshot.refused"));
  std::filesystem::remove_all(tmpl);
}

}  // namespace
}  // namespace execbox::engine
