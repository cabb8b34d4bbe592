#include "cli/serve_command.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <iostream>
#include <memory>
#include <string>

#include "api/e2b/e2b_api.h"
#include "api/http/auth.h"
#include "api/http/http_api.h"
#include "api/http/http_server.h"
#include "api/mcp/mcp_http.h"
#include "base/build_info.h"
#include "cli/server_config.h"
#include "cli/service_notify.h"
#include "engine/gate.h"
#include "engine/session_store.h"

namespace execbox::cli {
namespace {

const std::string kServeHelp =
    "Serves the HTTP API (/v1/execute, /v1/sessions, /v1/check, /v1/packages, /v1/openapi.json, /livez,\n"
    "/readyz, /metrics) and MCP over Streamable HTTP (/mcp) on one port, and with --unix on a Unix socket "
    "too.\n"
    "E2B's API is served there as well (/sandboxes, and calls naming a sandbox in E2b-Sandbox-Id):\n"
    "E2B's SDKs work with E2B_API_URL and E2B_SANDBOX_URL set to this server and E2B_API_KEY to a key.\n"
    "Every route but /livez and /readyz needs 'Authorization: Bearer <token>', except on the Unix\n"
    "socket, where the kernel names the client: the server's user, root and its group's members.\n"
    "Keys come from the config file ([[keys]], stored as SHA-256) or EXECBOX_API_KEYS (comma-separated\n"
    "tokens). Each key has caps: max_concurrent, max_sessions, max_queued, max_processes and\n"
    "max_session_state_mb in its [[keys]] entry, else the server's ([admission] max_sessions_per_key,\n"
    "...); past one a request gets 429 naming it, and running slots go to the keys in turn.\n"
    "No network unless [network] allow names what a request may ask for (a key's own network narrows\n"
    "it); each attempt is listed in the Result, the audit log and /metrics.\n"
    "With no key configured the server only listens on loopback and prints a generated\n"
    "token. SIGTERM or SIGINT: stop accepting, let running executions finish for up to the grace\n"
    "period, stop the rest, save the sessions (with --session-state-dir), clean up, exit 0.\n"
    "SIGHUP: read the keys again (config file and\n"
    "EXECBOX_API_KEYS); other settings change at the next start.\n"
    "Without --config, " +
    std::string(kDefaultConfigFile) +
    " is read when it exists and is readable.\n"
    "Under systemd (Type=notify) it reports readiness, reloads and stopping.";

struct ServeArgs {
  std::string config_file, listen, unix_socket, audit_log, instance, state_dir, wheelhouse, guard;
  bool no_pool = false, audit_code = false;
  size_t workers = 0, max_running = 0, max_queue = 0;
  double grace = -1;
  std::vector<std::string> origins;
};

struct HostPort {
  std::string host;
  uint16_t port = 0;
};

Expected<HostPort> ParseListen(const std::string& listen) {
  size_t colon = listen.rfind(':');
  if (colon == std::string::npos) return Fail("--listen '" + listen + "': expected host:port");
  std::string host = listen.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  if (host.empty())
    return Fail("--listen '" + listen + "': the host is missing (use 0.0.0.0 for every address)");
  try {
    size_t used = 0;
    unsigned long port = std::stoul(listen.substr(colon + 1), &used);
    if (used != listen.size() - colon - 1 || port > 65535) throw std::out_of_range("port");
    return HostPort{host, static_cast<uint16_t>(port)};
  } catch (const std::exception&) {
    return Fail("--listen '" + listen + "': the port must be a number from 0 to 65535");
  }
}

bool IsLoopback(const std::string& host) {
  return host == "localhost" || host == "::1" || host.starts_with("127.");
}

// The config file, then the environment (SIGHUP reads both again for the keys).
Expected<ServerConfig> ReadConfig(const std::string& file) {
  ServerConfig config = DefaultConfig();
  if (!file.empty()) {
    if (auto loaded = LoadConfigFile(file, config); !loaded) return std::unexpected(loaded.error());
  }
  if (auto env = ApplyEnvironment(config); !env) return std::unexpected(env.error());
  return config;
}

// SIGHUP: the keys from the config file and the environment, read again. A file that no longer
// reads keeps the keys in force (and says why); so does one with no key at all, unless this
// run's generated token is what serves (loopback only), which then stays.
void ReloadKeys(const std::string& file, api::HttpApi& api, const std::vector<api::ApiKey>& generated) {
  NotifyServiceManager(ReloadingState());
  auto fresh = ReadConfig(file);
  if (!fresh) {
    std::cerr << "execbox serve: SIGHUP: keeping the keys in force: " << fresh.error().message << std::endl;
  } else if (fresh->keys.empty() && generated.empty()) {
    std::cerr << "execbox serve: SIGHUP: keeping the keys in force: the configuration now has no key"
              << std::endl;
  } else {
    const size_t count = fresh->keys.size();
    api.ReplaceKeys(fresh->keys.empty() ? generated : std::move(fresh->keys));
    std::cerr << "execbox serve: SIGHUP: " << count << " key(s) from "
              << (file.empty() ? std::string("EXECBOX_API_KEYS") : file + " and EXECBOX_API_KEYS")
              << " (other settings change at the next start)" << std::endl;
  }
  NotifyServiceManager("READY=1");
}

int RunServe(const ServeArgs& args) {
  // Without --config, the installed one when there is one (the Debian package's), if this user
  // may read it: it is root:execbox 0640, and a user's own server has its own settings.
  std::string config_file = args.config_file;
  if (config_file.empty() && ::access(kDefaultConfigFile, F_OK) == 0) {
    if (::access(kDefaultConfigFile, R_OK) == 0) {
      config_file = kDefaultConfigFile;
    } else {
      std::cerr << "execbox serve: not reading " << kDefaultConfigFile
                << " (not readable by this user); pass --config FILE for settings of your own\n";
    }
  }
  auto read = ReadConfig(config_file);
  if (!read) {
    std::cerr << "execbox serve: " << read.error().message << "\n";
    return 64;
  }
  ServerConfig config = std::move(*read);
  if (!args.instance.empty()) {
    if (auto s = engine::ValidateInstanceName(args.instance); !s) {
      std::cerr << "execbox serve: --instance: " << s.error().message << "\n";
      return 64;
    }
    config.instance = args.instance;
  }
  if (!args.listen.empty()) config.listen = args.listen;
  if (!args.unix_socket.empty()) config.unix_socket = args.unix_socket;
  if (config.listen == "none" && config.unix_socket.empty()) {
    std::cerr << "execbox serve: --listen none needs a Unix socket (--unix PATH) to serve on\n";
    return 64;
  }
  if (!config.unix_socket.empty() && config.unix_socket.front() != '/') {
    std::cerr << "execbox serve: --unix: expected an absolute path\n";
    return 64;
  }
  if (args.no_pool) config.warm = false;
  if (!args.guard.empty()) config.guard = *runtime::GuardNamed(args.guard);
  if (args.workers) config.workers = args.workers;
  if (args.max_running) config.max_running = args.max_running;
  if (args.max_queue) config.max_queue = args.max_queue;
  if (args.grace >= 0) config.shutdown_grace = std::chrono::seconds(static_cast<int64_t>(args.grace));
  if (!args.audit_log.empty()) config.audit_log = args.audit_log;
  if (!args.state_dir.empty()) config.session_state_dir = args.state_dir;
  if (!args.wheelhouse.empty()) config.wheelhouse = args.wheelhouse;
  if (!config.wheelhouse.empty()) {
    if (auto s = CheckWheelhouse(config.wheelhouse); !s) {
      std::cerr << "execbox serve: " << s.error().message << "\n";
      return 64;
    }
  }
  if (args.audit_code) config.audit_code = true;
  for (const auto& origin : args.origins) config.allowed_origins.push_back(origin);

  const bool tcp = config.listen != "none";
  auto where = tcp ? ParseListen(config.listen) : Expected<HostPort>(HostPort{});
  if (!where) {
    std::cerr << "execbox serve: " << where.error().message << "\n";
    return 64;
  }
  if (where->host == "localhost") where->host = "127.0.0.1";
  std::string generated;
  std::vector<api::ApiKey> generated_keys;
  if (config.keys.empty() && tcp) {
    if (!IsLoopback(where->host)) {
      std::cerr << "execbox serve: refusing to listen on " << where->host
                << " without an API key: set EXECBOX_API_KEYS or [[keys]] in the config file, or listen on "
                   "127.0.0.1\n";
      return 64;
    }
    generated = api::GenerateToken();
    generated_keys.push_back(api::ApiKey{.id = "generated", .sha256_hex = api::Sha256Hex(generated)});
    config.keys = generated_keys;
  }

  std::unique_ptr<engine::AuditLog> audit;
  if (!config.audit_log.empty()) {
    auto opened = engine::AuditLog::Open(config.audit_log, config.audit_code);
    if (!opened) {
      std::cerr << "execbox serve: audit log: " << opened.error().message << "\n";
      return 64;
    }
    audit = std::move(*opened);
  }

  // Signals are taken by sigwait below, never by a handler in some worker thread: block them
  // before any thread starts, so every thread inherits the mask.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  engine::EngineOptions options{.warm = config.warm};
  options.pool.workers = config.workers;
  options.pool.lean_workers = config.lean_workers;
  options.pool.lean_memory_bytes = config.lean_memory_mb << 20;
  options.pool.worker.memory_bytes = config.full_memory_mb << 20;
  options.pool.limits = config.limits.defaults;
  options.sessions.max_sessions = config.max_sessions;
  options.sessions.idle_ttl = config.session_idle_ttl;
  options.sessions.max_lifetime = config.session_max_lifetime;
  options.sessions.instance = config.instance;
  options.sessions.state_dir = config.session_state_dir;
  options.pool.worker.wheelhouse = config.wheelhouse;
  options.package_sets_parent = engine::DefaultPackageSetsParent();
  // A state dir that cannot be used stops the server: sessions that silently end with it would
  // be worse than no start.
  if (auto store = engine::SessionStore::Open(config.session_state_dir); !store) {
    std::cerr << "execbox serve: session state dir: " << store.error().message << "\n";
    return 70;
  }
  auto engine = engine::Engine::Create(options);
  if (!engine && config.warm) {
    std::cerr << "execbox serve: warm pool unavailable (" << engine.error().message
              << "); serving cold jails, without sessions\n";
    options.warm = false;
    engine = engine::Engine::Create(options);
  }
  if (!engine) {
    std::cerr << "execbox serve: cannot start the engine: " << engine.error().message << "\n";
    return 70;
  }
  // Every transport's requests (HTTP, MCP over HTTP) pass this one gate.
  api::Metrics metrics;
  auto gate = std::make_unique<engine::Gate>(
      **engine, engine::GateOptions{.limits = config.limits,
                                    .max_running = config.max_running,
                                    .max_queue = config.max_queue,
                                    .network = config.network,
                                    .network_max_connections = config.network_max_connections,
                                    .network_max_bytes = config.network_max_bytes,
                                    .network_hosts = config.network_hosts,
                                    .audit = audit.get(),
                                    .observer = &metrics,
                                    .key_defaults = config.key_defaults,
                                    .lint_block = config.lint_block,
                                    .guard = config.guard,
                                    .guard_programs = config.guard_programs});
  // What the sandbox can import, listed once before serving: /v1/packages and the MCP tool's
  // description say it (a failure is logged with its incident id; /v1/packages tries again).
  (void)gate->Packages();
  auto api = std::make_unique<api::HttpApi>(*gate, config.keys, kVersion, metrics);
  // MCP over Streamable HTTP at /mcp, behind the API's keys, through the same gate.
  auto mcp = std::make_unique<api::McpHttp>(
      *gate, kVersion,
      api::McpHttpOptions{.allowed_origins = config.allowed_origins, .instance = config.instance});
  api->Serve("/mcp", mcp.get());
  // E2B's API on the same port (docs/e2b.md, "Using the E2B SDK"), through the same gate; it is
  // destroyed after the server stops and the API has drained.
  auto e2b = std::make_unique<api::e2b::E2bApi>(
      *gate, *api, api::e2b::E2bOptions{.state_dir = config.session_state_dir, .domain = config.e2b_domain});
  api->Mount(e2b.get());
  api::HttpServerOptions http{.host = where->host,
                              .port = where->port,
                              .unix_path = config.unix_socket,
                              .max_connections = config.max_connections,
                              .max_header_bytes = config.max_header_bytes,
                              .max_body_bytes = config.max_body_bytes,
                              .header_timeout = config.header_timeout,
                              .body_timeout = config.body_timeout,
                              .idle_timeout = config.idle_timeout,
                              .max_requests_per_connection = config.max_requests_per_connection,
                              .io_threads = config.io_threads};
  http.on_drop = [m = &metrics](std::string_view reason) { m->ConnectionDropped(reason); };
  http.on_response = [m = &metrics](int status) { m->Response(status); };
  if (!config.instance.empty()) http.response_headers.emplace_back("Execbox-Instance", config.instance);
  auto server = api::HttpServer::Start(
      http, [a = api.get()](api::HttpRequest request, std::shared_ptr<api::Exchange> exchange) {
        a->Handle(std::move(request), std::move(exchange));
      });
  if (!server) {
    std::cerr << "execbox serve: " << server.error().message << "\n";
    return 70;
  }
  api->set_connection_count([s = server->get()] { return s->connections(); });
  std::string host = where->host.find(':') != std::string::npos ? "[" + where->host + "]" : where->host;
  std::string url =
      tcp ? "http://" + host + ":" + std::to_string((*server)->port()) : "unix:" + config.unix_socket;
  if (!generated.empty()) {
    std::cerr << "execbox serve: no API key configured; this run's token (loopback only):\n"
              << "    Authorization: Bearer " << generated << "\n";
  }
  std::cerr << "execbox serve: " << ((*engine)->warm() ? "warm pool" : "cold jails") << ", "
            << gate->max_running() << " running + " << gate->max_queue() << " queued at most\n";
  if (!config.instance.empty()) std::cerr << "execbox serve: instance " << config.instance << "\n";
  // The socket first: whoever waits for the TCP line finds the socket ready too.
  if (tcp && !config.unix_socket.empty())
    std::cerr << "execbox serve: listening on unix:" << config.unix_socket << "\n";
  std::cerr << "execbox serve: listening on " << url << std::endl;
  NotifyServiceManager(std::string("READY=1\nSTATUS=") + ((*engine)->warm() ? "warm pool" : "cold jails") +
                       ", listening on " + url +
                       (tcp && !config.unix_socket.empty() ? " and unix:" + config.unix_socket : ""));

  int signal_number = 0;
  while (sigwait(&stop_signals, &signal_number) == 0 && signal_number == SIGHUP) {
    ReloadKeys(config_file, *api, generated_keys);
  }
  NotifyServiceManager("STOPPING=1");
  std::cerr << "execbox serve: " << (signal_number == SIGTERM ? "SIGTERM" : "SIGINT")
            << ": shutting down (grace " << config.shutdown_grace.count() << " s, " << api->in_flight()
            << " in flight)" << std::endl;
  (*server)->StopAccepting();
  api->Drain(config.shutdown_grace);
  (*server)->Stop();
  if (auto* sessions = (*engine)->sessions(); sessions != nullptr && !config.session_state_dir.empty()) {
    std::cerr << "execbox serve: " << sessions->SaveAll() << " sessions saved" << std::endl;
  }
  api->Mount(nullptr);
  api->Serve("/mcp", nullptr);
  e2b.reset();  // its threads are done: drained with the API's
  mcp.reset();  // MCP sessions end, and the sessions they created close
  api.reset();
  gate.reset();
  engine->reset();  // every child killed, every cgroup removed
  std::cerr << "execbox serve: stopped" << std::endl;
  return 0;
}

}  // namespace

void AddServeCommand(CLI::App& app, int& exit_status) {
  auto args = std::make_shared<ServeArgs>();
  CLI::App* serve = app.add_subcommand("serve", "HTTP API and MCP over Streamable HTTP");
  serve->footer(kServeHelp);
  serve
      ->add_option("--listen", args->listen,
                   "host:port to listen on ([v6]:port; port 0 picks one; none: the Unix socket only)")
      ->default_str("127.0.0.1:8080");
  serve->add_option("--unix", args->unix_socket,
                    "Also serve on this Unix socket (mode 0660): the server's user, root and its group's\n"
                    "members are let in by their kernel credentials, without a token; `execbox run` uses it");
  serve->add_option("--config", args->config_file,
                    "TOML configuration file (see docs/api.md, Configuration); without it, " +
                        std::string(kDefaultConfigFile) + " when it exists");
  serve->add_option(
      "--instance", args->instance,
      "This server's name among several behind one router (a DNS label): session ids end in it");
  serve->add_option("--session-state-dir", args->state_dir,
                    "Keep sessions here (made 0700) across restarts: each session's state is saved at a\n"
                    "graceful stop, and its checkpoint before each execution when it has checkpoints");
  serve->add_option("--wheelhouse", args->wheelhouse,
                    "A directory of wheels the sandbox may install from, offline ([packages] wheelhouse;\n"
                    "docs/packages.md): packages in a request (a one-shot's installed once per list and\n"
                    "reused, kept in the cache dir), pip install in a session");
  serve->add_flag("--no-pool", args->no_pool,
                  "No warm workers: every execution gets a cold jail; no sessions");
  serve
      ->add_option("--guard", args->guard,
                   "audit: audit hooks in every run's interpreter refuse what the sandbox forbids, as\n"
                   "PermissionError, listed in the result's guard ([engine] guard; docs/security.md)")
      ->check(CLI::IsMember({"off", "audit"}));
  serve->add_option("--workers", args->workers, "Warm workers (default: one per two cores)");
  serve->add_option("--max-running", args->max_running, "Executions running at once (default: 2 per worker)");
  serve->add_option("--max-queue", args->max_queue, "Executions waiting beyond those; past it, 429")
      ->default_str("64");
  serve->add_option("--shutdown-grace", args->grace, "Seconds running executions get on SIGTERM")
      ->default_str("30");
  serve->add_option("--audit-log", args->audit_log, "Append one JSON line per execution here ('-': stderr)");
  serve->add_flag("--audit-code", args->audit_code, "Include the code itself in audit lines");
  serve->add_option("--allow-origin", args->origins, "An Origin allowed to call /mcp (repeatable)");
  serve->callback([args, &exit_status] { exit_status = RunServe(*args); });
}

}  // namespace execbox::cli
