#include "engine/sealed_snapshot.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <nlohmann/json.hpp>

#include "base/io.h"
#include "base/random.h"
#include "base/sha256.h"
#include "base/unique_fd.h"
#include "engine/limit_schema.h"
#include "engine/result_json.h"

namespace execbox::engine {
namespace {

constexpr std::string_view kMagic = "EXBSEAL1";
constexpr size_t kKeyBytes = 32, kMacBytes = 32;
constexpr uint32_t kMaxHeaderBytes = 1u << 20;

void PutLe(std::string& out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>(value >> (8 * i)));
}

uint64_t GetLe(std::string_view in, size_t at, int bytes) {
  uint64_t value = 0;
  for (int i = 0; i < bytes; ++i)
    value |= static_cast<uint64_t>(static_cast<unsigned char>(in[at + i])) << (8 * i);
  return value;
}

const char* StateName(SealedSession::State s) {
  switch (s) {
    case SealedSession::State::kSaved:
      return "saved";
    case SealedSession::State::kCheckpoint:
      return "checkpoint";
    case SealedSession::State::kEmpty:
      break;
  }
  return "empty";
}

}  // namespace

Expected<SnapshotKey> SnapshotKey::LoadOrCreate(const std::string& path) {
  SnapshotKey key;
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd.Valid() && errno == ENOENT) {
    auto fresh = RandomBytes(kKeyBytes);
    if (!fresh) return std::unexpected(fresh.error());
    UniqueFd out(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!out.Valid()) return FailErrno("create the snapshot key " + path);
    if (auto w = WriteAll(out.Get(), *fresh); !w) return std::unexpected(w.error());
    key.bytes_ = std::move(*fresh);
    return key;
  }
  if (!fd.Valid()) return FailErrno("open the snapshot key " + path);
  struct stat st {};
  if (::fstat(fd.Get(), &st) != 0 || !S_ISREG(st.st_mode))
    return Fail("the snapshot key " + path + " is not a file");
  if ((st.st_mode & 077) != 0)
    return Fail("the snapshot key " + path + " is readable by others (it must be 0600)");
  auto bytes = ReadFile(path, 4096);
  if (!bytes) return std::unexpected(bytes.error());
  if (bytes->size() < kKeyBytes) return Fail("the snapshot key " + path + " is shorter than 32 bytes");
  key.bytes_ = std::move(*bytes);
  return key;
}

Expected<SnapshotKey> SnapshotKey::Ephemeral() {
  auto fresh = RandomBytes(kKeyBytes);
  if (!fresh) return std::unexpected(fresh.error());
  SnapshotKey key;
  key.bytes_ = std::move(*fresh);
  return key;
}

std::string Seal(const SealedSession& s, std::string_view body, const SnapshotKey& key) {
  nlohmann::json limits = nlohmann::json::object();
  for (const auto& spec : LimitTable()) limits[std::string(spec.name)] = spec.get(s.limits);
  nlohmann::json header = {{"version", 1},
                           {"owner", s.owner},
                           {"id", s.id},
                           {"limits", limits},
                           {"checkpoint", s.checkpoint},
                           {"generation", s.generation},
                           {"executions", s.executions},
                           {"created", s.created_unix},
                           {"last_used", s.last_used_unix},
                           {"state", StateName(s.state)},
                           {"included", s.included}};
  if (s.network) header["network"] = NetPolicyJson(*s.network);
  if (s.paused) header["paused"] = true;
  const std::string text = header.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::string out;
  out.reserve(kMagic.size() + 4 + text.size() + 8 + body.size() + kMacBytes);
  out += kMagic;
  PutLe(out, text.size(), 4);
  out += text;
  PutLe(out, body.size(), 8);
  out += body;
  auto mac = HmacSha256(key.bytes(), out);
  out.append(reinterpret_cast<const char*>(mac.data()), mac.size());
  return out;
}

Expected<Unsealed> Unseal(std::string_view sealed, const SnapshotKey& key, const jail::Limits& base) {
  const size_t fixed = kMagic.size() + 4 + 8 + kMacBytes;
  if (sealed.size() < fixed || sealed.substr(0, kMagic.size()) != kMagic) {
    return Fail("not an execbox session snapshot");
  }
  const std::string_view signed_part = sealed.substr(0, sealed.size() - kMacBytes);
  auto mac = HmacSha256(key.bytes(), signed_part);
  if (!SameMac(mac.data(), reinterpret_cast<const unsigned char*>(sealed.data() + signed_part.size()),
               kMacBytes)) {
    return Fail(
        "the snapshot is damaged, or was sealed by a server that does not share this one's snapshot key");
  }
  // Sealed by us: the lengths below are ours, but are checked all the same.
  const uint64_t header_len = GetLe(sealed, kMagic.size(), 4);
  if (header_len > kMaxHeaderBytes || kMagic.size() + 4 + header_len + 8 > signed_part.size()) {
    return Fail("the snapshot's header is damaged");
  }
  const size_t body_at = kMagic.size() + 4 + header_len + 8;
  const uint64_t body_len = GetLe(sealed, body_at - 8, 8);
  if (body_len != signed_part.size() - body_at) return Fail("the snapshot's body is damaged");
  auto header = nlohmann::json::parse(sealed.substr(kMagic.size() + 4, header_len), nullptr, false);
  if (!header.is_object() || header.value("version", 0) != 1)
    return Fail("the snapshot's version is not one this server reads");
  Unsealed u;
  SealedSession& s = u.session;
  try {
    s.owner = header.at("owner").get<std::string>();
    s.id = header.at("id").get<std::string>();
    s.limits = base;
    const auto& limits = header.at("limits");
    for (const auto& spec : LimitTable())
      spec.set(s.limits, limits.at(std::string(spec.name)).get<uint64_t>());
    s.checkpoint = header.at("checkpoint").get<bool>();
    s.generation = header.at("generation").get<uint64_t>();
    s.executions = header.at("executions").get<uint64_t>();
    s.created_unix = header.at("created").get<int64_t>();
    s.last_used_unix = header.at("last_used").get<int64_t>();
    const std::string state = header.at("state").get<std::string>();
    s.state = state == "saved"        ? SealedSession::State::kSaved
              : state == "checkpoint" ? SealedSession::State::kCheckpoint
                                      : SealedSession::State::kEmpty;
    s.included = header.at("included").get<uint64_t>();
    s.paused = header.value("paused", false);
    if (header.contains("network")) {
      const auto& network = header.at("network");
      auto policy = ParseNetPolicy(network.at("allow").get<std::vector<std::string>>(),
                                   network.at("deny").get<std::vector<std::string>>());
      if (!policy) return Fail("the snapshot's network policy is damaged");
      s.network = std::move(*policy);
    }
  } catch (const nlohmann::json::exception&) {
    return Fail("the snapshot's header is damaged");
  }
  if (auto valid = jail::ValidateLimits(s.limits); !valid) return Fail("the snapshot's limits are not valid");
  u.body.assign(sealed.substr(body_at, body_len));
  return u;
}

}  // namespace execbox::engine
