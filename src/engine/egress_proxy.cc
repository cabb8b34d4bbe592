#include "engine/egress_proxy.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "engine/proxy_protocol.h"

namespace execbox::engine {
namespace {

using Clock = std::chrono::steady_clock;
using Address = std::array<uint8_t, 16>;

constexpr size_t kRelayBuffer = 64 << 10;
constexpr int kMaxFdsPerMessage = 8;  // read (and closed) at most this many per message
constexpr size_t kMaxAddresses = 8;   // of a name, tried in order

int MsLeft(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left <= 0 ? 0 : static_cast<int>(std::min<int64_t>(left, 60'000));
}

// Waits for `events` on fd or the stop; false on the stop or the deadline.
bool WaitFor(int fd, short events, int stop, Clock::time_point deadline) {
  for (;;) {
    pollfd p[2] = {{.fd = fd, .events = events, .revents = 0}, {.fd = stop, .events = POLLIN, .revents = 0}};
    int n = ::poll(p, 2, MsLeft(deadline));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0 || p[1].revents != 0) return false;
    if (p[0].revents != 0) return true;
  }
}

// Appends what the client sends until `parse` is done, bad, or the head is too long.
template <typename Parse>
ProxyRequest ReadHead(int fd, int stop, Clock::time_point deadline, std::string& buf, Parse parse) {
  for (;;) {
    ProxyRequest r = parse(std::string_view(buf));
    if (r.state != ParseState::kNeedMore) return r;
    if (buf.size() >= kMaxProxyHeadBytes + 4) return ProxyRequest{.state = ParseState::kBad, .error = "too long"};
    if (!WaitFor(fd, POLLIN, stop, deadline)) return ProxyRequest{.state = ParseState::kBad, .error = "timeout"};
    char chunk[4096];
    const size_t room = std::min(sizeof chunk, kMaxProxyHeadBytes + 4 - buf.size());
    ssize_t n = ::recv(fd, chunk, room, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (n <= 0) return ProxyRequest{.state = ParseState::kBad, .error = "closed"};
    buf.append(chunk, static_cast<size_t>(n));
  }
}

// Sends all of `data` unless the client stops reading until the deadline, or the stop.
bool SendAll(int fd, std::string_view data, int stop, Clock::time_point deadline) {
  while (!data.empty()) {
    ssize_t n = ::send(fd, data.data(), data.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n > 0) {
      data.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno != EAGAIN && errno != EINTR) return false;
    if (!WaitFor(fd, POLLOUT, stop, deadline)) return false;
  }
  return true;
}

std::vector<Address> Resolve(const std::string& host, std::string& error) {
  if (auto literal = ParseAddress(host)) return {*literal};
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* list = nullptr;
  if (int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &list); rc != 0) {
    error = std::string("name not resolved: ") + ::gai_strerror(rc);
    return {};
  }
  std::vector<Address> out;
  for (addrinfo* ai = list; ai != nullptr && out.size() < kMaxAddresses; ai = ai->ai_next) {
    Address a{};
    if (ai->ai_family == AF_INET) {
      a[10] = a[11] = 0xff;
      std::memcpy(a.data() + 12, &reinterpret_cast<sockaddr_in*>(ai->ai_addr)->sin_addr, 4);
    } else if (ai->ai_family == AF_INET6) {
      std::memcpy(a.data(), &reinterpret_cast<sockaddr_in6*>(ai->ai_addr)->sin6_addr, 16);
    } else {
      continue;
    }
    if (std::find(out.begin(), out.end(), a) == out.end()) out.push_back(a);
  }
  ::freeaddrinfo(list);
  if (out.empty()) error = "name not resolved: no address";
  return out;
}

// A non-blocking connect, waited for with the stop.
UniqueFd Connect(const Address& a, uint16_t port, int stop, Clock::time_point deadline, std::string& error) {
  static constexpr uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  const bool v4 = std::equal(a.begin(), a.begin() + 12, kMapped);
  sockaddr_storage ss{};
  socklen_t len = 0;
  if (v4) {
    auto* sin = reinterpret_cast<sockaddr_in*>(&ss);
    sin->sin_family = AF_INET;
    sin->sin_port = htons(port);
    std::memcpy(&sin->sin_addr, a.data() + 12, 4);
    len = sizeof *sin;
  } else {
    auto* sin6 = reinterpret_cast<sockaddr_in6*>(&ss);
    sin6->sin6_family = AF_INET6;
    sin6->sin6_port = htons(port);
    std::memcpy(&sin6->sin6_addr, a.data(), 16);
    len = sizeof *sin6;
  }
  UniqueFd fd(::socket(v4 ? AF_INET : AF_INET6, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.Valid()) {
    error = std::string("socket: ") + std::strerror(errno);
    return {};
  }
  if (::connect(fd.Get(), reinterpret_cast<sockaddr*>(&ss), len) != 0 && errno != EINPROGRESS) {
    error = std::string("connect: ") + std::strerror(errno);
    return {};
  }
  if (!WaitFor(fd.Get(), POLLOUT, stop, deadline)) {
    error = "connect: timed out";
    return {};
  }
  int err = 0;
  socklen_t err_len = sizeof err;
  if (::getsockopt(fd.Get(), SOL_SOCKET, SO_ERROR, &err, &err_len) != 0 || err != 0) {
    error = std::string("connect: ") + std::strerror(err != 0 ? err : errno);
    return {};
  }
  return fd;
}

// Takes up to `want` of what is left of `used`'s allowance of `max`; what it grants.
size_t TakeBytes(std::atomic<uint64_t>& used, uint64_t max, size_t want) {
  uint64_t now = used.load();
  for (;;) {
    const uint64_t grant = std::min<uint64_t>(want, max - std::min(now, max));
    if (grant == 0 || used.compare_exchange_weak(now, now + grant)) return static_cast<size_t>(grant);
  }
}

// Copies both ways, counting each, until both sides have finished, the stop, or a way's
// allowance (`used`, of `max`) runs out: then false, the connection cut.
bool Relay(int client, int upstream, int stop, uint64_t& sent, uint64_t& received,
           std::atomic<uint64_t>* used, uint64_t max) {
  struct Way {
    int from, to;
    std::string buf;
    size_t off = 0;
    bool eof = false, shut = false;
    bool cut = false;  // its allowance ran out: what it holds goes, then the connection ends
    uint64_t* count;
  };
  Way ways[2] = {{.from = client, .to = upstream, .count = &sent}, {.from = upstream, .to = client, .count = &received}};
  for (;;) {
    pollfd p[5];
    int n = 0;
    int idx[4] = {-1, -1, -1, -1};
    for (int w = 0; w < 2; ++w) {
      Way& way = ways[w];
      if (!way.eof && way.buf.size() < kRelayBuffer) {
        idx[n] = w;
        p[n++] = {.fd = way.from, .events = POLLIN, .revents = 0};
      }
      if (way.off < way.buf.size()) {
        idx[n] = 2 + w;
        p[n++] = {.fd = way.to, .events = POLLOUT, .revents = 0};
      }
    }
    bool done = true;
    for (Way& way : ways) {
      if (way.cut && way.off == way.buf.size()) return false;
      done = done && way.eof && way.off == way.buf.size();
    }
    if (done || n == 0) return true;
    p[n] = {.fd = stop, .events = POLLIN, .revents = 0};
    if (::poll(p, static_cast<nfds_t>(n + 1), -1) < 0) {
      if (errno == EINTR) continue;
      return true;
    }
    if (p[n].revents != 0) return true;
    for (int i = 0; i < n; ++i) {
      if (p[i].revents == 0) continue;
      const int w = idx[i] % 2;
      Way& way = ways[w];
      if (idx[i] < 2) {
        char chunk[16384];
        // Granted before it is read, so the allowance is never passed; given back if unread.
        const size_t room = TakeBytes(used[w], max, sizeof chunk);
        if (room == 0) {
          way.eof = way.cut = true;
          continue;
        }
        ssize_t got = ::recv(way.from, chunk, room, MSG_DONTWAIT);
        used[w] -= static_cast<uint64_t>(room) - static_cast<uint64_t>(std::max<ssize_t>(got, 0));
        if (got < 0 && (errno == EAGAIN || errno == EINTR)) continue;
        if (got <= 0) {
          way.eof = true;
        } else {
          way.buf.append(chunk, static_cast<size_t>(got));
        }
      } else {
        ssize_t put = ::send(way.to, way.buf.data() + way.off, way.buf.size() - way.off, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (put < 0 && (errno == EAGAIN || errno == EINTR)) continue;
        if (put < 0) return true;  // the reader is gone
        way.off += static_cast<size_t>(put);
        *way.count += static_cast<uint64_t>(put);
        if (way.off == way.buf.size()) {
          way.buf.clear();
          way.off = 0;
        }
      }
    }
    for (Way& way : ways) {
      if (way.eof && !way.shut && way.off == way.buf.size()) {
        ::shutdown(way.to, SHUT_WR);
        way.shut = true;
      }
    }
  }
}

// A descriptor from the sandbox that the proxy will use: a connected stream socket.
bool IsStreamSocket(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) return false;
  int type = 0;
  socklen_t len = sizeof type;
  return ::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) == 0 && type == SOCK_STREAM;
}

}  // namespace

Expected<std::unique_ptr<EgressProxy>> EgressProxy::Start(NetPolicy policy, EgressLimits limits,
                                                          std::shared_ptr<const NetHosts> hosts) {
  std::unique_ptr<EgressProxy> p(new EgressProxy(std::move(policy), limits, std::move(hosts)));
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) return FailErrno("socketpair(connector)");
  p->host_end_.Reset(sv[0]);
  p->sandbox_end_.Reset(sv[1]);
  int stop[2];
  if (::pipe2(stop, O_CLOEXEC) != 0) return FailErrno("pipe2(stop)");
  p->stop_read_.Reset(stop[0]);
  p->stop_write_.Reset(stop[1]);
  p->acceptor_ = std::thread([raw = p.get()] { raw->Accept(); });
  return p;
}

EgressProxy::~EgressProxy() { (void)Finish(); }

void EgressProxy::Accept() {
  for (;;) {
    pollfd p[2] = {{.fd = host_end_.Get(), .events = POLLIN, .revents = 0},
                   {.fd = stop_read_.Get(), .events = POLLIN, .revents = 0}};
    if (::poll(p, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (p[1].revents != 0) return;
    char byte[16];
    iovec iov{.iov_base = byte, .iov_len = sizeof byte};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFdsPerMessage)];
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    ssize_t n = ::recvmsg(host_end_.Get(), &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (n <= 0) return;  // the sandbox is gone (or the connector broke): nothing more comes
    std::vector<UniqueFd> fds;
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < count; ++i) {
        int fd = -1;
        std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
        fds.emplace_back(fd);
      }
    }
    // Exactly one stream socket per message; anything else is closed (the UniqueFds) and counted.
    if (fds.size() != 1 || (msg.msg_flags & MSG_CTRUNC) != 0 || !IsStreamSocket(fds[0].Get())) {
      std::lock_guard lock(mu_);
      ++omitted_;
      ++refused_;
      continue;
    }
    Take(std::move(fds[0]));
  }
}

void EgressProxy::Take(UniqueFd fd) {
  std::lock_guard lock(mu_);
  JoinEnded();
  const size_t index = taken_++;
  if (taken_since_drain_++ >= limits_.max_connections || open_ >= limits_.max_open) {
    // Closing the socket is the client's answer; the attempt is listed as refused.
    NetConnection c{.allowed = false, .reason = "limit"};
    ++refused_;
    if (listed_.size() < limits_.max_listed) {
      listed_.emplace_back(index, std::move(c));
    } else {
      ++omitted_;
    }
    return;
  }
  ++open_;
  workers_.emplace(index, std::thread([this, index, client = fd.Release()] {
                     Serve(UniqueFd(client), index);
                     std::lock_guard ended(mu_);
                     ended_.push_back(index);
                   }));
}

void EgressProxy::JoinEnded() {
  // Each has pushed its index as its last step: the join waits for nothing that needs mu_.
  for (size_t index : ended_) {
    auto it = workers_.find(index);
    if (it == workers_.end()) continue;
    it->second.join();
    workers_.erase(it);
  }
  ended_.clear();
}

NetRecord EgressProxy::TakeRecord() {
  std::sort(listed_.begin(), listed_.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  NetRecord record;
  for (auto& [index, c] : listed_) record.connections.push_back(std::move(c));
  listed_.clear();
  record.omitted = std::exchange(omitted_, 0);
  record.allowed = std::exchange(allowed_, 0);
  record.refused = std::exchange(refused_, 0);
  return record;
}

NetRecord EgressProxy::Drain() {
  std::lock_guard lock(mu_);
  JoinEnded();
  taken_since_drain_ = 0;
  bytes_used_[0] = bytes_used_[1] = 0;
  return TakeRecord();
}

void EgressProxy::Record(size_t index, NetConnection c) {
  std::lock_guard lock(mu_);
  --open_;
  ++(c.allowed ? allowed_ : refused_);
  if (listed_.size() < limits_.max_listed) {
    listed_.emplace_back(index, std::move(c));
  } else {
    ++omitted_;
  }
}

void EgressProxy::Serve(UniqueFd client, size_t index) {
  const Clock::time_point began = Clock::now();
  const int stop = stop_read_.Get();
  const int fd = client.Get();
  NetConnection c;
  auto finish = [&] {
    c.duration_ms =
        static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - began).count());
    Record(index, std::move(c));
  };
  const Clock::time_point head_deadline = began + limits_.head_timeout;
  std::string buf;
  ProxyRequest req = ReadHead(fd, stop, head_deadline, buf, [](std::string_view b) {
    return b.empty() ? ProxyRequest{} : ProxyRequest{.state = ParseState::kDone};
  });
  if (req.state != ParseState::kDone) {
    c.reason = "no request";
    return finish();
  }
  const bool socks = static_cast<uint8_t>(buf[0]) == 5;
  if (socks) {
    c.protocol = "socks5";
    req = ReadHead(fd, stop, head_deadline, buf, ParseSocksGreeting);
    if (req.state != ParseState::kDone) {
      (void)SendAll(fd, std::string("\x05\xff", 2), stop, head_deadline);
      c.reason = "bad request: " + req.error;
      return finish();
    }
    buf.erase(0, req.consumed);
    if (!SendAll(fd, std::string("\x05\x00", 2), stop, head_deadline)) {
      c.reason = "no request";
      return finish();
    }
    req = ReadHead(fd, stop, head_deadline, buf, ParseSocksRequest);
    if (req.state != ParseState::kDone) {
      (void)SendAll(fd, SocksReply(req.socks_reply), stop, head_deadline);
      c.reason = "bad request: " + req.error;
      return finish();
    }
  } else {
    req = ReadHead(fd, stop, head_deadline, buf, ParseHttpProxyHead);
    if (req.state != ParseState::kDone) {
      (void)SendAll(fd, ProxyAnswer(400, "Bad Request", req.error), stop, head_deadline);
      c.reason = "bad request: " + req.error;
      return finish();
    }
    c.protocol = req.tunnel ? "connect" : "http";
  }
  buf.erase(0, req.consumed);
  c.host = req.host;
  c.port = req.port;

  auto refuse = [&](int status, const char* title, uint8_t socks_code) {
    const std::string text = c.host + ":" + std::to_string(c.port) + " refused: " + c.reason +
                             (c.rule.empty() ? "" : " (" + c.rule + ")");
    (void)SendAll(fd, socks ? SocksReply(socks_code) : ProxyAnswer(status, title, text), stop,
                  Clock::now() + limits_.head_timeout);
    finish();
  };
  NetVerdict verdict = CheckName(policy_, c.host, c.port);
  if (!verdict.allowed) {
    c.reason = verdict.reason;
    c.rule = verdict.rule;
    return refuse(403, "Forbidden", 2);
  }
  std::string error;
  // The operator's answer for the name, if any, else the system's resolver.
  const std::vector<Address>* named = hosts_ ? hosts_->Find(c.host) : nullptr;
  std::vector<Address> addresses = named != nullptr ? *named : Resolve(c.host, error);
  UniqueFd upstream;
  std::optional<NetVerdict> first_refusal;
  for (const Address& a : addresses) {
    NetVerdict v = CheckAddress(policy_, c.host, a, c.port, named != nullptr);
    if (!v.allowed) {
      if (!first_refusal) {
        first_refusal = v;
        c.address = AddressText(a);
      }
      continue;
    }
    c.address = AddressText(a);
    c.rule = v.rule;
    upstream = Connect(a, c.port, stop, Clock::now() + limits_.connect_timeout, error);
    if (upstream.Valid()) break;
  }
  if (!upstream.Valid()) {
    if (first_refusal && c.rule.empty()) {
      c.reason = first_refusal->reason;
      c.rule = first_refusal->rule;
      return refuse(403, "Forbidden", 2);
    }
    c.allowed = !c.address.empty();  // allowed by the policy, but not reached
    c.reason = error;
    return refuse(502, "Bad Gateway", addresses.empty() ? 4 : 5);
  }
  c.allowed = true;
  const Clock::time_point answer_deadline = Clock::now() + limits_.head_timeout;
  bool ok = true;
  if (socks) {
    ok = SendAll(fd, SocksReply(0), stop, answer_deadline);
  } else if (req.tunnel) {
    ok = SendAll(fd, "HTTP/1.1 200 Connection established\r\n\r\n", stop, answer_deadline);
  } else {
    ok = SendAll(upstream.Get(), req.forward, stop, answer_deadline);
    if (ok) c.bytes_sent += req.forward.size();
  }
  if (ok && !buf.empty()) {
    ok = SendAll(upstream.Get(), buf, stop, answer_deadline);
    if (ok) c.bytes_sent += buf.size();
  }
  // The request's own bytes count against the allowance too (at most a head's worth past it).
  bytes_used_[0] += c.bytes_sent;
  if (ok &&
      !Relay(fd, upstream.Get(), stop, c.bytes_sent, c.bytes_received, bytes_used_, limits_.max_bytes)) {
    c.reason = "byte limit";
  }
  finish();
}

NetRecord EgressProxy::Finish() {
  {
    std::lock_guard lock(mu_);
    if (finished_) return {};
    finished_ = true;
  }
  stop_write_.Reset();
  if (acceptor_.joinable()) acceptor_.join();
  std::map<size_t, std::thread> workers;
  {
    std::lock_guard lock(mu_);
    workers.swap(workers_);
  }
  for (auto& [index, t] : workers) t.join();
  std::lock_guard lock(mu_);
  ended_.clear();
  return TakeRecord();
}

}  // namespace execbox::engine
