// What the sandbox's code sends the host's network proxy (engine/proxy_protocol.h) and the
// policy entries a request may carry (engine/net_policy.h): hostile bytes, parsed by trusted
// code in the server. The parsers must stay within their bounds and never consume more than
// they were given; a parsed request must be one the proxy can act on.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "engine/net_policy.h"
#include "engine/proxy_protocol.h"

namespace {

namespace engine = execbox::engine;

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

void CheckDone(const engine::ProxyRequest& r, size_t given) {
  if (r.state != engine::ParseState::kDone) return;
  Check(r.consumed <= given);
  Check(!r.host.empty() && r.port != 0);
  // What is forwarded upstream is a head of its own: no bytes past its end.
  if (!r.forward.empty()) Check(r.forward.ends_with("\r\n\r\n") && r.forward.find("\r\n\r\n") == r.forward.size() - 4);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  CheckDone(engine::ParseHttpProxyHead(bytes), size);
  CheckDone(engine::ParseSocksRequest(bytes), size);
  engine::ProxyRequest g = engine::ParseSocksGreeting(bytes);
  if (g.state == engine::ParseState::kDone) Check(g.consumed <= size);
  if (auto rule = engine::ParseNetRule(bytes)) {
    Check(rule->text == bytes && rule->prefix <= 128);
    engine::NetPolicy p;
    p.allow.push_back(*rule);
    (void)engine::CheckName(p, bytes, 443);
    (void)engine::FirstEntryBeyond(p, p);
    Check(!engine::FirstEntryBeyond(p, p).has_value());  // an entry covers itself
  }
  return 0;
}
