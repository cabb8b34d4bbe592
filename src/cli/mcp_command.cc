#include "cli/mcp_command.h"

#include <unistd.h>

#include <cerrno>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "api/mcp/json_rpc.h"
#include "api/mcp/mcp_server.h"
#include "base/io.h"
#include "engine/warm_engine.h"

namespace execbox::cli {
namespace {

const char* const kMcpHelp =
    "Serves the Model Context Protocol on standard input and output: one JSON-RPC 2.0 message per\n"
    "line (protocol 2025-11-25; 2025-06-18 and 2025-03-26 are negotiated). Tools: execute_python,\n"
    "create_session, fork_session, close_session. Logs go to stderr only. The warm pool starts first;\n"
    "where it cannot (for example no cgroups for an unprivileged user) every execution gets a cold jail\n"
    "and the session tools report that they need the pool. At the end of input, running calls finish\n"
    "and the server exits 0.";

// Warm first; a host that cannot run the pool still gets cold, stateless executions.
Expected<std::unique_ptr<engine::Engine>> StartEngine() {
  engine::EngineOptions warm;
  warm.pool.prepared_per_worker = 2;
  auto engine = engine::Engine::Create(warm);
  if (engine) return engine;
  std::cerr << "execbox mcp: warm pool unavailable (" << engine.error().message
            << "); running cold, without sessions\n";
  return engine::Engine::Create(engine::EngineOptions{.warm = false});
}

// Reads standard input line by line, never holding more than one over-long line's first
// 16 MiB: the rest of such a line is skipped and the line answered with a parse error.
void Serve(api::McpServer& server) {
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

int RunMcp() {
  auto engine = StartEngine();
  if (!engine) {
    std::cerr << "execbox mcp: cannot start the engine: " << engine.error().message << "\n";
    return 70;
  }
  std::cerr << "execbox mcp: serving on stdio (" << ((*engine)->warm() ? "warm pool" : "cold jails") << ")\n";
  // stdio is one channel: which request a message belongs to does not matter here.
  api::McpServer server(**engine, "0.1.0", [](const nlohmann::json&, const std::string& line, bool) {
    if (line.empty()) return;  // a request ended without a reply: nothing to write
    std::string framed = line + "\n";
    if (auto written = WriteAll(STDOUT_FILENO, framed); !written) {
      std::cerr << "execbox mcp: cannot write to stdout: " << written.error().message << "\n";
    }
  });
  Serve(server);
  return 0;
}

}  // namespace

void AddMcpCommand(CLI::App& app, int& exit_status) {
  CLI::App* mcp = app.add_subcommand("mcp", "MCP server over stdio (JSON-RPC, one message per line)");
  mcp->footer(kMcpHelp);
  mcp->callback([&exit_status] { exit_status = RunMcp(); });
}

}  // namespace execbox::cli
