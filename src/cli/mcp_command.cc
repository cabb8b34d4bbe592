#include "cli/mcp_command.h"

#include <unistd.h>

#include <cerrno>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "api/http/auth.h"
#include "api/mcp/json_rpc.h"
#include "api/mcp/mcp_server.h"
#include "base/build_info.h"
#include "base/io.h"
#include "cli/local_server.h"
#include "cli/mcp_bridge.h"
#include "cli/server_config.h"
#include "engine/gate.h"

namespace execbox::cli {
namespace {

const char* const kMcpHelp =
    "Serves the Model Context Protocol on standard input and output: one JSON-RPC 2.0 message per\n"
    "line (protocol 2025-11-25; 2025-06-18 and 2025-03-26 are negotiated). Tools: execute_python,\n"
    "check_python, create_session, fork_session, pause_session, resume_session, close_session, and with the "
    "warm\n"
    "pool a session's processes\n"
    "(start_process, list_processes, read_process_output, send_process_input, signal_process).\n"
    "Logs go to stderr only. Every call passes the same gate as `execbox serve`'s: limits\n"
    "([limits.default] and [limits.max] of --config, else the built-in ones), admission ([admission])\n"
    "and a caller's rate and concurrency (those of an API key by default). The warm pool starts\n"
    "first; where it cannot (for example no cgroups for an unprivileged user) every execution gets a\n"
    "cold jail, the session tools say that they need the pool, and the process tools are not offered.\n"
    "At the end of input, running calls finish, the sessions created are closed, and the server\n"
    "exits 0.\n"
    "With a local `execbox serve --unix` running (see --server), it serves through that server's /mcp\n"
    "instead: at once, on its warm pool, under its settings, as the local user.";

struct McpArgs {
  std::string config_file;
  std::string server = "auto";  // auto, always, never
  std::string guard;            // "", off, audit: over the config's [engine] guard
};

// Warm first; a host that cannot run the pool still gets cold, stateless executions.
Expected<std::unique_ptr<engine::Engine>> StartEngine(const ServerConfig& config) {
  engine::EngineOptions warm{.warm = config.warm};
  warm.pool.prepared_per_worker = 2;
  warm.pool.workers = config.workers;
  warm.pool.limits = config.limits.defaults;
  warm.sessions.max_sessions = config.max_sessions;
  warm.sessions.idle_ttl = config.session_idle_ttl;
  warm.sessions.max_lifetime = config.session_max_lifetime;
  warm.pool.worker.wheelhouse = config.wheelhouse;
  warm.package_sets_parent = engine::DefaultPackageSetsParent();
  auto engine = engine::Engine::Create(warm);
  if (engine) return engine;
  std::cerr << "execbox mcp: warm pool unavailable (" << engine.error().message
            << "); running cold, without sessions\n";
  engine::EngineOptions cold{.warm = false};
  cold.pool.worker.wheelhouse = config.wheelhouse;
  return engine::Engine::Create(cold);
}

// Reads standard input line by line, never holding more than one over-long line's first
// 16 MiB: the rest of such a line is skipped and the line answered with a parse error.
// `Server` is McpServer or McpBridge: HandleLine, HandleOversized, Drain.
template <typename Server>
void Serve(Server& server) {
  std::string pending;
  bool oversized = false;
  char buf[1 << 16];
  for (;;) {
    ssize_t n = read(STDIN_FILENO, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    std::string_view chunk(buf, static_cast<size_t>(n));
    while (!chunk.empty()) {
      size_t nl = chunk.find('\n');
      std::string_view part = chunk.substr(0, nl);
      if (!oversized) {
        pending.append(part);
        if (pending.size() > api::kMaxMessageBytes) {
          oversized = true;
          pending.clear();
          pending.shrink_to_fit();
        }
      }
      if (nl == std::string_view::npos) break;
      if (oversized) {
        server.HandleOversized();
      } else {
        server.HandleLine(pending);
      }
      pending.clear();
      oversized = false;
      chunk.remove_prefix(nl + 1);
    }
  }
  if (oversized) {
    server.HandleOversized();
  } else if (!pending.empty()) {
    server.HandleLine(pending);  // a last message without its newline
  }
  server.Drain();
}

int RunMcp(const McpArgs& args) {
  // A local server's pool when there is one, unless this process was given settings of its own.
  if (args.server == "always" || (args.server == "auto" && args.config_file.empty() && args.guard.empty())) {
    auto found = FindLocalServer();
    if (found) {
      std::cerr << "execbox mcp: serving on stdio through the local server on " << found->path << "\n";
      McpBridge bridge(found->path);
      Serve(bridge);
      return 0;
    }
    if (args.server == "always") {
      std::cerr << "execbox mcp: " << found.error().message << "\n";
      return 70;
    }
  }
  ServerConfig config = DefaultConfig();
  if (!args.config_file.empty()) {
    if (auto loaded = LoadConfigFile(args.config_file, config); !loaded) {
      std::cerr << "execbox mcp: " << loaded.error().message << "\n";
      return 64;
    }
  }
  if (!args.guard.empty()) config.guard = *runtime::GuardNamed(args.guard);
  if (!config.wheelhouse.empty()) {
    if (auto s = CheckWheelhouse(config.wheelhouse); !s) {
      std::cerr << "execbox mcp: " << s.error().message << "\n";
      return 64;
    }
  }
  auto engine = StartEngine(config);
  if (!engine) {
    std::cerr << "execbox mcp: cannot start the engine: " << engine.error().message << "\n";
    return 70;
  }
  std::unique_ptr<engine::AuditLog> audit;
  if (!config.audit_log.empty()) {
    auto opened = engine::AuditLog::Open(config.audit_log, config.audit_code);
    if (!opened) {
      std::cerr << "execbox mcp: audit log: " << opened.error().message << "\n";
      return 64;
    }
    audit = std::move(*opened);
  }
  engine::Gate gate(**engine, {.limits = config.limits,
                               .max_running = config.max_running,
                               .max_queue = config.max_queue,
                               .network = config.network,
                               .network_max_connections = config.network_max_connections,
                               .audit = audit.get(),
                               .key_defaults = config.key_defaults,
                               .lint_block = config.lint_block,
                               .guard = config.guard,
                               .guard_programs = config.guard_programs});
  // What the sandbox can import, named in execute_python's description (see serve_command.cc).
  (void)gate.Packages();
  std::cerr << "execbox mcp: serving on stdio (" << ((*engine)->warm() ? "warm pool" : "cold jails") << ", "
            << gate.max_running() << " running + " << gate.max_queue() << " queued at most)\n";
  // The local user, with an API key's default rate and concurrency: a model flooding calls is
  // refused, not given a jail each.
  const api::ApiKey local{.id = "stdio"};
  // The tool calls' threads: after the server, which waits for its calls, they are joined.
  api::Calls calls;
  // stdio is one channel: which request a message belongs to does not matter here.
  api::McpServer server(gate, calls, api::CallerOf(local), {.transport = engine::Transport::kMcpStdio},
                        kVersion, [](const nlohmann::json&, const std::string& line, bool) {
                          if (line.empty()) return;  // a request ended without a reply: nothing to write
                          std::string framed = line + "\n";
                          if (auto written = WriteAll(STDOUT_FILENO, framed); !written) {
                            std::cerr << "execbox mcp: cannot write to stdout: " << written.error().message
                                      << "\n";
                          }
                        });
  Serve(server);
  return 0;
}

}  // namespace

void AddMcpCommand(CLI::App& app, int& exit_status) {
  auto args = std::make_shared<McpArgs>();
  CLI::App* mcp = app.add_subcommand("mcp", "MCP server over stdio (JSON-RPC, one message per line)");
  mcp->footer(kMcpHelp);
  mcp->add_option("--config", args->config_file,
                  "TOML configuration file, as for execbox serve (limits, admission, engine, audit_log)");
  mcp->add_option("--server", args->server,
                  "auto: serve through a local `execbox serve --unix` when one answers (as `execbox run`\n"
                  "finds it) and no --config is given, else in this process; always; never")
      ->check(CLI::IsMember({"auto", "always", "never"}))
      ->default_str("auto");
  mcp->add_option("--guard", args->guard,
                  "audit: audit hooks in every run's interpreter refuse what the sandbox forbids, as\n"
                  "PermissionError ([engine] guard; serves in this process, not through a local server)")
      ->check(CLI::IsMember({"off", "audit"}));
  mcp->callback([args, &exit_status] { exit_status = RunMcp(*args); });
}

}  // namespace execbox::cli
