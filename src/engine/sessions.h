// Stateful sessions, like notebook kernels: a long-lived warm child whose Python globals,
// imports and work dir persist across executions. Executions in one session run one at a time,
// in order. A session idle for longer than its TTL is closed; at most max_sessions exist (a
// create beyond that is refused with kFull: nothing is evicted behind a client's back).
// When an execution kills the session's process (a timeout, the memory limit, a crash), the
// reply says the state was lost and why, and the session restarts empty at generation + 1;
// its next reply says "lost" too, once, so a model never assumes its variables survived.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <expected>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "engine/engine.h"
#include "engine/pool.h"

namespace execbox::engine {

struct SessionOptions {
  size_t max_sessions = 32;
  std::chrono::seconds idle_ttl{30 * 60};
};

struct SessionInfo {
  std::string id;
  uint64_t generation = 0;
  uint64_t executions = 0;
  bool preserved = true;
  std::string lost_reason;
  std::chrono::system_clock::time_point created, last_used;
  uint64_t private_bytes = 0, pss_bytes = 0;  // of the session's Python process, when known
};

enum class SessionError { kNotFound, kFull, kFailed };

struct SessionFailure {
  SessionError kind;
  std::string message;
};

template <typename T>
using SessionExpected = std::expected<T, SessionFailure>;

class Sessions {
 public:
  Sessions(Pool& pool, SessionOptions options);
  ~Sessions();  // closes every session
  Sessions(const Sessions&) = delete;
  Sessions& operator=(const Sessions&) = delete;

  SessionExpected<SessionInfo> Create();
  SessionExpected<Result> Execute(const std::string& id, const runtime::PythonProgram& program,
                                  const ExecuteOptions& options = {});
  SessionExpected<SessionInfo> Info(const std::string& id);
  std::vector<SessionInfo> List();
  // Forking a session's process cannot give the copy its own mount, pid and network
  // namespaces: the copy inherits the original's seccomp filter and has no capability, and no
  // kernel interface lets another process change its namespaces. So Fork refuses with kFailed
  // and says why, rather than returning a copy that shares the original's work dir.
  SessionExpected<SessionInfo> Fork(const std::string& id);
  SessionExpected<void> Delete(const std::string& id);
  size_t size();
  // Closes sessions idle past the TTL now (the background sweep calls it too).
  size_t SweepIdle();

 private:
  struct Session;
  std::shared_ptr<Session> Find(const std::string& id);
  SessionInfo InfoOf(Session& s);

  Pool& pool_;
  SessionOptions options_;
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<Session>> sessions_;
  bool stopping_ = false;
  std::condition_variable wake_;
  std::thread sweeper_;
};

}  // namespace execbox::engine
