// E2B's snapshots over the snapshots the engine keeps (Gate::KeepSnapshot; engine/
// snapshot_shelf.h): `createSnapshot` keeps the sandbox's state (its default context's globals
// and its home) under a new id, `listSnapshots` lists the key's, `Sandbox.create(snapshotId)`
// makes a sandbox from one (e2b_control.cc, Create), and `deleteSnapshot` (E2B's template
// delete) drops it. E2B's other template, volume and secret routes are not offered here: each
// answers so, in E2B's error shape, with the reason.
#include "api/common/json_text.h"
#include "api/e2b/e2b_api.h"
#include "api/e2b/e2b_sandbox.h"
#include "api/http/auth.h"
#include "api/http/http_target.h"

namespace execbox::api::e2b {
namespace {

nlohmann::json SnapshotJson(const engine::ShelvedSnapshot& s) {
  return {{"snapshotID", s.id}, {"names", s.names}};
}

}  // namespace

bool KnownTemplate(const std::string& id) {
  return id == "code-interpreter-v1" || id == "code-interpreter" || id == "base";
}

void E2bApi::CreateSnapshot(HttpRequest& request, std::shared_ptr<Exchange>& exchange, const ApiKey& key,
                            std::shared_ptr<Sandbox> sandbox) {
  auto body = JsonBody(request, *exchange);
  if (!body) return;
  std::optional<std::string> name;
  if (body->contains("name") && !(*body)["name"].is_null()) {
    if (!(*body)["name"].is_string()) return SendError(*exchange, 400, "name must be a string");
    name = (*body)["name"].get<std::string>();
    if (auto ok = engine::SnapshotShelf::CheckName(*name); !ok)
      return SendError(*exchange, 400, ok.error().message);
  }
  const engine::Caller caller = CallerOf(key);
  const engine::Origin origin{.transport = engine::Transport::kE2b, .peer = request.peer};
  // The state is taken inside the sandbox (as a fork's is): never on the I/O thread.
  calls_.Spawn([this, exchange, sandbox, caller, origin, name] {
    auto kept = gate_.KeepSnapshot(caller, sandbox->id, name, origin);
    if (!kept) {
      if (kept.error().reason == engine::RefusalReason::kSessionNotFound) Forget(sandbox->id);
      return SendRefusal(*exchange, kept.error());
    }
    SendJson(*exchange, 201, SnapshotJson(*kept));
  });
}

void E2bApi::OtherPlane(HttpRequest& request, std::shared_ptr<Exchange>& exchange) {
  auto key = Authenticate(request, *exchange);
  if (!key) return;
  const engine::Caller caller = CallerOf(*key);
  const engine::Origin origin{.transport = engine::Transport::kE2b, .peer = request.peer};
  const std::string& path = request.path;
  const std::string& method = request.method;
  if (path == "/snapshots" && method == "GET") {
    const std::string sandbox_id = QueryParam(request.query, "sandboxID").value_or("");
    const std::string name = QueryParam(request.query, "name").value_or("");
    auto page = PageOf(request, *exchange);
    if (!page) return;
    const size_t limit = page->limit, offset = page->offset;
    nlohmann::json list = nlohmann::json::array();
    size_t matched = 0;
    bool more = false;
    for (const auto& s : gate_.KeptSnapshots(caller)) {
      if (!sandbox_id.empty() && s.source != sandbox_id) continue;
      if (!name.empty() && std::find(s.names.begin(), s.names.end(), name) == s.names.end()) continue;
      if (matched++ < offset) continue;
      if (list.size() == limit) {
        more = true;
        break;
      }
      list.push_back(SnapshotJson(s));
    }
    HttpResponse response{.status = 200, .body = Serialize(list)};
    if (more) response.headers.emplace_back("x-next-token", std::to_string(offset + limit));
    return exchange->Respond(std::move(response));
  }
  constexpr std::string_view kTemplates = "/templates/";
  if (path.starts_with(kTemplates) && method == "DELETE" &&
      path.find('/', kTemplates.size()) == std::string::npos) {
    const std::string id = PercentDecode(path.substr(kTemplates.size())).value_or("");
    if (KnownTemplate(id))
      return SendError(*exchange, 400, "template " + id + " is this server's own and cannot be deleted");
    auto dropped = gate_.DropSnapshot(caller, id, origin);
    if (!dropped) return SendError(*exchange, 404, "template " + id.substr(0, 100) + " not found");
    return exchange->Respond(HttpResponse{.status = 204, .content_type = "", .body = ""});
  }
  constexpr std::string_view kAliases = "/templates/aliases/";
  if (path.starts_with(kAliases) && method == "GET") {
    const std::string alias = PercentDecode(path.substr(kAliases.size())).value_or("");
    std::optional<std::string> id;
    if (KnownTemplate(alias)) id = alias;
    for (const auto& s : gate_.KeptSnapshots(caller)) {
      if (!id && std::find(s.names.begin(), s.names.end(), alias) != s.names.end()) id = s.id;
    }
    if (!id) return SendError(*exchange, 404, "template alias " + alias.substr(0, 100) + " not found");
    return SendJson(*exchange, 200, {{"templateID", *id}, {"public", false}});
  }
  // The rest, each with the one line that says why.
  std::string why;
  if (path.starts_with("/templates") || path.starts_with("/v2/templates") ||
      path.starts_with("/v3/templates")) {
    why =
        "template builds are not offered: an execbox sandbox is its server's Debian Python (templates "
        "code-interpreter-v1 and base), more packages come from the server's wheelhouse (pip install), "
        "and a sandbox's state is kept with createSnapshot";
  } else if (path.starts_with("/volume")) {
    why = "volumes are not offered: a sandbox's files are its own (its home), kept by pause and snapshots";
  } else if (path.starts_with("/secrets")) {
    why = "E2B-cloud secrets are not offered: give a sandbox its environment with envs at creation";
  } else {
    why = "this route is not offered";
  }
  SendError(*exchange, 501,
            method + " " + path.substr(0, 100) + " of E2B's API is not implemented by execbox (" + why + ")");
}

}  // namespace execbox::api::e2b
