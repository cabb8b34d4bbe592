// The network policy's matcher and the proxy's parsers, with hostile input.
#include "engine/net_policy.h"

#include <gtest/gtest.h>

#include "engine/net_hosts.h"
#include "engine/proxy_protocol.h"

namespace execbox::engine {
namespace {

NetPolicy Policy(std::vector<std::string> allow, std::vector<std::string> deny = {}) {
  auto p = ParseNetPolicy(allow, deny);
  EXPECT_TRUE(p.has_value()) << (p ? "" : p.error().message);
  return p ? *p : NetPolicy{};
}

std::array<uint8_t, 16> Addr(const char* text) { return *ParseAddress(text); }

TEST(NetRule, ParsesEachForm) {
  auto host = ParseNetRule("PyPI.Example.test:443");
  ASSERT_TRUE(host);
  EXPECT_EQ(host->kind, NetRule::Kind::kHost);
  EXPECT_EQ(host->host, "pypi.example.test");
  EXPECT_EQ(host->port, 443);
  auto suffix = ParseNetRule("*.example.test");
  ASSERT_TRUE(suffix);
  EXPECT_EQ(suffix->kind, NetRule::Kind::kSuffix);
  auto cidr = ParseNetRule("10.1.2.0/24:8080");
  ASSERT_TRUE(cidr);
  EXPECT_EQ(cidr->kind, NetRule::Kind::kAddress);
  EXPECT_EQ(cidr->prefix, 96 + 24);
  EXPECT_EQ(cidr->port, 8080);
  auto v6 = ParseNetRule("[2001:db8::/32]:443");
  ASSERT_TRUE(v6);
  EXPECT_EQ(v6->prefix, 32);
  EXPECT_TRUE(ParseNetRule("2001:db8::1"));
}

TEST(NetRule, RefusesBadEntriesNamingThem) {
  for (const char* bad : {"", "a b", "*", "*example.test", "a.*.test", "host:0", "host:65536", "host:", "10.0.0.1/8",
                          "10.0.0.0/33", "[::1", "[::1]x", "name/8", "-:1:2", "exa\nmple"}) {
    EXPECT_FALSE(ParseNetRule(bad)) << bad;
  }
  auto e = ParseNetPolicy({"ok.test", "bad name"}, {});
  ASSERT_FALSE(e);
  EXPECT_NE(e.error().message.find("allow[1]: 'bad name'"), std::string::npos) << e.error().message;
  EXPECT_FALSE(ParseNetRule(std::string(300, 'a')));
  EXPECT_FALSE(ParseNetPolicy(std::vector<std::string>(65, "a.test"), {}));
}

TEST(NetPolicy, NamesSuffixesPortsAndDenyWins) {
  NetPolicy p = Policy({"api.test:443", "*.example.test"}, {"bad.example.test"});
  EXPECT_TRUE(CheckName(p, "api.test", 443).allowed);
  EXPECT_TRUE(CheckName(p, "API.test.", 443).allowed);
  EXPECT_FALSE(CheckName(p, "api.test", 80).allowed);
  EXPECT_TRUE(CheckName(p, "a.example.test", 80).allowed);
  EXPECT_FALSE(CheckName(p, "example.test", 80).allowed);  // a suffix is what is below it
  EXPECT_FALSE(CheckName(p, "notexample.test", 80).allowed);
  NetVerdict denied = CheckName(p, "bad.example.test", 80);
  EXPECT_FALSE(denied.allowed);
  EXPECT_EQ(denied.reason, "denied by rule");
  EXPECT_EQ(denied.rule, "bad.example.test");
  EXPECT_EQ(CheckName(p, "other.test", 80).reason, "not in allowlist");
}

TEST(NetPolicy, SpecialAddressesOnlyByAnAddressEntry) {
  NetPolicy p = Policy({"*.example.test", "127.0.0.2/32:8080"});
  // An allowed name that resolves to a private, loopback or metadata address: refused.
  for (const char* a : {"127.0.0.1", "10.0.0.1", "192.168.1.1", "172.16.0.1", "169.254.169.254", "100.64.0.1",
                        "0.0.0.0", "224.0.0.1", "::1", "fe80::1", "fd00::1", "::ffff:127.0.0.1"}) {
    NetVerdict v = CheckAddress(p, "x.example.test", Addr(a), 80);
    EXPECT_FALSE(v.allowed) << a;
    EXPECT_EQ(v.reason, "private address") << a;
  }
  EXPECT_TRUE(CheckAddress(p, "x.example.test", Addr("93.184.216.34"), 80).allowed);
  EXPECT_TRUE(CheckAddress(p, "127.0.0.2", Addr("127.0.0.2"), 8080).allowed);
  EXPECT_FALSE(CheckAddress(p, "127.0.0.2", Addr("127.0.0.2"), 8081).allowed);
  EXPECT_FALSE(CheckName(p, "169.254.169.254", 80).allowed);
  // Denied by address even when the name is allowed.
  NetPolicy d = Policy({"*.example.test"}, {"93.184.216.0/24"});
  EXPECT_EQ(CheckAddress(d, "x.example.test", Addr("93.184.216.34"), 80).reason, "denied by rule");
}

TEST(NetHosts, TheOperatorsAnswersParseLikeEtcHostsAndBadLinesAreNamed) {
  auto hosts = ParseNetHosts(
      "# test upstreams\n\n127.0.0.2 PyPI.Example.test data.example.test  # both\n"
      "\t::1\tpypi.example.test.\r\n10.0.0.5 pypi.example.test\n");
  ASSERT_TRUE(hosts.has_value()) << hosts.error().message;
  const auto* pypi = hosts->Find("PYPI.example.test.");
  ASSERT_NE(pypi, nullptr);
  EXPECT_EQ(*pypi, (std::vector<std::array<uint8_t, 16>>{Addr("127.0.0.2"), Addr("::1"), Addr("10.0.0.5")}));
  ASSERT_NE(hosts->Find("data.example.test"), nullptr);
  EXPECT_EQ(hosts->Find("other.example.test"), nullptr);
  EXPECT_EQ(hosts->Find("127.0.0.2"), nullptr);  // a literal is never vouched for
  for (auto [text, why] : std::vector<std::pair<const char*, const char*>>{
           {"pypi.example.test 127.0.0.2\n", "line 1: expected an IP address"},
           {"# ok\n127.0.0.2\n", "line 2: an address without a name"},
           {"127.0.0.2 bad/name\n", "line 1: 'bad/name' is not a host name"},
           {"127.0.0.2 a.test 10.0.0.1\n", "line 1: '10.0.0.1' is not a host name"}}) {
    auto bad = ParseNetHosts(text);
    ASSERT_FALSE(bad.has_value()) << text;
    EXPECT_NE(bad.error().message.find(why), std::string::npos) << bad.error().message;
  }
  EXPECT_FALSE(ParseNetHosts(std::string(kMaxNetHostsBytes + 1, '#')).has_value());
  std::string many;
  for (size_t i = 0; i <= kMaxAddressesPerName; ++i) many += "10.0.0." + std::to_string(i + 1) + " a.test\n";
  EXPECT_FALSE(ParseNetHosts(many).has_value());
}

TEST(NetHosts, AnAddressTheOperatorNamedCountsAsPublicButDenyAndTheAllowlistStillApply) {
  NetPolicy p = Policy({"pypi.example.test"}, {"10.9.0.0/16"});
  EXPECT_EQ(CheckAddress(p, "pypi.example.test", Addr("127.0.0.2"), 80).reason, "private address");
  EXPECT_TRUE(CheckAddress(p, "pypi.example.test", Addr("127.0.0.2"), 80, true).allowed);
  EXPECT_EQ(CheckAddress(p, "pypi.example.test", Addr("10.9.0.1"), 80, true).reason, "denied by rule");
  EXPECT_EQ(CheckAddress(p, "other.example.test", Addr("127.0.0.2"), 80, true).reason, "not in allowlist");
}

TEST(NetPolicy, RequestWithinTheServersBound) {
  NetPolicy bound = Policy({"*.example.test", "api.test:443", "10.0.0.0/8"}, {"secret.example.test"});
  EXPECT_FALSE(FirstEntryBeyond(Policy({"a.example.test", "*.b.example.test", "api.test:443", "10.1.0.0/16:22"}), bound));
  EXPECT_EQ(FirstEntryBeyond(Policy({"a.example.test", "api.test"}), bound), "api.test");  // any port > 443
  EXPECT_EQ(FirstEntryBeyond(Policy({"*.test"}), bound), "*.test");
  EXPECT_EQ(FirstEntryBeyond(Policy({"0.0.0.0/0"}), bound), "0.0.0.0/0");
  EXPECT_EQ(FirstEntryBeyond(Policy({"example.test"}), bound), "example.test");
  NetPolicy within = Within(Policy({"*.example.test"}), bound);
  EXPECT_FALSE(CheckName(within, "secret.example.test", 443).allowed);
}

TEST(ProxyParse, HttpConnect) {
  auto r = ParseHttpProxyHead("CONNECT api.test:443 HTTP/1.1\r\nHost: api.test:443\r\n\r\nrest");
  ASSERT_EQ(r.state, ParseState::kDone);
  EXPECT_TRUE(r.tunnel);
  EXPECT_EQ(r.host, "api.test");
  EXPECT_EQ(r.port, 443);
  EXPECT_EQ(r.consumed, std::string("CONNECT api.test:443 HTTP/1.1\r\nHost: api.test:443\r\n\r\n").size());
  auto v6 = ParseHttpProxyHead("CONNECT [::1]:8443 HTTP/1.1\r\n\r\n");
  ASSERT_EQ(v6.state, ParseState::kDone);
  EXPECT_EQ(v6.host, "::1");
  EXPECT_EQ(ParseHttpProxyHead("CONNECT api.test HTTP/1.1\r\n\r\n").state, ParseState::kBad);
  EXPECT_EQ(ParseHttpProxyHead("CONNECT api.test:443 HTTP/1.1\r\n").state, ParseState::kNeedMore);
}

TEST(ProxyParse, HttpAbsoluteUriIsRewritten) {
  auto r = ParseHttpProxyHead(
      "GET http://api.test:8080/a?b=1 HTTP/1.1\r\nHost: api.test:8080\r\nProxy-Connection: keep-alive\r\n"
      "Proxy-Authorization: x\r\nConnection: keep-alive\r\nAccept: */*\r\n\r\n");
  ASSERT_EQ(r.state, ParseState::kDone);
  EXPECT_FALSE(r.tunnel);
  EXPECT_EQ(r.port, 8080);
  EXPECT_EQ(r.forward,
            "GET /a?b=1 HTTP/1.1\r\nHost: api.test:8080\r\nAccept: */*\r\nConnection: close\r\n\r\n");
  auto bare = ParseHttpProxyHead("GET http://api.test HTTP/1.0\r\n\r\n");
  ASSERT_EQ(bare.state, ParseState::kDone);
  EXPECT_EQ(bare.port, 80);
  EXPECT_EQ(bare.forward, "GET / HTTP/1.0\r\nHost: api.test\r\nConnection: close\r\n\r\n");
}

TEST(ProxyParse, HttpHostileHeads) {
  const char* bad[] = {
      "GET /relative HTTP/1.1\r\n\r\n",
      "GET https://api.test/ HTTP/1.1\r\n\r\n",
      "GET http://user:pw@api.test/ HTTP/1.1\r\n\r\n",
      "GET http://api.test:99999/ HTTP/1.1\r\n\r\n",
      "GET http://api.test/ HTTP/2\r\n\r\n",
      "GET  http://api.test/ HTTP/1.1\r\n\r\n",
      "GET http://api.test/ HTTP/1.1\r\nno colon\r\n\r\n",
      "GET http://api.test/ HTTP/1.1\r\nX: a\x01b\r\n\r\n",
      "G\x01T http://api.test/ HTTP/1.1\r\n\r\n",
      "\r\n\r\n",
  };
  for (const char* head : bad) EXPECT_EQ(ParseHttpProxyHead(head).state, ParseState::kBad) << head;
  std::string huge = "GET http://api.test/ HTTP/1.1\r\nX: " + std::string(kMaxProxyHeadBytes, 'a');
  EXPECT_EQ(ParseHttpProxyHead(huge).state, ParseState::kBad);
  std::string many = "GET http://api.test/ HTTP/1.1\r\n";
  for (size_t i = 0; i <= kMaxProxyHeaders; ++i) many += "X: y\r\n";
  EXPECT_EQ(ParseHttpProxyHead(many + "\r\n").state, ParseState::kBad);
}

TEST(ProxyParse, Socks5) {
  EXPECT_EQ(ParseSocksGreeting(std::string("\x05", 1)).state, ParseState::kNeedMore);
  EXPECT_EQ(ParseSocksGreeting(std::string("\x05\x02\x00", 3)).state, ParseState::kNeedMore);
  auto g = ParseSocksGreeting(std::string("\x05\x02\x02\x00", 4));
  ASSERT_EQ(g.state, ParseState::kDone);
  EXPECT_EQ(g.consumed, 4u);
  EXPECT_EQ(ParseSocksGreeting(std::string("\x05\x01\x02", 3)).state, ParseState::kBad);  // no "no auth"
  EXPECT_EQ(ParseSocksGreeting(std::string("\x04\x01\x00", 3)).state, ParseState::kBad);
  EXPECT_EQ(ParseSocksGreeting(std::string("\x05\x00", 2)).state, ParseState::kBad);

  auto name = ParseSocksRequest(std::string("\x05\x01\x00\x03\x08" "api.test" "\x01\xbb", 15));
  ASSERT_EQ(name.state, ParseState::kDone);
  EXPECT_EQ(name.host, "api.test");
  EXPECT_EQ(name.port, 443);
  auto v4 = ParseSocksRequest(std::string("\x05\x01\x00\x01\xa9\xfe\xa9\xfe\x00\x50", 10));
  ASSERT_EQ(v4.state, ParseState::kDone);
  EXPECT_EQ(v4.host, "169.254.169.254");
  auto v6 = ParseSocksRequest(std::string("\x05\x01\x00\x04", 4) + std::string(15, '\0') + "\x01" + std::string("\x00\x50", 2));
  ASSERT_EQ(v6.state, ParseState::kDone);
  EXPECT_EQ(v6.host, "0:0:0:0:0:0:0:1");
  // A length byte that promises more than arrived waits; a bad one is refused.
  EXPECT_EQ(ParseSocksRequest(std::string("\x05\x01\x00\x03\xff" "abc", 8)).state, ParseState::kNeedMore);
  EXPECT_EQ(ParseSocksRequest(std::string("\x05\x01\x00\x03\x00\x00\x50", 7)).state, ParseState::kBad);
  EXPECT_EQ(ParseSocksRequest(std::string("\x05\x01\x00\x03\x02\x00a\x00\x50", 9)).state, ParseState::kBad);
  EXPECT_EQ(ParseSocksRequest(std::string("\x05\x02\x00\x01\x01\x02\x03\x04\x00\x50", 10)).socks_reply, 7);
  EXPECT_EQ(ParseSocksRequest(std::string("\x05\x01\x00\x09\x01\x02\x03\x04\x00\x50", 10)).socks_reply, 8);
  EXPECT_EQ(ParseSocksRequest(std::string("\x05\x01\x00\x01\x01\x02\x03\x04\x00\x00", 10)).state, ParseState::kBad);
  EXPECT_EQ(SocksReply(0).size(), 10u);
}

}  // namespace
}  // namespace execbox::engine

// A flood through the host's proxy: what the sandbox's relay would send, 10,000 times.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <thread>

#include "engine/egress_proxy.h"

namespace execbox::engine {
namespace {

// Passes one end of a fresh stream socket pair over the connector, as the agent's relay does
// with each connection it accepts, after writing a proxy request into it; waits for the proxy's
// answer to end (it closes the socket), so the attempts arrive one after another. Adds what
// the proxy answered (the request's response) to `answer`, when given.
void Attempt(int connector, const std::string& request = "GET http://a.example.test/ HTTP/1.0\r\n\r\n",
             size_t* answer = nullptr) {
  int pair[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
  ASSERT_EQ(::send(pair[0], request.data(), request.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(request.size()));
  char byte = 'c';
  iovec iov{.iov_base = &byte, .iov_len = 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(c), &pair[1], sizeof(int));
  ASSERT_EQ(::sendmsg(connector, &msg, MSG_NOSIGNAL), 1);
  ::close(pair[1]);
  char buf[16384];
  for (ssize_t n; (n = ::recv(pair[0], buf, sizeof buf, 0)) > 0;) {
    if (answer != nullptr) *answer += static_cast<size_t>(n);
  }
  ::close(pair[0]);
}

TEST(EgressProxy, AFloodOfAttemptsIsServedUpToTheLimitAndEveryOneCounted) {
  // Nothing allowed: the first 100 are refused by the policy, the rest by the limit.
  auto proxy = EgressProxy::Start(NetPolicy{}, EgressLimits{.max_connections = 100});
  ASSERT_TRUE(proxy.has_value()) << proxy.error().message;
  for (int i = 0; i < 10'000; ++i) Attempt((*proxy)->sandbox_fd());
  (*proxy)->CloseSandboxEnd();
  const NetRecord record = (*proxy)->Finish();
  EXPECT_EQ(record.connections.size(), EgressLimits{}.max_listed);
  EXPECT_EQ(record.connections.size() + record.omitted, 10'000u);
  EXPECT_EQ(record.allowed, 0u);
  EXPECT_EQ(record.refused, 10'000u);
  size_t by_policy = 0, by_limit = 0;
  for (const NetConnection& c : record.connections) {
    EXPECT_FALSE(c.allowed);
    (c.reason == "limit" ? by_limit : by_policy) += 1;
  }
  EXPECT_EQ(by_policy, 100u);
  EXPECT_EQ(by_limit, EgressLimits{}.max_listed - 100);
}

TEST(EgressProxy, AConnectionThatWouldMoveMoreThanTheExecutionsBytesIsCutThere) {
  // An upstream on 127.0.0.2 that answers each connection with 1 MiB.
  const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(0x7f000002);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(listener, 8), 0);
  socklen_t len = sizeof a;
  ::getsockname(listener, reinterpret_cast<sockaddr*>(&a), &len);
  const int port = ntohs(a.sin_port);
  std::thread upstream([listener] {
    for (int i = 0; i < 2; ++i) {
      const int c = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) return;
      const std::string mib(1 << 20, 'x');
      (void)::send(c, mib.data(), mib.size(), MSG_NOSIGNAL);  // cut short when the proxy closes
      ::close(c);
    }
  });
  constexpr uint64_t kMax = 100'000;
  auto proxy = EgressProxy::Start(Policy({"127.0.0.2"}), EgressLimits{.max_bytes = kMax});
  ASSERT_TRUE(proxy.has_value()) << proxy.error().message;
  const std::string connect = "CONNECT 127.0.0.2:" + std::to_string(port) + " HTTP/1.1\r\n\r\n";
  size_t first = 0, second = 0;
  Attempt((*proxy)->sandbox_fd(), connect, &first);
  Attempt((*proxy)->sandbox_fd(), connect, &second);  // nothing of the allowance is left
  upstream.join();
  ::close(listener);
  (*proxy)->CloseSandboxEnd();
  const NetRecord record = (*proxy)->Finish();
  ASSERT_EQ(record.connections.size(), 2u);
  const size_t established = std::string("HTTP/1.1 200 Connection established\r\n\r\n").size();
  EXPECT_EQ(first, established + kMax);
  EXPECT_EQ(second, established);
  for (const NetConnection& c : record.connections) {
    EXPECT_TRUE(c.allowed);
    EXPECT_EQ(c.reason, "byte limit");
  }
  EXPECT_EQ(record.connections[0].bytes_received, kMax);
  EXPECT_EQ(record.connections[1].bytes_received, 0u);
}

}  // namespace
}  // namespace execbox::engine

// The gate's check of a request's policy against the server's, before anything runs.
#include "engine/gate.h"

namespace execbox::engine {
namespace {

Gate& GateWith(const NetPolicy& bound) {
  static auto engine = Engine::Create({.warm = false});
  // One gate per bound (a Gate keeps its options); they live as long as the test binary.
  static std::vector<std::unique_ptr<Gate>> gates;
  gates.push_back(std::make_unique<Gate>(**engine, GateOptions{.network = bound}));
  return *gates.back();
}

Refused<Admitted> AdmitWith(const NetPolicy& bound, std::optional<NetPolicy> asked, bool session = false) {
  Gate* gate = &GateWith(bound);
  ExecutionRequest r;
  r.program.code = "1";
  r.network = std::move(asked);
  if (session) r.session_id = "s";
  return gate->Admit(Caller{.id = "k"}, std::move(r), Origin{});
}

TEST(GateNetwork, RefusedBeyondTheServersPolicyNamingTheEntry) {
  NetPolicy bound = *ParseNetPolicy({"*.example.test", "10.0.0.0/8"}, {"secret.example.test"});
  auto ok = AdmitWith(bound, *ParseNetPolicy({"a.example.test:443"}, {}));
  ASSERT_TRUE(ok.has_value()) << ok.error().detail;
  // The server's deny entries are added to the request's.
  ASSERT_TRUE(ok->resolved().network.has_value());
  EXPECT_EQ(ok->resolved().network->deny.size(), 1u);
  auto beyond = AdmitWith(bound, *ParseNetPolicy({"a.example.test", "evil.test"}, {}));
  ASSERT_FALSE(beyond.has_value());
  EXPECT_EQ(beyond.error().type, "network-not-allowed");
  EXPECT_NE(beyond.error().detail.find("'evil.test'"), std::string::npos) << beyond.error().detail;
  auto none = AdmitWith(NetPolicy{}, *ParseNetPolicy({"a.example.test"}, {}));
  ASSERT_FALSE(none.has_value());
  EXPECT_EQ(none.error().type, "network-not-allowed");
  EXPECT_TRUE(AdmitWith(NetPolicy{}, std::nullopt).has_value());  // no policy: as ever
}

TEST(GateNetwork, SessionsRefuseAPolicyClearly) {
  NetPolicy bound = *ParseNetPolicy({"*.example.test"}, {});
  auto r = AdmitWith(bound, *ParseNetPolicy({"a.example.test"}, {}), true);
  ASSERT_FALSE(r.has_value());
  // Sessions need the warm engine; without it that refusal comes first. Either way nothing runs.
  EXPECT_TRUE(r.error().type == "network-not-allowed" || r.error().type == "sessions-unavailable") << r.error().type;
}

TEST(GateNetwork, AKeysBoundNarrowsTheServersAndBothDenyListsApply) {
  Gate& gate = GateWith(*ParseNetPolicy({"*.example.test", "10.0.0.0/8"}, {"secret.example.test"}));
  Caller narrow{.id = "narrow"};
  narrow.caps.network = *ParseNetPolicy({"a.example.test", "evil.test"}, {"a.example.test:22"});
  // An entry of the key's beyond the server's is dropped, not honoured.
  const NetPolicy bound = gate.NetworkBound(narrow);
  ASSERT_EQ(bound.allow.size(), 1u);
  EXPECT_EQ(bound.allow[0].text, "a.example.test");
  EXPECT_EQ(bound.deny.size(), 2u);
  auto run = [&](const Caller& caller, std::vector<std::string> allow) {
    ExecutionRequest r;
    r.program.code = "1";
    r.network = *ParseNetPolicy(allow, {});
    return gate.Admit(caller, std::move(r), Origin{});
  };
  auto ok = run(narrow, {"a.example.test:443"});
  ASSERT_TRUE(ok.has_value()) << ok.error().detail;
  EXPECT_EQ(ok->resolved().network->deny.size(), 2u);
  auto beyond = run(narrow, {"b.example.test"});
  ASSERT_FALSE(beyond.has_value());
  EXPECT_EQ(beyond.error().type, "network-not-allowed");
  EXPECT_NE(beyond.error().detail.find("key 'narrow'"), std::string::npos) << beyond.error().detail;
  EXPECT_TRUE(run(Caller{.id = "wide"}, {"b.example.test"}).has_value());  // the server's bound
  Caller offline{.id = "offline"};
  offline.caps.network = NetPolicy{};
  auto none = run(offline, {"a.example.test"});
  ASSERT_FALSE(none.has_value());
  EXPECT_NE(none.error().detail.find("may have no network"), std::string::npos) << none.error().detail;
}

}  // namespace
}  // namespace execbox::engine
