// Bounded capture of one output stream: the first and the last bytes are kept, the middle is
// counted and dropped, so a program writing 10 GB costs the host no more than the cap.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace execbox::jail {

class Capture {
 public:
  explicit Capture(uint64_t cap) : head_cap_(cap - cap / 4), tail_cap_(cap / 4) {}

  void Append(std::string_view data);

  uint64_t total_bytes() const { return total_; }
  bool truncated() const { return total_ > head_cap_ + tail_cap_; }
  uint64_t dropped_bytes() const { return truncated() ? total_ - head_.size() - ring_.size() : 0; }
  // Head and tail joined; when bytes were dropped, `marker` stands between them.
  std::string Text(std::string_view marker) const;
  const std::string& head() const { return head_; }
  std::string tail() const;

 private:
  uint64_t head_cap_;
  uint64_t tail_cap_;
  uint64_t total_ = 0;
  std::string head_;
  std::string ring_;       // the last tail_cap_ bytes, as a ring
  size_t ring_start_ = 0;  // index of the oldest byte once the ring is full
};

}  // namespace execbox::jail
