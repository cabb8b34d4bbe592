// Network under a policy (docs/security.md, "Network"), through the real binary, as root and as
// an unprivileged user: an upstream HTTP server of the test's own on 127.0.0.2 (not 127.0.0.1,
// which inside the sandbox is the sandbox's own loopback and in NO_PROXY), reached through the
// host's proxy only when the policy allows it, and every attempt listed in the Result.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <set>
#include <string>
#include <thread>

#include "e2e/harness.h"
#include "lib/loopback_upstream.h"

namespace execbox::e2e {
namespace {

using testlib::kBody;
using testlib::Upstream;

class Network : public BothModes {
 protected:
  Upstream upstream;
  std::string Target() const { return "127.0.0.2:" + std::to_string(upstream.port()); }
  std::string Url() const { return "http://" + Target() + "/"; }
};

const nlohmann::json* FindConnection(const nlohmann::json& result, const std::string& host, int port) {
  for (const auto& c : result["network"]["connections"]) {
    if (c["host"] == host && c["port"] == port) return &c;
  }
  return nullptr;
}

TEST_P(Network, AllowedHostIsReachedThroughHttpConnectAndSocks) {
  ASSERT_GT(upstream.port(), 0);
  const std::string code =
      "import urllib.request, subprocess\n"
      "print(urllib.request.urlopen('" + Url() + "', timeout=20).read().decode())\n"
      "def curl(*a):\n"
      "    r = subprocess.run(['curl', '-sS', '--max-time', '20', *a, '" + Url() + "'], capture_output=True, text=True)\n"
      "    print(r.stdout or r.stderr)\n"
      "curl()\n"
      "curl('--proxytunnel')\n"
      "curl('--proxy', 'socks5h://127.0.0.1:3128')\n";
  Invocation r = Code(code, {"--server", "never", "--allow-net", Target()});
  ASSERT_EQ(r.exit_status, 0) << r.err << r.out;
  EXPECT_EQ(r.json["status"], "ok") << r.json.dump(2);
  EXPECT_EQ(r.json["stdout"], std::string(kBody) + "\n" + kBody + "\n" + kBody + "\n" + kBody + "\n");
  const auto& list = r.json["network"]["connections"];
  ASSERT_EQ(list.size(), 4u) << r.json["network"].dump(2);
  std::set<std::string> protocols;
  for (const auto& c : list) {
    EXPECT_TRUE(c["allowed"].get<bool>()) << c.dump();
    EXPECT_EQ(c["address"], "127.0.0.2");
    EXPECT_EQ(c["rule"], Target());
    EXPECT_GT(c["bytes_received"].get<uint64_t>(), sizeof kBody - 1);
    EXPECT_GT(c["bytes_sent"].get<uint64_t>(), 0u);
    protocols.insert(c["protocol"].get<std::string>());
  }
  EXPECT_EQ(protocols, (std::set<std::string>{"http", "connect", "socks5"}));
}

TEST_P(Network, DeniedDestinationsAreRefusedAndListed) {
  const std::string other_port = "127.0.0.2:" + std::to_string(upstream.port() + 1);
  const std::string code =
      "import urllib.request\n"
      "for url in ['http://169.254.169.254/latest/meta-data/', 'http://" + other_port + "/',\n"
      "            'http://not-listed.example.test/', 'http://blocked.example.test/']:\n"
      "    try:\n"
      "        urllib.request.urlopen(url, timeout=20)\n"
      "        print('reached', url)\n"
      "    except Exception as e:\n"
      "        print('refused', getattr(e, 'code', e))\n"
      // localhost is in NO_PROXY (the sandbox's own loopback): through the proxy on purpose.
      "import subprocess\n"
      "r = subprocess.run(['curl', '-s', '--noproxy', '', '-x', 'http://127.0.0.1:3128', '-o', '/dev/null',\n"
      "                    '-w', '%{http_code}', 'http://localhost:" + std::to_string(upstream.port()) + "/'],\n"
      "                   capture_output=True, text=True)\n"
      "print('localhost', r.stdout)\n";
  Invocation r = Code(code, {"--server", "never", "--allow-net", Target(), "--allow-net", "*.example.test",
                             "--allow-net", "localhost", "--deny-net", "blocked.example.test"});
  ASSERT_EQ(r.exit_status, 0) << r.err << r.out;
  EXPECT_EQ(r.json["stdout"].get<std::string>().find("reached"), std::string::npos) << r.json["stdout"];
  EXPECT_EQ(upstream.served(), 0);
  auto reason = [&](const std::string& host, int port) -> std::string {
    const nlohmann::json* c = FindConnection(r.json, host, port);
    if (c == nullptr) return "(not listed)";
    EXPECT_FALSE((*c)["allowed"].get<bool>()) << c->dump();
    return (*c)["reason"].get<std::string>();
  };
  EXPECT_EQ(reason("169.254.169.254", 80), "not in allowlist");
  EXPECT_EQ(reason("127.0.0.2", upstream.port() + 1), "not in allowlist");
  EXPECT_EQ(reason("blocked.example.test", 80), "denied by rule");
  // A name allowed by name that resolves to loopback is refused by its address (rebinding).
  EXPECT_EQ(reason("localhost", upstream.port()), "private address");
  // Allowed by the policy but not resolvable here (no such name).
  const nlohmann::json* unresolved = FindConnection(r.json, "not-listed.example.test", 80);
  ASSERT_NE(unresolved, nullptr);
  EXPECT_NE((*unresolved)["reason"].get<std::string>().find("name not resolved"), std::string::npos);
}

TEST_P(Network, NoPolicyMeansNoNetworkAsBefore) {
  const std::string code =
      "import os, socket, urllib.request\n"
      "print(sorted(k for k in os.environ if 'proxy' in k.lower()))\n"
      "try:\n"
      "    urllib.request.urlopen('" + Url() + "', timeout=5)\n"
      "    print('reached')\n"
      "except Exception as e:\n"
      "    print('refused')\n"
      "try:\n"
      "    socket.socket(socket.AF_INET, socket.SOCK_STREAM)\n"
      "    print('inet socket')\n"
      "except PermissionError:\n"
      "    print('no inet socket')\n";
  Invocation r = Code(code, {"--server", "never"});
  ASSERT_EQ(r.exit_status, 0) << r.err << r.out;
  EXPECT_EQ(r.json["stdout"], "[]\nrefused\nno inet socket\n");
  EXPECT_EQ(upstream.served(), 0);
  // What it tried is listed, refused ("no network": noted inside the sandbox), and only that.
  ASSERT_TRUE(r.json.contains("network")) << r.out;
  ASSERT_EQ(r.json["network"]["connections"].size(), 1u) << r.out;
  const nlohmann::json& tried = r.json["network"]["connections"][0];
  EXPECT_EQ(tried["allowed"], false) << r.out;
  EXPECT_EQ(tried["reason"], "no network") << r.out;
  EXPECT_EQ(tried["port"], upstream.port()) << r.out;
}

TEST_P(Network, WithAPolicyRawSocketsStillReachNothing) {
  const std::string code =
      "import socket\n"
      "def attempt(name, f):\n"
      "    try:\n"
      "        f()\n"
      "        print(name, 'worked')\n"
      "    except OSError as e:\n"
      "        print(name, 'refused')\n"
      "attempt('udp', lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM))\n"
      "attempt('raw', lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP))\n"
      "attempt('inet6', lambda: socket.socket(socket.AF_INET6, socket.SOCK_STREAM))\n"
      "attempt('netlink', lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW))\n"
      "attempt('direct', lambda: socket.create_connection(('127.0.0.2', " + std::to_string(upstream.port()) +
      "), timeout=5))\n"
      "attempt('outside', lambda: socket.create_connection(('93.184.216.34', 80), timeout=5))\n";
  Invocation r = Code(code, {"--server", "never", "--allow-net", Target()});
  ASSERT_EQ(r.exit_status, 0) << r.err << r.out;
  EXPECT_EQ(r.json["stdout"],
            "udp refused\nraw refused\ninet6 refused\nnetlink refused\ndirect refused\noutside refused\n");
  EXPECT_EQ(upstream.served(), 0);
}

TEST_P(Network, ABadEntryIsRefusedNamingIt) {
  Invocation r = Code("print(1)", {"--server", "never", "--allow-net", "10.0.0.1/8"});
  EXPECT_EQ(r.exit_status, 2);
  EXPECT_NE(r.err.find("10.0.0.1/8"), std::string::npos) << r.err;
}

INSTANTIATE_TEST_SUITE_P(Modes, Network, ::testing::Values(Mode::kRoot, Mode::kUnprivileged),
                         [](const auto& param_info) { return ModeName(param_info.param); });

}  // namespace
}  // namespace execbox::e2e
