#include "engine/fair_queue.h"

#include <algorithm>

namespace execbox::engine {

void FairQueue::Push(const std::string& caller, uint64_t seq) {
  auto& mine = waiting_[caller];
  if (mine.empty()) turns_.push_back(caller);  // a caller new to the queue waits one round at most
  mine.push_back(seq);
  ++size_;
}

std::optional<std::pair<std::string, uint64_t>> FairQueue::Pop() {
  if (turns_.empty()) return std::nullopt;
  std::string caller = std::move(turns_.front());
  turns_.pop_front();
  auto it = waiting_.find(caller);
  const uint64_t seq = it->second.front();
  it->second.pop_front();
  --size_;
  if (it->second.empty()) {
    waiting_.erase(it);
  } else {
    turns_.push_back(caller);  // its next one waits for every other caller's turn
  }
  return std::pair{std::move(caller), seq};
}

bool FairQueue::Remove(const std::string& caller, uint64_t seq) {
  auto it = waiting_.find(caller);
  if (it == waiting_.end()) return false;
  auto at = std::find(it->second.begin(), it->second.end(), seq);
  if (at == it->second.end()) return false;
  it->second.erase(at);
  --size_;
  if (it->second.empty()) {
    waiting_.erase(it);
    turns_.erase(std::find(turns_.begin(), turns_.end(), caller));
  }
  return true;
}

size_t FairQueue::size(const std::string& caller) const {
  auto it = waiting_.find(caller);
  return it == waiting_.end() ? 0 : it->second.size();
}

}  // namespace execbox::engine
