#include "engine/session_store.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include "base/io.h"
#include "base/replace_file.h"

namespace execbox::engine {
namespace {

constexpr std::string_view kSuffix = ".session";
constexpr size_t kMaxFileBytes = 16ull << 30;

}  // namespace

bool IsSessionId(std::string_view id) {
  if (id.size() < 3 || id.size() > 100 || !id.starts_with("s_")) return false;
  for (char c : id) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-';
    if (!ok) return false;
  }
  return id.find("..") == std::string_view::npos;
}

Expected<std::unique_ptr<SessionStore>> SessionStore::Open(const std::string& dir) {
  std::unique_ptr<SessionStore> store(new SessionStore());
  if (dir.empty()) {
    auto key = SnapshotKey::Ephemeral();
    if (!key) return std::unexpected(key.error());
    store->key_ = std::move(*key);
    return store;
  }
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
    return FailErrno("create the session state dir " + dir);
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) return FailErrno("the session state dir " + dir);
  if (!S_ISDIR(st.st_mode)) return Fail("the session state dir " + dir + " is not a directory");
  if (st.st_uid != ::geteuid()) return Fail("the session state dir " + dir + " belongs to another user");
  if ((st.st_mode & 07777) != 0700 && ::chmod(dir.c_str(), 0700) != 0) {
    return FailErrno("make the session state dir " + dir + " owner-only");
  }
  auto key = SnapshotKey::LoadOrCreate(dir + "/snapshot.key");
  if (!key) return std::unexpected(key.error());
  store->key_ = std::move(*key);
  store->dir_ = dir;
  return store;
}

std::string SessionStore::PathOf(const std::string& id) const {
  return dir_ + "/" + id + std::string(kSuffix);
}

execbox::Status SessionStore::Save(const std::string& id, std::string_view sealed) {
  if (!durable()) return {};
  if (!IsSessionId(id)) return Fail("not a session id");
  return ReplaceFile(PathOf(id), sealed);
}

void SessionStore::Remove(const std::string& id) {
  if (durable() && IsSessionId(id)) ::unlink(PathOf(id).c_str());
}

void SessionStore::Refuse(const std::string& id, const std::string& why) {
  std::fprintf(stderr, "execbox: session file %s.session refused: %s\n", id.c_str(), why.c_str());
  if (!durable() || !IsSessionId(id)) return;
  const std::string path = PathOf(id);
  ::rename(path.c_str(), (path + ".refused").c_str());
}

std::vector<SessionStore::Saved> SessionStore::LoadAll() {
  std::vector<Saved> out;
  if (!durable()) return out;
  auto names = NamesEndingIn(dir_, kSuffix);
  if (!names) return out;
  for (const auto& id : *names) {
    if (!IsSessionId(id)) continue;
    const std::string path = PathOf(id);
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
      out.push_back({id, Fail("not a regular file")});
      continue;
    }
    out.push_back({id, ReadFile(path, kMaxFileBytes)});
  }
  return out;
}

}  // namespace execbox::engine
