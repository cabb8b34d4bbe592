// Internal to the zygote (zygote_loop.cc): the child's own side, from the fork to the code.
#pragma once

#include "jail/zygote_loop.h"

namespace execbox::jail {

// In a freshly forked child, pid 1 of its own pid namespace: says hello to the host on
// `control` (the host reads the pid from the credentials and moves the process into the
// child's cgroup), waits for kGo, makes its own mount, network, IPC, UTS and cgroup
// namespaces and its tmpfs mounts, hands the zygote its work dir on `link` (one byte with the
// descriptor), lets go of `control` and `link`, locks itself down, writes 'R' on `channel`
// and runs the code. A session child (`init` >= 0: the socket its init serves the host on)
// mounts a devpts instance of its own and forks once locked down: the child writes 'R' and
// runs the code, this process stays pid 1 as the session's init (session_init.h). A failure
// before the hand-over goes to the host as kSetupFailed on `control`; after it, as 'F' and
// text on `channel`. `egress` (a session with network, else -1) is the connector to the host's
// proxy: the child brings its loopback up, listens on spec.egress_port there, and its init
// relays each connection over the connector (session_init.h); the code gets the proxies'
// addresses in its environment and may connect to that port only (Landlock, where it handles
// TCP; seccomp allows AF_INET stream sockets, which reach nothing but the loopback).
[[noreturn]] void RunChild(const WarmChildSpec& spec, int control, int channel, int init, int egress, int link,
                           const ZygoteSetup& setup) noexcept;

}  // namespace execbox::jail
