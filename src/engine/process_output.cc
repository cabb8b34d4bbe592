#include "engine/process_output.h"

#include <algorithm>
#include <iterator>

namespace execbox::engine {

const char* OutputStreamName(OutputStream stream) {
  switch (stream) {
    case OutputStream::kStdout:
      return "stdout";
    case OutputStream::kStderr:
      return "stderr";
    case OutputStream::kPty:
      break;
  }
  return "pty";
}

void OutputLog::Append(OutputStream stream, std::string_view data, uint64_t keep_from) {
  if (data.empty()) return;
  const auto s = static_cast<size_t>(stream);
  std::deque<Chunk>& chunks = streams_[s];
  // Small writes (a prompt, a line) join the last chunk while it is the newest output: fewer,
  // larger chunks for readers.
  if (!chunks.empty() && chunks.back().offset + chunks.back().data.size() == end_ &&
      chunks.back().data.size() + data.size() <= 16384) {
    chunks.back().data.append(data);
  } else {
    chunks.push_back({end_, std::string(data)});
  }
  end_ += data.size();
  held_[s] += data.size();
  buffered_ += data.size();
  if (held_[s] > cap_) DropFront(chunks, held_[s] - cap_, keep_from);
}

bool OutputLog::over_cap() const {
  return std::any_of(std::begin(held_), std::end(held_), [this](size_t held) { return held > cap_; });
}

void OutputLog::Trim(uint64_t keep_from) {
  for (size_t s = 0; s < 3; ++s) {
    if (held_[s] > cap_) DropFront(streams_[s], held_[s] - cap_, keep_from);
  }
}

void OutputLog::DropFront(std::deque<Chunk>& chunks, size_t bytes, uint64_t keep_from) {
  const auto s = static_cast<size_t>(&chunks - streams_);
  while (bytes > 0 && !chunks.empty() && chunks.front().offset < keep_from) {
    Chunk& front = chunks.front();
    size_t n = std::min<uint64_t>({bytes, front.data.size(), keep_from - front.offset});
    if (n == front.data.size()) {
      chunks.pop_front();
    } else {
      front.data.erase(0, n);
      front.offset += n;
    }
    bytes -= n;
    held_[s] -= n;
    buffered_ -= n;
  }
}

size_t OutputLog::DropOldest(size_t bytes) {
  size_t dropped = 0;
  while (dropped < bytes && buffered_ > 0) {
    // The stream whose first byte is the oldest.
    std::deque<Chunk>* oldest = nullptr;
    for (auto& chunks : streams_) {
      if (!chunks.empty() && (oldest == nullptr || chunks.front().offset < oldest->front().offset))
        oldest = &chunks;
    }
    size_t n = std::min(bytes - dropped, oldest->front().data.size());
    DropFront(*oldest, n);
    dropped += n;
  }
  return dropped;
}

OutputRead OutputLog::Read(uint64_t from, size_t max_bytes) const {
  OutputRead out;
  from = std::min(from, end_);
  std::vector<const Chunk*> held;
  std::vector<OutputStream> of;
  for (size_t s = 0; s < 3; ++s) {
    // Chunks are in offset order: skip those wholly before `from`.
    const auto& chunks = streams_[s];
    auto first = std::partition_point(chunks.begin(), chunks.end(),
                                      [from](const Chunk& c) { return c.offset + c.data.size() <= from; });
    for (auto it = first; it != chunks.end(); ++it) {
      held.push_back(&*it);
      of.push_back(static_cast<OutputStream>(s));
    }
  }
  std::vector<size_t> order(held.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return held[a]->offset < held[b]->offset; });
  uint64_t at = from;
  size_t taken = 0;
  for (size_t i : order) {
    if (taken >= max_bytes) break;
    const Chunk& c = *held[i];
    uint64_t begin = std::max<uint64_t>(c.offset, at);
    if (begin > at) out.dropped += begin - at;  // a gap: bytes no longer held
    size_t skip = static_cast<size_t>(begin - c.offset);
    size_t n = std::min(c.data.size() - skip, max_bytes - taken);
    out.chunks.push_back({of[i], begin, c.data.substr(skip, n)});
    taken += n;
    at = begin + n;
  }
  if (taken < max_bytes) {
    out.dropped += end_ - at;  // everything after the last chunk held is gone too
    at = end_;
  }
  out.next_offset = at;
  return out;
}

}  // namespace execbox::engine
