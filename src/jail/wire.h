// The control channel between the supervisor (host) and the jail's init (pid 1): fixed-size
// headers over a stream socket, so the init side needs no allocation to speak it.
#pragma once

#include <cstddef>
#include <cstdint>

namespace execbox::jail::wire {

enum class Kind : uint32_t {
  // supervisor -> init
  kGo = 1,          // id maps and cgroup are in place: build the jail
  kInputFile = 2,   // a = name length, b = content length; name and content follow
  kInputsDone = 3,  // start the code
  kStop = 4,        // kill the code's whole tree now (a limit was reached)
  kCollect = 5,     // warm session: send the work dir's files changed since the last kCollect
                    // (a = 1: only note them as they are now, sending nothing)
  kHello = 6,       // warm child -> host, first message: the host reads the pid from its credentials
  // host -> the zygote for a warm session, between executions (the reply is kFileData and/or kFileResult):
  kReadFile = 7,   // a = path length, b = the most bytes wanted; the path follows (relative to the
                   // work dir). Reply: kFileData then kFileResult, or kFileResult alone (an error).
  kWriteFile = 8,  // a = path length, b = content length; path and content follow. Reply: kFileResult.
  // init -> supervisor
  kStarted = 10,      // the code is running (exec succeeded); a = its pid inside, b = kWithout* bits
  kSetupFailed = 11,  // text = the step that failed, a = errno
  kExited = 12,       // a = wait status, b = CPU microseconds of the tree, c = max RSS in KiB
  kOutputFile = 13,   // a = name length, b = content length; name and content follow
  kSkippedFile = 14,  // a = name length; name follows; text = why
  kDone = 15,         // nothing more will come
  kCollected = 16,    // warm session: the files asked for by kCollect are all sent
  kFileData = 17,     // b = content length; the content of the file asked for by kReadFile follows
  kFileResult = 18,   // the end of a kReadFile/kWriteFile: a = 0, or an errno; text = what failed
};

// kStarted's b: optional steps the kernel refused, so the jail went on without them. A
// container's seccomp profile may refuse sethostname (the UTS namespace is still private: only
// the name stays the container's); a container that masks parts of its /proc (as runc and
// crun do) makes the kernel refuse a fresh procfs in a user namespace, and the code then runs
// with an empty /proc (it sees less, never more). Anything else that fails is fatal.
inline constexpr int64_t kWithoutHostname = 1;
inline constexpr int64_t kWithoutProc = 2;

struct Header {
  Kind kind;
  int32_t pad = 0;
  int64_t a = 0;
  int64_t b = 0;
  int64_t c = 0;
  char text[200] = {};
};

// Reads or writes exactly `size` bytes; false on EOF or error. Async-signal-safe.
bool WriteExact(int fd, const void* data, size_t size) noexcept;
bool ReadExact(int fd, void* data, size_t size) noexcept;

// Copies a C string into a fixed buffer, always terminated. Async-signal-safe.
void CopyText(char* dest, size_t dest_size, const char* src) noexcept;

}  // namespace execbox::jail::wire
