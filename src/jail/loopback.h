// The sandbox's own loopback, for network through the host (engine/egress_proxy.h): a fresh net
// namespace has only `lo`, down. It is brought up, and a relay listens on it; nothing else is
// ever added to the namespace. Async-signal-safe: the cold jail's init calls these between
// clone and exec.
#pragma once

#include <cstdint>

namespace execbox::jail {

// Sets `lo` up. Needs CAP_NET_ADMIN in the user namespace that owns the net namespace.
// Returns 0 or an errno.
int BringLoopbackUp() noexcept;

// A non-blocking, close-on-exec TCP socket listening on 127.0.0.1:port, or -1 (errno set).
int ListenOnLoopback(uint16_t port) noexcept;

// Takes every connection waiting on `listener` (at most `max` of them) and hands each, as it
// is, to the host over `connector` (one byte with the socket, SCM_RIGHTS). It never waits: a
// connection is taken only while the connector has room, so none is lost. False when it has
// none: the rest wait in the listener's backlog (their clients wait to be accepted) until the
// connector is writable again; the caller polls it for that. What the relay in the sandbox
// does: it reads, parses and decides nothing.
bool PassConnections(int listener, int connector, int max) noexcept;

}  // namespace execbox::jail
