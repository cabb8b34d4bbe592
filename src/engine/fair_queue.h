// The admission queue, shared fairly between callers: round robin by caller (deficit round
// robin with every execution costing one, since what an execution costs is known only after it
// ran). Each caller's waiters leave in their order of arrival; a caller with a thousand waiting
// is served one turn in every round, so a key that floods waits behind itself, not the others.
// Not thread-safe: Admission holds its lock around it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <utility>

namespace execbox::engine {

class FairQueue {
 public:
  void Push(const std::string& caller, uint64_t seq);
  // The next waiter to run: the oldest of the caller whose turn it is; nullopt when empty.
  std::optional<std::pair<std::string, uint64_t>> Pop();
  // A waiter that leaves before its turn (cancelled, shut down); false when not queued.
  bool Remove(const std::string& caller, uint64_t seq);
  size_t size() const { return size_; }
  size_t size(const std::string& caller) const;
  bool empty() const { return size_ == 0; }

 private:
  std::map<std::string, std::deque<uint64_t>> waiting_;  // per caller, oldest first; never empty
  std::deque<std::string> turns_;                        // callers with waiters, next turn first
  size_t size_ = 0;
};

}  // namespace execbox::engine
