#include "engine/snapshot_shelf.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "base/io.h"
#include "base/random.h"
#include "base/replace_file.h"

namespace execbox::engine {
namespace {

constexpr std::string_view kSnapshotSuffix = ".snapshot";
constexpr std::string_view kMetaSuffix = ".meta";
constexpr size_t kMaxSnapshotBytes = 16ull << 30;
constexpr size_t kMaxMetaBytes = 64 << 10;

// Ids are ours ("snap_" and hex): nothing else in the directory is a snapshot.
bool PlainId(std::string_view id) {
  if (id.size() < 6 || id.size() > 64 || !id.starts_with("snap_")) return false;
  return std::all_of(id.begin() + 5, id.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

int64_t UnixOf(std::chrono::system_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::seconds>(t.time_since_epoch()).count();
}

void Refuse(const std::string& path, const std::string& why) {
  std::fprintf(stderr, "execbox: snapshot file %s refused: %s\n", path.c_str(), why.c_str());
  ::rename(path.c_str(), (path + ".refused").c_str());
}

}  // namespace

execbox::Status SnapshotShelf::CheckName(const std::string& name) {
  if (name.empty() || name.size() > 128) return Fail("a snapshot's name is 1 to 128 characters");
  for (unsigned char c : name) {
    if (c <= ' ' || c >= 0x7f) return Fail("a snapshot's name is printable ASCII without spaces");
  }
  return {};
}

Expected<std::unique_ptr<SnapshotShelf>> SnapshotShelf::Open(const std::string& dir,
                                                             const OwnerOf& owner_of) {
  std::unique_ptr<SnapshotShelf> shelf(new SnapshotShelf());
  if (dir.empty()) return shelf;
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return FailErrno("create the snapshot dir " + dir);
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) return FailErrno("the snapshot dir " + dir);
  if (!S_ISDIR(st.st_mode)) return Fail("the snapshot dir " + dir + " is not a directory");
  shelf->dir_ = dir;
  auto ids = NamesEndingIn(dir, kSnapshotSuffix);
  if (!ids) return std::unexpected(ids.error());
  for (const auto& id : *ids) {
    if (!PlainId(id)) continue;
    const std::string path = dir + "/" + id + std::string(kSnapshotSuffix);
    if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
      Refuse(path, "not a regular file");
      continue;
    }
    auto sealed = ReadFile(path, kMaxSnapshotBytes);
    if (!sealed) {
      Refuse(path, sealed.error().message);
      continue;
    }
    auto owner = owner_of(*sealed);
    if (!owner) {
      Refuse(path, owner.error().message);
      continue;
    }
    ShelvedSnapshot s{.id = id, .owner = *owner};
    s.created = std::chrono::system_clock::from_time_t(st.st_mtime);
    // What the meta file adds (names, source, created) is description only: a missing or
    // unreadable one leaves the snapshot usable, without a name.
    if (auto meta = ReadFile(dir + "/" + id + std::string(kMetaSuffix), kMaxMetaBytes); meta) {
      auto j = nlohmann::json::parse(*meta, nullptr, false);
      if (j.is_object()) {
        if (j.contains("names") && j["names"].is_array()) {
          for (const auto& n : j["names"]) {
            if (n.is_string() && CheckName(n.get<std::string>())) s.names.push_back(n.get<std::string>());
          }
        }
        if (j.contains("source") && j["source"].is_string()) s.source = j["source"].get<std::string>();
        if (j.contains("created_unix") && j["created_unix"].is_number_integer())
          s.created = std::chrono::system_clock::from_time_t(j["created_unix"].get<int64_t>());
      }
    }
    s.sealed = std::make_shared<const std::string>(std::move(*sealed));
    shelf->snapshots_[id] = std::move(s);
  }
  return shelf;
}

execbox::Status SnapshotShelf::Write(const ShelvedSnapshot& s) const {
  if (dir_.empty()) return {};
  const nlohmann::json meta{{"names", s.names}, {"source", s.source}, {"created_unix", UnixOf(s.created)}};
  if (auto w = ReplaceFile(dir_ + "/" + s.id + std::string(kMetaSuffix), meta.dump()); !w) return w;
  return ReplaceFile(dir_ + "/" + s.id + std::string(kSnapshotSuffix), *s.sealed);
}

const ShelvedSnapshot* SnapshotShelf::FindLocked(const std::string& owner,
                                                 const std::string& id_or_name) const {
  if (auto it = snapshots_.find(id_or_name); it != snapshots_.end() && it->second.owner == owner)
    return &it->second;
  for (const auto& [id, s] : snapshots_) {
    if (s.owner == owner && std::find(s.names.begin(), s.names.end(), id_or_name) != s.names.end()) return &s;
  }
  return nullptr;
}

Expected<ShelvedSnapshot> SnapshotShelf::Put(const std::string& owner, const std::string& source,
                                             const std::optional<std::string>& name, std::string sealed) {
  if (name) {
    if (auto ok = CheckName(*name); !ok) return std::unexpected(ok.error());
  }
  ShelvedSnapshot s{.owner = owner, .source = source, .created = std::chrono::system_clock::now()};
  if (name) s.names.push_back(*name);
  s.sealed = std::make_shared<const std::string>(std::move(sealed));
  std::lock_guard lock(mu_);
  if (const ShelvedSnapshot* same = name ? FindLocked(owner, *name) : nullptr) {
    s.id = same->id;
  } else {
    auto hex = RandomHex(12);
    if (!hex) return std::unexpected(hex.error());
    s.id = "snap_" + *hex;
  }
  // Written while the lock is held: two puts of one name never interleave their files.
  if (auto written = Write(s); !written) return std::unexpected(written.error());
  snapshots_[s.id] = s;
  return s;
}

std::optional<ShelvedSnapshot> SnapshotShelf::Find(const std::string& owner,
                                                   const std::string& id_or_name) const {
  std::lock_guard lock(mu_);
  const ShelvedSnapshot* s = FindLocked(owner, id_or_name);
  if (s == nullptr) return std::nullopt;
  return *s;
}

std::vector<ShelvedSnapshot> SnapshotShelf::List(const std::string& owner) const {
  std::vector<ShelvedSnapshot> out;
  {
    std::lock_guard lock(mu_);
    for (const auto& [id, s] : snapshots_) {
      if (s.owner == owner) out.push_back(s);
    }
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return a.created != b.created ? a.created < b.created : a.id < b.id;
  });
  return out;
}

bool SnapshotShelf::Remove(const std::string& owner, const std::string& id_or_name) {
  std::lock_guard lock(mu_);
  const ShelvedSnapshot* s = FindLocked(owner, id_or_name);
  if (s == nullptr) return false;
  const std::string id = s->id;
  if (!dir_.empty()) {
    ::unlink((dir_ + "/" + id + std::string(kSnapshotSuffix)).c_str());
    ::unlink((dir_ + "/" + id + std::string(kMetaSuffix)).c_str());
  }
  snapshots_.erase(id);
  return true;
}

uint64_t SnapshotShelf::BytesOf(const std::string& owner) const {
  std::lock_guard lock(mu_);
  uint64_t bytes = 0;
  for (const auto& [id, s] : snapshots_) {
    if (s.owner == owner) bytes += s.bytes();
  }
  return bytes;
}

std::map<std::string, uint64_t> SnapshotShelf::Bytes() const {
  std::lock_guard lock(mu_);
  std::map<std::string, uint64_t> out;
  for (const auto& [id, s] : snapshots_) out[s.owner] += s.bytes();
  return out;
}

size_t SnapshotShelf::CountOf(const std::string& owner) const {
  std::lock_guard lock(mu_);
  return std::count_if(snapshots_.begin(), snapshots_.end(),
                       [&](const auto& e) { return e.second.owner == owner; });
}

}  // namespace execbox::engine
