// What each owner's sessions hold (sessions.h, UseOf), for the caps per key and /metrics.
#include "engine/session_record.h"
#include "engine/sessions.h"

namespace execbox::engine {

void Sessions::CountState(Session& s) {
  uint64_t bytes = 0;
  if (s.undo) bytes += s.undo->blob.size();
  if (s.saved) bytes += s.saved->body.size();
  s.state_bytes = bytes;
}

void Sessions::AddUse(Session& s, KeyUse& use) {
  ++use.sessions;
  use.processes += s.processes->running();
  // A running execution holds run_mu: its session counts as it was when last counted.
  if (std::unique_lock run(s.run_mu, std::try_to_lock); run.owns_lock()) CountState(s);
  use.session_state_bytes += s.state_bytes.load();
}

KeyUse Sessions::UseOf(const std::string& owner) {
  std::vector<std::shared_ptr<Session>> mine;
  {
    std::lock_guard lock(mu_);
    for (auto& [id, s] : sessions_) {
      if (s->owner == owner) mine.push_back(s);
    }
  }
  KeyUse use;
  for (auto& s : mine) AddUse(*s, use);
  if (shelf_) use.session_state_bytes += shelf_->BytesOf(owner);
  return use;
}

std::map<std::string, KeyUse> Sessions::Use() {
  std::vector<std::shared_ptr<Session>> all;
  {
    std::lock_guard lock(mu_);
    for (auto& [id, s] : sessions_) all.push_back(s);
  }
  std::map<std::string, KeyUse> use;
  for (auto& s : all) AddUse(*s, use[s->owner]);
  if (shelf_) {
    for (const auto& [owner, bytes] : shelf_->Bytes()) use[owner].session_state_bytes += bytes;
  }
  return use;
}

bool Sessions::Checkpoints(const std::string& owner, const std::string& id) {
  auto s = Find(owner, id);
  return s != nullptr && s->checkpoint;  // set before the session was published
}

}  // namespace execbox::engine
