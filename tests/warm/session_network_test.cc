// A session with network (docs/sessions.md "Network"), on the real jail, as root and as a user
// (the VM stage runs this binary as both): the code, a command it runs and a background process
// reach an allowed upstream through the session's proxy, by way of the relay its init runs; the
// kernel's end keeps the network; the code holds no descriptor more than in a session without
// network (the connector is the init's); sockets other than TCP stay refused.

#include <chrono>
#include <string>
#include <vector>

#include "engine/net_policy.h"
#include "lib/loopback_upstream.h"
#include "warm/warm_fixture.h"

namespace execbox::engine {
namespace {

using testlib::kBody;
using testlib::Upstream;

class SessionNetworkTest : public WarmSessions {
 protected:
  std::string Fetch(int port) const {
    return "import urllib.request\n"
           "print(urllib.request.urlopen('http://127.0.0.2:" +
           std::to_string(port) + "/', timeout=20).read().decode())\n";
  }
};

// The code's descriptors that are sockets, and what making a UDP and a raw socket does.
constexpr const char* kProbe =
    "import os, socket\n"
    "def link(f):\n"
    "    try:\n"
    "        return os.readlink('/proc/self/fd/' + f)\n"
    "    except OSError:\n"
    "        return ''\n"
    "print(sum(link(f).startswith('socket:') for f in os.listdir('/proc/self/fd')))\n"
    "for kind in (socket.SOCK_DGRAM, socket.SOCK_RAW):\n"
    "    try:\n"
    "        socket.socket(socket.AF_INET, kind)\n"
    "        print('made')\n"
    "    except OSError as e:\n"
    "        print(type(e).__name__)\n";

TEST_F(SessionNetworkTest, CodeCommandsAndProcessesReachTheUpstreamThroughTheInitsRelayOnly) {
  Upstream upstream;
  ASSERT_NE(upstream.port(), 0);
  const std::string allowed = "127.0.0.2:" + std::to_string(upstream.port());
  auto policy = ParseNetPolicy({allowed}, {});
  ASSERT_TRUE(policy.has_value()) << policy.error().message;
  auto created = S().CreateWithNetwork(SessionNetwork{.policy = std::make_shared<const NetPolicy>(*policy)});
  ASSERT_TRUE(created.has_value()) << created.error().message;
  const std::string id = created->id;
  ASSERT_NE(created->network, nullptr);

  Result r = Exec(id, Fetch(upstream.port()));
  EXPECT_EQ(Out(r), std::string(kBody) + "\n") << Describe(r);
  ASSERT_TRUE(r.network.has_value()) << Describe(r);
  ASSERT_EQ(r.network->connections.size(), 1u) << Describe(r);
  EXPECT_TRUE(r.network->connections[0].allowed);
  EXPECT_EQ(r.network->connections[0].rule, allowed);

  // A command the code runs has the proxies in its environment too.
  r = Exec(id, "import subprocess, sys\nsubprocess.run([sys.executable, '-c', " + std::string("'''") +
                   Fetch(upstream.port()) + "'''])\n");
  EXPECT_EQ(Out(r), std::string(kBody) + "\n") << Describe(r);

  // A background process of the session (started by its init) too; its connection is listed by
  // the next execution's reply.
  auto table = g_engine->sessions()->Processes("test", id, true);
  ASSERT_TRUE(table.has_value()) << table.error().message;
  ProcessSpec spec;
  spec.argv = {"python3", "-c", Fetch(upstream.port())};
  auto started = (*table)->Start(spec);
  ASSERT_TRUE(started.has_value()) << started.error().message;
  auto ended = (*table)->Wait(started->pid, std::chrono::steady_clock::now() + std::chrono::seconds(30));
  ASSERT_TRUE(ended.has_value()) << ended.error().message;
  EXPECT_EQ(ended->exit_code, std::optional<int>(0));
  // (Listed once the proxy's side of it has ended too, which may be a moment after the process.)
  std::vector<NetConnection> listed;
  for (int i = 0; i < 50 && listed.empty(); ++i) {
    r = Exec(id, "import time\ntime.sleep(0.1)");
    ASSERT_TRUE(r.network.has_value()) << Describe(r);
    listed = r.network->connections;
  }
  ASSERT_EQ(listed.size(), 1u) << Describe(r);
  EXPECT_EQ(listed[0].host, "127.0.0.2");

  // No more sockets than a session without network (the connector and the listener are the
  // init's), and no UDP or raw socket.
  auto plain = S().Create();
  ASSERT_TRUE(plain.has_value()) << plain.error().message;
  Result with = Exec(id, kProbe), without = Exec(plain->id, kProbe);
  EXPECT_EQ(Out(with), Out(without)) << Describe(with);
  EXPECT_NE(Out(with).find("PermissionError\nPermissionError\n"), std::string::npos) << Describe(with);
  // The session without network reaches nothing, and has no proxy to name; what its code
  // tried is listed as refused, noted inside the sandbox (netwatch.py).
  // (Its loopback is its own: the upstream's address there reaches nothing, and is not listed.)
  const std::string port = std::to_string(upstream.port());
  Result none = Exec(plain->id,
                     "import os, urllib.request\nprint(os.environ.get('HTTP_PROXY'))\n"
                     "try:\n    urllib.request.urlopen('http://127.0.0.2:" +
                         port +
                         "/', timeout=5)\n"
                         "except OSError as e:\n    pass\n"
                         "urllib.request.urlopen('http://192.0.2.1:" +
                         port + "/', timeout=5)\n");
  EXPECT_EQ(none.status, Status::kError) << Describe(none);
  EXPECT_EQ(Out(none), "None\n") << Describe(none);
  ASSERT_TRUE(none.network.has_value()) << Describe(none);
  ASSERT_EQ(none.network->connections.size(), 1u) << Describe(none);
  EXPECT_EQ(none.network->connections[0].host, "192.0.2.1");
  EXPECT_EQ(none.network->connections[0].reason, "no network");
  (void)S().Delete(plain->id);

  // The kernel's end is not the network's: the relay is the init's.
  r = Exec(id, "import os\nos._exit(3)\n");
  ASSERT_TRUE(r.session.has_value());
  EXPECT_TRUE(r.session->files_kept) << Describe(r);
  r = Exec(id, Fetch(upstream.port()));
  EXPECT_EQ(Out(r), std::string(kBody) + "\n") << Describe(r);
  EXPECT_TRUE(S().Delete(id).has_value());
}

}  // namespace
}  // namespace execbox::engine
