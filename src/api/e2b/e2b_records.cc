// What E2B keeps of a sandbox beside its session (e2b_sandbox.h: its access token, template,
// metadata, environment, contexts), kept across a restart of the server when its sessions are
// (E2bOptions::state_dir): one file per sandbox, "<state dir>/e2b/<id>.json", mode 0600 in a
// directory of the server's own, so that an SDK holding a sandbox goes on with it after the
// server came back (its token unchanged). A record whose session did not come back is dropped.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>

#include "api/e2b/e2b_api.h"
#include "api/e2b/e2b_sandbox.h"
#include "base/io.h"
#include "base/replace_file.h"
#include "engine/session_store.h"

namespace execbox::api::e2b {
namespace {

constexpr std::string_view kSuffix = ".json";

int64_t MillisOf(std::chrono::system_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

}  // namespace

std::string E2bApi::RecordDir() const {
  return options_.state_dir.empty() ? "" : options_.state_dir + "/e2b";
}

void E2bApi::Keep(Sandbox& s) {
  const std::string dir = RecordDir();
  if (dir.empty() || !engine::IsSessionId(s.id)) return;
  nlohmann::json j{{"id", s.id},
                   {"key", s.key_id},
                   {"token", s.token},
                   {"template", s.template_id},
                   {"metadata", s.metadata},
                   {"env", s.env},
                   {"started_ms", MillisOf(s.started)}};
  {
    std::lock_guard lock(s.mu);
    nlohmann::json contexts = nlohmann::json::array();
    for (const auto& [id, c] : s.contexts) {
      contexts.push_back({{"id", c.id},
                          {"cwd", c.cwd},
                          {"language", LanguageName(c.language)},
                          {"language_default", c.language_default}});
    }
    j["contexts"] = std::move(contexts);
    j["file_metadata"] = s.file_metadata;
  }
  // One writer at a time: a context made and one removed at once leave the later record.
  std::lock_guard lock(records_mu_);
  if (auto written = ReplaceFile(dir + "/" + s.id + std::string(kSuffix), j.dump()); !written)
    std::fprintf(stderr, "execbox: E2B sandbox %s not kept: %s\n", s.id.c_str(),
                 written.error().message.c_str());
}

void E2bApi::Unkeep(const std::string& id) {
  const std::string dir = RecordDir();
  if (dir.empty() || !engine::IsSessionId(id)) return;
  std::lock_guard lock(records_mu_);
  ::unlink((dir + "/" + id + std::string(kSuffix)).c_str());
}

void E2bApi::TakeBack() {
  const std::string dir = RecordDir();
  if (dir.empty()) return;
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    std::fprintf(stderr,
                 "execbox: the E2B record dir cannot be made; sandboxes will not outlive a restart\n");
    return;
  }
  auto ids = NamesEndingIn(dir, kSuffix);
  if (!ids) return;
  for (const auto& id : *ids) {
    if (!engine::IsSessionId(id)) continue;
    const std::string path = dir + "/" + id + std::string(kSuffix);
    auto text = ReadFile(path, 1 << 20);
    auto j = text ? nlohmann::json::parse(*text, nullptr, false) : nlohmann::json();
    auto s = std::make_shared<Sandbox>();
    try {
      if (!j.is_object()) throw std::runtime_error("not a record");
      s->id = j.at("id").get<std::string>();
      s->key_id = j.at("key").get<std::string>();
      s->token = j.at("token").get<std::string>();
      s->template_id = j.at("template").get<std::string>();
      s->metadata = j.at("metadata");
      s->env = j.at("env").get<std::map<std::string, std::string>>();
      s->started =
          std::chrono::system_clock::time_point(std::chrono::milliseconds(j.at("started_ms").get<int64_t>()));
      for (const auto& c : j.at("contexts")) {
        // A kernel's state does not outlive its process: its context comes back empty.
        const auto language = LanguageOf(c.value("language", nlohmann::json()));
        if (!language) throw std::runtime_error("not a context");
        Sandbox::Context& context = s->contexts[c.at("id").get<std::string>()];
        context = {.id = c.at("id").get<std::string>(),
                   .cwd = c.at("cwd").get<std::string>(),
                   .language = *language,
                   .language_default = c.value("language_default", false)};
        if (*language != Language::kPython) context.kernel = std::make_shared<Sandbox::Kernel>();
      }
      if (j.contains("file_metadata"))
        s->file_metadata =
            j["file_metadata"].get<std::map<std::string, std::map<std::string, std::string>>>();
    } catch (const std::exception&) {
      std::fprintf(stderr, "execbox: E2B record %s.json dropped: it cannot be read\n", id.c_str());
      ::unlink(path.c_str());
      continue;
    }
    // Its session must have come back, as its key's: otherwise the record is of nothing.
    const engine::Caller owner{.id = s->key_id};
    engine::Refused<engine::SessionInfo> info = engine::Refuse(engine::RefusalReason::kSessionNotFound, "");
    if (s->id == id && !s->token.empty()) info = gate_.Session(owner, s->id);
    if (!info) {
      ::unlink(path.c_str());
      continue;
    }
    s->contexts.try_emplace(kDefaultContext, Sandbox::Context{.id = kDefaultContext, .cwd = ""});
    s->end_at = info->expires.value_or(std::chrono::system_clock::now() + options_.default_timeout);
    std::lock_guard lock(mu_);
    sandboxes_[s->id] = std::move(s);
  }
}

}  // namespace execbox::api::e2b
