// The host's side of an execution's network (docs/security.md, "Network"). The sandbox gets
// one descriptor: a unix SOCK_SEQPACKET socket (the "connector"). Its agent listens on the
// sandbox's own loopback and sends each accepted connection's socket over the connector with
// SCM_RIGHTS; no interface, route or host socket is ever added to the sandbox's namespace.
// Here, trusted code does all the rest on that stream: it reads an HTTP proxy request or
// SOCKS5 (proxy_protocol.h), resolves the name itself, checks the name and every address it
// would connect to against the policy (net_policy.h), connects, relays the bytes and counts
// them. What arrives over the connector is hostile: one descriptor per message (others are
// closed), a stream socket or nothing, a bounded number of connections, and no wait that the
// sandbox can stretch past the execution (every wait also watches the proxy's stop).
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "base/error.h"
#include "base/unique_fd.h"
#include "engine/net_hosts.h"
#include "engine/net_policy.h"

namespace execbox::engine {

struct EgressLimits {
  size_t max_connections = 256;  // attempts served per execution; later ones are refused ("limit")
  size_t max_open = 16;          // at once
  size_t max_listed = 256;       // in the Result; later ones are counted in `omitted`
  // Bytes each way (to the destinations, from them) per execution, all its connections together;
  // a connection that would move more is cut there (its reason: "byte limit").
  uint64_t max_bytes = 1ull << 30;
  std::chrono::milliseconds head_timeout{10'000};     // for the proxy request head
  std::chrono::milliseconds connect_timeout{10'000};  // per address
};

class EgressProxy {
 public:
  // `hosts`: the operator's answers for names (net_hosts.h), asked before the system's resolver;
  // may be null.
  static Expected<std::unique_ptr<EgressProxy>> Start(NetPolicy policy, EgressLimits limits = {},
                                                      std::shared_ptr<const NetHosts> hosts = nullptr);
  ~EgressProxy();
  EgressProxy(const EgressProxy&) = delete;
  EgressProxy& operator=(const EgressProxy&) = delete;

  // The connector's end for the sandbox (jail::Policy::egress_fd): close it once the jail has it.
  int sandbox_fd() const { return sandbox_end_.Get(); }
  void CloseSandboxEnd() { sandbox_end_.Reset(); }

  // Stops accepting, ends every relay, waits for the threads and returns what happened (since
  // the last Drain). Call once the sandbox has ended.
  NetRecord Finish();
  // A session's proxy serves many executions: what happened since the last Drain (connections
  // that ended; one still open is listed by the Drain after its end), and a fresh allowance of
  // max_connections for the next execution. The proxy goes on serving.
  NetRecord Drain();

 private:
  EgressProxy(NetPolicy policy, EgressLimits limits, std::shared_ptr<const NetHosts> hosts)
      : policy_(std::move(policy)), limits_(limits), hosts_(std::move(hosts)) {}
  void Accept();
  void Take(UniqueFd fd);
  void Serve(UniqueFd client, size_t index);
  void Record(size_t index, NetConnection c);
  void JoinEnded();  // with mu_ held: the relays' threads that have ended
  NetRecord TakeRecord();  // with mu_ held

  const NetPolicy policy_;
  const EgressLimits limits_;
  const std::shared_ptr<const NetHosts> hosts_;
  // What this execution's connections have moved, each way (max_bytes); Drain starts afresh.
  std::atomic<uint64_t> bytes_used_[2] = {0, 0};  // [0]: sent, [1]: received
  UniqueFd host_end_, sandbox_end_;
  UniqueFd stop_read_, stop_write_;  // closing stop_write_ wakes every wait
  std::thread acceptor_;
  std::mutex mu_;
  std::map<size_t, std::thread> workers_;  // by the connection's index
  std::vector<size_t> ended_;               // workers whose relay is over, to join
  std::vector<std::pair<size_t, NetConnection>> listed_;
  uint64_t omitted_ = 0;
  uint64_t allowed_ = 0, refused_ = 0;
  size_t taken_ = 0;           // every connection's index
  size_t taken_since_drain_ = 0;  // what max_connections bounds
  size_t open_ = 0;
  bool finished_ = false;
};

}  // namespace execbox::engine
