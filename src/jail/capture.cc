#include "jail/capture.h"

namespace execbox::jail {

void Capture::Append(std::string_view data) {
  total_ += data.size();
  if (head_.size() < head_cap_) {
    size_t take = std::min<size_t>(data.size(), head_cap_ - head_.size());
    head_.append(data.substr(0, take));
    data.remove_prefix(take);
  }
  if (tail_cap_ == 0 || data.empty()) return;
  if (data.size() >= tail_cap_) {
    ring_.assign(data.substr(data.size() - tail_cap_));
    ring_start_ = 0;
    return;
  }
  for (char c : data) {
    if (ring_.size() < tail_cap_) {
      ring_.push_back(c);
    } else {
      ring_[ring_start_] = c;
      ring_start_ = (ring_start_ + 1) % tail_cap_;
    }
  }
}

std::string Capture::tail() const { return ring_.substr(ring_start_) + ring_.substr(0, ring_start_); }

std::string Capture::Text(std::string_view marker) const {
  std::string out = head_;
  if (truncated()) out.append(marker);
  out.append(tail());
  return out;
}

}  // namespace execbox::jail
