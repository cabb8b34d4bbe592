#include "jail/loopback.h"

#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "jail/warm_host.h"

namespace execbox::jail {

int BringLoopbackUp() noexcept {
  int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0) return errno;
  struct ifreq ifr {};
  std::memcpy(ifr.ifr_name, "lo", 3);
  int err = 0;
  if (::ioctl(s, SIOCGIFFLAGS, &ifr) != 0) {
    err = errno;
  } else {
    ifr.ifr_flags = static_cast<short>(ifr.ifr_flags | IFF_UP);
    if (::ioctl(s, SIOCSIFFLAGS, &ifr) != 0) err = errno;
  }
  ::close(s);
  return err;
}

int ListenOnLoopback(uint16_t port) noexcept {
  int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (s < 0) return -1;
  int on = 1;
  (void)::setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  struct sockaddr_in a {};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(s, reinterpret_cast<struct sockaddr*>(&a), sizeof a) != 0 || ::listen(s, 64) != 0) {
    int err = errno;
    ::close(s);
    errno = err;
    return -1;
  }
  return s;
}

bool PassConnections(int listener, int connector, int max) noexcept {
  for (int i = 0; i < max; ++i) {
    struct pollfd room = {.fd = connector, .events = POLLOUT, .revents = 0};
    if (::poll(&room, 1, 0) != 1 || (room.revents & POLLOUT) == 0) return false;
    int conn = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (conn < 0) {
      if (errno == EINTR) continue;
      return true;  // none left (EAGAIN), or the listener failed: the next wake tries again
    }
    // Only this thread writes to the connector, and it had room: the send does not fail for
    // want of it.
    (void)SendWithFds(connector, "c", 1, &conn, 1, MSG_DONTWAIT);
    ::close(conn);
  }
  return true;
}

}  // namespace execbox::jail
