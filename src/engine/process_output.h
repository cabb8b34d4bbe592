// What a session's process wrote, kept on the host for readers that come and go: each stream
// (stdout and stderr, or the pty's one) in a bounded buffer of its own, the oldest bytes dropped
// first. Every byte has an offset in the process's output as a whole (all its streams, in the
// order the host read them), so a reader asks "from offset N" and learns what it missed: a
// second request picks up where the first left off, and several read at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

namespace execbox::engine {

enum class OutputStream { kStdout, kStderr, kPty };
// "stdout", "stderr", "pty".
const char* OutputStreamName(OutputStream stream);

struct OutputChunk {
  OutputStream stream = OutputStream::kStdout;
  uint64_t offset = 0;  // of its first byte
  std::string data;
};

struct OutputRead {
  std::vector<OutputChunk> chunks;  // in offset order
  uint64_t next_offset = 0;         // where the next read goes on from
  uint64_t dropped = 0;             // bytes between the asked offset and next_offset no longer held
};

class OutputLog {
 public:
  explicit OutputLog(size_t cap_per_stream) : cap_(cap_per_stream) {}

  // Bytes at offsets from `keep_from` on are kept past the cap (a reader that must not miss
  // them has not read them yet); over_cap() then says so, and Trim drops down to the cap once
  // the reader has moved on.
  void Append(OutputStream stream, std::string_view data, uint64_t keep_from = UINT64_MAX);
  bool over_cap() const;
  void Trim(uint64_t keep_from);
  // What is held from `from` on (an offset past the end reads as the end), at most about
  // `max_bytes` (whole chunks, the last one cut).
  OutputRead Read(uint64_t from, size_t max_bytes) const;
  uint64_t end() const { return end_; }
  size_t buffered() const { return buffered_; }
  // Frees `bytes` (or all) of the oldest bytes held, whatever their stream; what is gone.
  size_t DropOldest(size_t bytes);

 private:
  struct Chunk {
    uint64_t offset;
    std::string data;
  };
  // Drops up to `bytes` of the stream's oldest, none at or after `keep_from`.
  void DropFront(std::deque<Chunk>& chunks, size_t bytes, uint64_t keep_from = UINT64_MAX);

  size_t cap_;
  std::deque<Chunk> streams_[3];
  size_t held_[3] = {0, 0, 0};
  size_t buffered_ = 0;
  uint64_t end_ = 0;
};

}  // namespace execbox::engine
