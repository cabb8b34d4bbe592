// A session process's output kept on the host (engine/process_output.h): offsets over all its
// streams, bounded per stream with the oldest bytes dropped, reads from any offset saying what
// they missed; and signals named as a client names them (engine/session_processes.h).
#include "engine/process_output.h"

#include <gtest/gtest.h>

#include <csignal>

#include "engine/session_processes.h"

namespace execbox::engine {
namespace {

std::string Joined(const OutputRead& r) {
  std::string out;
  for (const auto& c : r.chunks) out += c.data;
  return out;
}

TEST(OutputLog, OffsetsRunOverAllStreamsInOrder) {
  OutputLog log(1 << 20);
  log.Append(OutputStream::kStdout, "out1 ");
  log.Append(OutputStream::kStderr, "err1 ");
  log.Append(OutputStream::kStdout, "out2");
  EXPECT_EQ(log.end(), 14u);
  OutputRead all = log.Read(0, 1 << 20);
  ASSERT_EQ(all.chunks.size(), 3u);
  EXPECT_EQ(all.chunks[1].stream, OutputStream::kStderr);
  EXPECT_EQ(all.chunks[1].offset, 5u);
  EXPECT_EQ(Joined(all), "out1 err1 out2");
  EXPECT_EQ(all.next_offset, 14u);
  EXPECT_EQ(all.dropped, 0u);
  OutputRead tail = log.Read(7, 1 << 20);
  EXPECT_EQ(Joined(tail), "r1 out2");
  EXPECT_EQ(tail.chunks.front().offset, 7u);
  EXPECT_EQ(log.Read(99, 10).next_offset, 14u) << "past the end reads as the end";
}

TEST(OutputLog, EachStreamKeepsItsNewestBytesAndAReaderLearnsWhatItMissed) {
  OutputLog log(10);
  log.Append(OutputStream::kStdout, "0123456789");
  log.Append(OutputStream::kStderr, "E");
  log.Append(OutputStream::kStdout, "abcde");
  EXPECT_EQ(log.buffered(), 11u);
  OutputRead r = log.Read(0, 1 << 20);
  EXPECT_EQ(r.dropped, 5u);
  EXPECT_EQ(Joined(r), "56789Eabcde");
  EXPECT_EQ(r.next_offset, 16u);
}

TEST(OutputLog, AReadIsBoundedAndGoesOnWhereItStopped) {
  OutputLog log(1 << 20);
  log.Append(OutputStream::kPty, std::string(100, 'x'));
  OutputRead first = log.Read(0, 40);
  EXPECT_EQ(Joined(first).size(), 40u);
  EXPECT_EQ(first.next_offset, 40u);
  OutputRead rest = log.Read(first.next_offset, 1000);
  EXPECT_EQ(Joined(rest).size(), 60u);
  EXPECT_EQ(log.DropOldest(30), 30u);
  EXPECT_EQ(log.Read(0, 1000).dropped, 30u);
}

TEST(OutputLog, WhatAReaderHasNotReadIsKeptPastTheCapThenTrimmed) {
  OutputLog log(10);
  log.Append(OutputStream::kStdout, "0123456789", 3);
  log.Append(OutputStream::kStdout, "abcde", 3);
  EXPECT_TRUE(log.over_cap());
  OutputRead r = log.Read(0, 1 << 20);
  EXPECT_EQ(r.dropped, 3u) << "only what lies before the reader's offset went";
  EXPECT_EQ(Joined(r), "3456789abcde");
  log.Trim(12);  // the reader has read up to "ab"
  EXPECT_FALSE(log.over_cap());
  EXPECT_EQ(Joined(log.Read(0, 1 << 20)), "56789abcde");
  log.Append(OutputStream::kStderr, "E", 0);
  EXPECT_FALSE(log.over_cap()) << "each stream has its own cap";
  log.Append(OutputStream::kStdout, "fg", 5);
  EXPECT_TRUE(log.over_cap());
  log.Trim(UINT64_MAX);
  EXPECT_FALSE(log.over_cap());
  EXPECT_EQ(Joined(log.Read(0, 1 << 20)), "789abcdeEfg");
}

TEST(Signals, ByNameInAnyCaseOrByNumber) {
  EXPECT_EQ(SignalNumber("SIGTERM"), SIGTERM);
  EXPECT_EQ(SignalNumber("term"), SIGTERM);
  EXPECT_EQ(SignalNumber("KILL"), SIGKILL);
  EXPECT_EQ(SignalNumber("9"), 9);
  EXPECT_EQ(SignalNumber("SIGWINCH"), SIGWINCH);
  EXPECT_FALSE(SignalNumber("SIGNOPE").has_value());
  EXPECT_FALSE(SignalNumber("0").has_value());
  EXPECT_FALSE(SignalNumber("65").has_value());
  EXPECT_FALSE(SignalNumber("").has_value());
  EXPECT_FALSE(SignalNumber("123456789012").has_value());
}

}  // namespace
}  // namespace execbox::engine
