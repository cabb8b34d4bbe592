// A loopback HTTP upstream for the network tests (tests/e2e/network_test.cc, the warm
// session's tests/warm/session_network_test.cc): on 127.0.0.2, not 127.0.0.1, which inside a
// sandbox is the sandbox's own loopback (and in NO_PROXY).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>

namespace execbox::testlib {

constexpr char kBody[] = "hello from upstream";

// Answers every connection with one small HTTP response, whatever it was asked.
class Upstream {
 public:
  Upstream() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(0x7f000002);  // 127.0.0.2
    int one = 1;
    ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd_, 64) != 0) return;
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { Serve(); });
  }
  ~Upstream() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    ::close(fd_);
  }
  int port() const { return port_; }
  int served() const { return served_; }

 private:
  void Serve() {
    while (!stop_) {
      pollfd p{.fd = fd_, .events = POLLIN, .revents = 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) continue;
      std::string head;
      char buf[4096];
      while (head.find("\r\n\r\n") == std::string::npos) {
        pollfd q{.fd = c, .events = POLLIN, .revents = 0};
        if (::poll(&q, 1, 5000) <= 0) break;
        ssize_t n = ::recv(c, buf, sizeof buf, 0);
        if (n <= 0) break;
        head.append(buf, static_cast<size_t>(n));
      }
      std::string reply = "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\nContent-Length: " +
                          std::to_string(sizeof kBody - 1) + "\r\nConnection: close\r\n\r\n" + kBody;
      (void)::send(c, reply.data(), reply.size(), MSG_NOSIGNAL);
      ::close(c);
      ++served_;
    }
  }
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> served_{0};
  std::thread thread_;
};

}  // namespace execbox::testlib
