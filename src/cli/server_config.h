// The server's configuration, read by `execbox serve` and `execbox mcp`: a TOML file (toml++),
// then the environment (EXECBOX_API_KEYS), then command-line flags, each overriding the one
// before. The front ends never see it: the CLI hands each the part it needs.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "api/http/auth.h"
#include "base/error.h"
#include "engine/key_caps.h"
#include "engine/limit_schema.h"
#include "engine/net_hosts.h"
#include "engine/net_policy.h"
#include "runtime/python_program.h"

namespace execbox::cli {

struct ServerConfig {
  std::string listen = "127.0.0.1:8080";  // host:port; [v6]:port; "none": the Unix socket only
  // A Unix socket served beside (or instead of) TCP, "" for none: mode 0660, its clients known
  // by their kernel credentials (auth.h, AuthenticateLocal). `execbox run` looks for it.
  std::string unix_socket;
  // This server's name among several behind one router (engine::SessionOptions::instance);
  // "" when alone. Session and MCP session ids end in "." and it; responses carry it in
  // Execbox-Instance.
  std::string instance;
  std::vector<api::ApiKey> keys;
  // Origins allowed to call /mcp from a browser (exact match, e.g. "http://localhost:3000");
  // requests without an Origin header are allowed (they are not from a browser).
  std::vector<std::string> allowed_origins;

  // Connections.
  size_t max_connections = 512;
  size_t max_header_bytes = 16 << 10;
  size_t max_body_bytes = 48 << 20;         // files travel base64 in JSON bodies
  std::chrono::seconds header_timeout{10};  // whole header, however slowly it trickles
  std::chrono::seconds body_timeout{60};
  std::chrono::seconds idle_timeout{60};  // keep-alive between requests
  size_t max_requests_per_connection = 1000;
  size_t io_threads = 2;

  // Admission: executions running at once, and waiting beyond those; past both, 429.
  size_t max_running = 0;  // 0: twice the warm workers, at least 2
  size_t max_queue = 64;
  // The caps of a key whose [[keys]] entry leaves one unset ([admission] max_sessions_per_key,
  // ...; engine/key_caps.h).
  engine::KeyCaps key_defaults = engine::DefaultKeyCaps();

  // Limits ([limits.default] and [limits.max], engine/limit_schema.h): what a request gets by
  // default, and the most it may ask for (422 beyond).
  engine::LimitsConfig limits;

  // Engine.
  bool warm = true;  // false: --no-pool, every execution in a cold jail, no sessions
  size_t workers = 0;
  // The lean zygote (engine/pool.h): workers that serve standard-library code (0: none), and
  // each one's memory bound.
  size_t lean_workers = 1;
  uint64_t lean_memory_mb = 256;
  // A full worker's (the scientific stack's) own memory bound: it peaks at ~120 MB while it
  // starts (runtime::WorkerOptions::memory_bytes).
  uint64_t full_memory_mb = 1024;
  size_t max_sessions = 32;
  std::chrono::seconds session_idle_ttl{30 * 60};
  std::chrono::seconds session_max_lifetime{24 * 3600};  // the longest E2B sandbox timeout taken
  std::string session_state_dir;  // sessions kept across restarts here (engine::SessionOptions); "": not kept
  // [e2b] domain: E2B's sandbox domain for this server, "<port>-<sandbox id>.<domain>" naming a
  // sandbox's port (api/e2b/e2b_ports.cc); "": none.
  std::string e2b_domain;

  // [packages] wheelhouse: a directory of wheels the sandbox may install from (read-only,
  // never the network; docs/packages.md "Packages"); "" for none.
  std::string wheelhouse;
  // [lint] block: codes of the seed's linters (pyflakes, flake8, bandit) whose findings refuse
  // every run and check (GateOptions::lint_block).
  std::vector<std::string> lint_block;
  // [engine] guard ("off" | "audit") and guard_allow (["subprocess"]): engine::GateOptions's.
  runtime::Guard guard = runtime::Guard::kOff;
  bool guard_programs = false;
  // [network] allow, deny: the widest network policy a request may ask for; empty: none.
  engine::NetPolicy network;
  // [network] max_connections: connection attempts served per execution; 0: the proxy's default.
  size_t network_max_connections = 0;
  // [network] max_bytes: bytes each way per execution, its connections together; 0: the proxy's
  // default (1 GiB).
  uint64_t network_max_bytes = 0;
  // [network] hosts_file: the operator's answers for names (engine/net_hosts.h), read with the
  // config; null without one.
  std::shared_ptr<const engine::NetHosts> network_hosts;

  std::chrono::seconds shutdown_grace{30};  // SIGTERM: running executions get this long

  std::string audit_log;    // path; "-" for stderr; "" for none
  bool audit_code = false;  // include the code itself in audit lines
};

// The wheelhouse is an absolute path to a directory this process can read, not under /tmp.
Status CheckWheelhouse(const std::string& dir);

// A config with every default.
ServerConfig DefaultConfig();

// Reads a TOML file over `config` (unknown keys are an error that names them). The keys are
// in docs/api.md, "Configuration".
Status LoadConfigFile(const std::string& path, ServerConfig& config);

// EXECBOX_API_KEYS: comma-separated tokens (ids "env-1", "env-2", ...), hashed at once;
// EXECBOX_INSTANCE: the instance name (a Kubernetes pod's own name, for one).
Status ApplyEnvironment(ServerConfig& config);

}  // namespace execbox::cli
