// `execbox run` through a local `execbox serve --unix`: its warm pool instead of a cold jail of
// our own, when a server runs here and takes the request. Where it does not (no socket, not
// this user's, busy, the request beyond its limits), nothing has been printed and the caller
// runs cold; the result's usage.engine says which it was.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cli/local_client.h"
#include "engine/gate.h"
#include "engine/result.h"

namespace execbox::cli {

// Where `execbox run` looks: EXECBOX_SOCKET alone when it is set; else the user's own server
// ($XDG_RUNTIME_DIR/execbox/execbox.sock, the user unit's), then the system's
// (/run/execbox/execbox.sock, the package's).
std::vector<std::string> LocalServerSockets();

// The first of LocalServerSockets() a trusted server answers on, connected; else why not, for
// each place looked at.
struct FoundServer {
  std::string path;
  std::unique_ptr<LocalClient> client;
};
Expected<FoundServer> FindLocalServer();

struct ServerAttempt {
  std::optional<engine::Result> result;  // it ran on the server
  nlohmann::json json;                   // ... and this is the server's JSON of it
  std::string why_not;                   // otherwise, why not
  int http_status = 0;                   // of a refusal; 0 when no server answered
  bool output_started = false;           // the code's output was already printed: too late for cold
};

// Runs the request (its limits all given: the server's defaults do not apply) on the first
// server that answers. With stream_output, the code's stdout and stderr are written to ours
// as they arrive.
ServerAttempt RunOnLocalServer(const engine::ExecutionRequest& request, bool stream_output);

}  // namespace execbox::cli
