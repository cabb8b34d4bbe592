#include "cli/server_config.h"

#include <sys/stat.h>
#include <toml++/toml.h>
#include <unistd.h>

#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string_view>

#include "api/http/auth.h"
#include "base/io.h"
#include "cli/toml_precheck.h"
#include "engine/sessions.h"
#include "runtime/python_program.h"

namespace execbox::cli {

using api::ApiKey;

ServerConfig DefaultConfig() { return ServerConfig{}; }

namespace {

// Reads one TOML document into a ServerConfig, naming the key path in every error.
class Reader {
 public:
  explicit Reader(std::string file) : file_(std::move(file)) {}

  std::unexpected<Error> Err(const toml::node& node, const std::string& key, const std::string& what) const {
    return Err(node.source(), key, what);
  }
  std::unexpected<Error> Err(const toml::source_region& source, const std::string& key,
                             const std::string& what) const {
    const auto& begin = source.begin;
    std::string where = file_;
    if (begin.line > 0) where += ":" + std::to_string(begin.line) + ":" + std::to_string(begin.column);
    return Fail(where + ": " + key + ": " + what);
  }

  // An integer in [min, max].
  Expected<uint64_t> Uint(const toml::node& node, const std::string& key, uint64_t min, uint64_t max) const {
    const auto* v = node.as_integer();
    if (v == nullptr) return Err(node, key, "expected an integer, got " + TypeName(node));
    const int64_t n = v->get();
    if (n < 0 || static_cast<uint64_t>(n) < min || static_cast<uint64_t>(n) > max) {
      return Err(node, key,
                 "must be between " + std::to_string(min) + " and " + std::to_string(max) + " (got " +
                     std::to_string(n) + ")");
    }
    return static_cast<uint64_t>(n);
  }

  // An integer or a float, finite, in (0, max].
  Expected<double> Number(const toml::node& node, const std::string& key, double max) const {
    double d = 0;
    if (const auto* i = node.as_integer()) {
      d = static_cast<double>(i->get());
    } else if (const auto* f = node.as_floating_point()) {
      d = f->get();
    } else {
      return Err(node, key, "expected a number, got " + TypeName(node));
    }
    if (!std::isfinite(d) || d <= 0 || d > max) {
      return Err(node, key, "must be greater than 0 and at most " + Format(max));
    }
    return d;
  }

  Expected<bool> Bool(const toml::node& node, const std::string& key) const {
    const auto* v = node.as_boolean();
    if (v == nullptr) return Err(node, key, "expected a boolean, got " + TypeName(node));
    return v->get();
  }

  Expected<std::string> String(const toml::node& node, const std::string& key) const {
    const auto* v = node.as_string();
    if (v == nullptr) return Err(node, key, "expected a string, got " + TypeName(node));
    return v->get();
  }

  Expected<std::chrono::seconds> Seconds(const toml::node& node, const std::string& key, uint64_t min,
                                         uint64_t max) const {
    auto n = Uint(node, key, min, max);
    if (!n) return std::unexpected(n.error());
    return std::chrono::seconds(static_cast<std::chrono::seconds::rep>(*n));
  }

  Expected<const toml::table*> Table(const toml::node& node, const std::string& key) const {
    const auto* t = node.as_table();
    if (t == nullptr) return Err(node, key, "expected a table, got " + TypeName(node));
    return t;
  }

  Status Top(const toml::table& root, ServerConfig& c) const;

 private:
  using Handler = std::function<Status(const toml::node&, const std::string&)>;
  struct Field {
    std::string name;
    Handler handle;
  };

  // Every entry of `table` must be one of `fields`.
  Status Fields(const toml::table& table, const std::string& prefix, const std::vector<Field>& fields) const {
    for (auto&& [k, node] : table) {
      const std::string name(k.str());
      const std::string key = prefix.empty() ? name : prefix + "." + name;
      const Field* field = nullptr;
      for (const auto& f : fields) {
        if (f.name == name) field = &f;
      }
      if (field == nullptr) return Err(k.source(), key, "unknown key");
      if (auto s = field->handle(node, key); !s) return s;
    }
    return {};
  }

  // Assigns an integer field.
  template <typename T>
  Handler SetUint(T& target, uint64_t min, uint64_t max) const {
    return [this, &target, min, max](const toml::node& node, const std::string& key) -> Status {
      auto n = Uint(node, key, min, max);
      if (!n) return std::unexpected(n.error());
      target = static_cast<T>(*n);
      return {};
    };
  }
  Handler SetSeconds(std::chrono::seconds& target, uint64_t min, uint64_t max) const {
    return [this, &target, min, max](const toml::node& node, const std::string& key) -> Status {
      auto s = Seconds(node, key, min, max);
      if (!s) return std::unexpected(s.error());
      target = *s;
      return {};
    };
  }
  Handler SetBool(bool& target) const {
    return [this, &target](const toml::node& node, const std::string& key) -> Status {
      auto b = Bool(node, key);
      if (!b) return std::unexpected(b.error());
      target = *b;
      return {};
    };
  }

  Status Limits(const toml::table& table, const std::string& prefix, jail::Limits& l) const;
  Status Keys(const toml::node& node, std::vector<ApiKey>& keys) const;
  Status Key(const toml::table& table, const std::string& prefix, ApiKey& key) const;
  // The caps per key (engine/key_caps.h) under their [[keys]] names, each with `suffix`
  // ("" in [[keys]], "_per_key" for the server's defaults in [admission]).
  void CapFields(engine::KeyCaps& caps, const std::string& suffix, std::vector<Field>& fields) const;
  // A network policy's table ([network], or a key's `network`): allow and deny, each entry parsed;
  // [network]'s max_connections, max_bytes and hosts_file too where `server` is given.
  struct ServerNetwork {  // [network]'s own keys
    size_t* max_connections;
    uint64_t* max_bytes;
    std::shared_ptr<const engine::NetHosts>* hosts;
  };
  Status Network(const toml::table& table, const std::string& prefix, engine::NetPolicy& policy,
                 const ServerNetwork* server = nullptr) const;

  static std::string TypeName(const toml::node& node) {
    switch (node.type()) {
      case toml::node_type::table:
        return "a table";
      case toml::node_type::array:
        return "an array";
      case toml::node_type::string:
        return "a string";
      case toml::node_type::integer:
        return "an integer";
      case toml::node_type::floating_point:
        return "a float";
      case toml::node_type::boolean:
        return "a boolean";
      case toml::node_type::date:
        return "a date";
      case toml::node_type::time:
        return "a time";
      case toml::node_type::date_time:
        return "a date-time";
      case toml::node_type::none:
        break;
    }
    return "nothing";
  }
  static std::string Format(double d) {
    std::string s = std::to_string(d);
    while (s.size() > 1 && s.back() == '0') s.pop_back();
    if (!s.empty() && s.back() == '.') s.pop_back();
    return s;
  }

  std::string file_;
};

// A DNS name of lower-case labels (E2B's sandbox domain): 1-253 characters, each label 1-63 of
// a-z, 0-9 and '-', neither first nor last a '-'.
bool ValidDomain(std::string_view s) {
  if (s.empty() || s.size() > 253) return false;
  size_t start = 0;
  while (start <= s.size()) {
    const size_t dot = std::min(s.find('.', start), s.size());
    const std::string_view label = s.substr(start, dot - start);
    if (label.empty() || label.size() > 63 || label.front() == '-' || label.back() == '-') return false;
    for (char c : label) {
      if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
    }
    start = dot + 1;
  }
  return true;
}

// "host:port" or "[v6]:port", port 0-65535 (0: any free port).
bool ValidListen(std::string_view s) {
  size_t colon;
  if (s.starts_with('[')) {
    const size_t close = s.find(']');
    if (close == std::string_view::npos || close < 2 || close + 1 >= s.size() || s[close + 1] != ':')
      return false;
    colon = close + 1;
  } else {
    colon = s.rfind(':');
    if (colon == std::string_view::npos || colon == 0) return false;
    if (s.substr(0, colon).find(':') != std::string_view::npos) return false;  // v6 needs brackets
  }
  const std::string_view port = s.substr(colon + 1);
  if (port.empty() || port.size() > 5) return false;
  unsigned value = 0;
  for (char ch : port) {
    if (ch < '0' || ch > '9') return false;
    value = value * 10 + static_cast<unsigned>(ch - '0');
  }
  return value <= 65535;
}

bool ValidSha256Hex(std::string_view s) {
  if (s.size() != 64) return false;
  for (char ch : s) {
    const bool hex = (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f') || (ch >= 'A' && ch <= 'F');
    if (!hex) return false;
  }
  return true;
}

std::string Lower(std::string s) {
  for (char& ch : s) {
    if (ch >= 'A' && ch <= 'Z') ch = static_cast<char>(ch - 'A' + 'a');
  }
  return s;
}

// Key ids appear in logs, metrics labels and the audit log: 1-64 of [A-Za-z0-9._@-].
bool ValidKeyId(std::string_view s) {
  if (s.empty() || s.size() > 64) return false;
  for (char ch : s) {
    const bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                    ch == '.' || ch == '_' || ch == '-' || ch == '@';
    if (!ok) return false;
  }
  return true;
}

// Every row of the limit schema, by its name, in its unit, within the schema's bounds.
Status Reader::Limits(const toml::table& table, const std::string& prefix, jail::Limits& l) const {
  std::vector<Field> fields;
  for (const auto& spec : engine::LimitTable()) {
    fields.push_back(
        {std::string(spec.name), [this, &spec, &l](const toml::node& node, const std::string& key) -> Status {
           double value = 0;
           if (const auto* i = node.as_integer()) {
             value = static_cast<double>(i->get());
           } else if (const auto* f = node.as_floating_point(); f != nullptr && !spec.integer()) {
             value = f->get();
           } else {
             return Err(node, key,
                        std::string(spec.integer() ? "expected an integer" : "expected a number") + ", got " +
                            TypeName(node));
           }
           if (auto ok = engine::CheckLimitValue(spec, value); !ok) {
             return Err(node, key, ok.error().message);
           }
           spec.set(l, spec.Base(value));
           return {};
         }});
  }
  return Fields(table, prefix, fields);
}

void Reader::CapFields(engine::KeyCaps& caps, const std::string& suffix, std::vector<Field>& fields) const {
  fields.push_back({"max_sessions" + suffix, SetUint(caps.max_sessions, 0, 1u << 16)});
  fields.push_back({"max_queued" + suffix, SetUint(caps.max_queued, 0, 1u << 20)});
  fields.push_back({"max_processes" + suffix, SetUint(caps.max_processes, 0, 1u << 20)});
  fields.push_back({"max_session_state_mb" + suffix,
                    [this, &caps](const toml::node& node, const std::string& k) -> Status {
                      auto mb = Uint(node, k, 0, 1u << 24);
                      if (!mb) return std::unexpected(mb.error());
                      caps.max_session_state_bytes = *mb << 20;
                      return {};
                    }});
}

Status Reader::Network(const toml::table& table, const std::string& prefix, engine::NetPolicy& policy,
                       const ServerNetwork* server) const {
  std::vector<std::string> lists[2];
  auto list = [this](std::vector<std::string>* out) -> Handler {
    return [this, out](const toml::node& node, const std::string& key) -> Status {
      const auto* array = node.as_array();
      if (array == nullptr) return Err(node, key, "expected an array of strings, got " + TypeName(node));
      for (size_t i = 0; i < array->size(); ++i) {
        auto v = String(*array->get(i), key + "[" + std::to_string(i) + "]");
        if (!v) return std::unexpected(v.error());
        out->push_back(*v);
      }
      return {};
    };
  };
  std::vector<Field> fields{{"allow", list(&lists[0])}, {"deny", list(&lists[1])}};
  if (server != nullptr) {
    fields.push_back({"max_connections", SetUint(*server->max_connections, 1, 100'000)});
    fields.push_back({"max_bytes", SetUint(*server->max_bytes, 1, uint64_t{1} << 40)});
    fields.push_back(
        {"hosts_file",
         [this, hosts = server->hosts](const toml::node& node, const std::string& key) -> Status {
           auto path = String(node, key);
           if (!path) return std::unexpected(path.error());
           if (path->empty() || path->front() != '/') return Err(node, key, "must be an absolute path");
           // A regular file only: a FIFO or a device would hold the server's start.
           struct stat st {};
           if (::stat(path->c_str(), &st) != 0 || !S_ISREG(st.st_mode))
             return Err(node, key, *path + ": not a readable regular file");
           auto text = ReadFile(*path, engine::kMaxNetHostsBytes + 1);
           if (!text) return Err(node, key, text.error().message);
           auto parsed = engine::ParseNetHosts(*text);
           if (!parsed) return Err(node, key, *path + ": " + parsed.error().message);
           *hosts = std::make_shared<const engine::NetHosts>(std::move(*parsed));
           return {};
         }});
  }
  if (auto s = Fields(table, prefix, fields); !s) return s;
  auto parsed = engine::ParseNetPolicy(lists[0], lists[1]);
  if (!parsed) return Err(table, prefix, parsed.error().message);
  policy = std::move(*parsed);
  return {};
}

Status Reader::Key(const toml::table& table, const std::string& prefix, ApiKey& key) const {
  bool has_id = false, has_sha = false;
  std::vector<Field> fields{
      {"id",
       [&](const toml::node& node, const std::string& k) -> Status {
         auto v = String(node, k);
         if (!v) return std::unexpected(v.error());
         if (!ValidKeyId(*v)) return Err(node, k, "must be 1-64 characters of A-Z a-z 0-9 . _ @ -");
         key.id = *v;
         has_id = true;
         return {};
       }},
      {"sha256",
       [&](const toml::node& node, const std::string& k) -> Status {
         auto v = String(node, k);
         if (!v) return std::unexpected(v.error());
         if (!ValidSha256Hex(*v)) {
           return Err(node, k,
                      "must be the token's SHA-256 as 64 hex digits "
                      "(e.g. printf %s \"$TOKEN\" | sha256sum)");
         }
         key.sha256_hex = Lower(*v);
         has_sha = true;
         return {};
       }},
      {"max_concurrent", SetUint(key.max_concurrent, 1, 1u << 20)},
      {"rate_per_second",
       [&](const toml::node& node, const std::string& k) -> Status {
         auto d = Number(node, k, 1e9);
         if (!d) return std::unexpected(d.error());
         key.rate_per_second = *d;
         return {};
       }},
      {"burst",
       [&](const toml::node& node, const std::string& k) -> Status {
         auto d = Number(node, k, 1e9);
         if (!d) return std::unexpected(d.error());
         if (*d < 1) return Err(node, k, "must be at least 1");
         key.burst = *d;
         return {};
       }},
  };
  // A key's own network bound, within the server's [network] (checked once both are read).
  fields.push_back({"network", [this, &key](const toml::node& node, const std::string& k) -> Status {
                      auto t = Table(node, k);
                      if (!t) return std::unexpected(t.error());
                      engine::NetPolicy policy;
                      if (auto s = Network(**t, k, policy); !s) return s;
                      key.caps.network = std::move(policy);
                      return {};
                    }});
  CapFields(key.caps, "", fields);
  if (auto s = Fields(table, prefix, fields); !s) return s;
  if (!has_id) return Err(table, prefix + ".id", "missing");
  if (!has_sha) return Err(table, prefix + ".sha256", "missing");
  return {};
}

Status Reader::Keys(const toml::node& node, std::vector<ApiKey>& keys) const {
  const auto* array = node.as_array();
  if (array == nullptr)
    return Err(node, "keys", "expected an array of tables ([[keys]]), got " + TypeName(node));
  std::vector<ApiKey> result;
  for (size_t i = 0; i < array->size(); ++i) {
    const std::string prefix = "keys[" + std::to_string(i) + "]";
    const toml::node& entry = *array->get(i);
    auto table = Table(entry, prefix);
    if (!table) return std::unexpected(table.error());
    ApiKey key;
    if (auto s = Key(**table, prefix, key); !s) return s;
    for (const auto& other : result) {
      if (other.id == key.id) return Err(entry, prefix + ".id", "duplicate key id '" + key.id + "'");
      if (other.sha256_hex == key.sha256_hex) {
        return Err(entry, prefix + ".sha256", "same token hash as key '" + other.id + "'");
      }
    }
    result.push_back(std::move(key));
  }
  keys = std::move(result);
  return {};
}

Status Reader::Top(const toml::table& root, ServerConfig& c) const {
  auto section = [this](std::function<Status(const toml::table&, const std::string&)> read) -> Handler {
    return [this, read = std::move(read)](const toml::node& node, const std::string& key) -> Status {
      auto t = Table(node, key);
      if (!t) return std::unexpected(t.error());
      return read(**t, key);
    };
  };
  return Fields(
      root, "",
      {
          {"listen",
           [&](const toml::node& node, const std::string& key) -> Status {
             auto v = String(node, key);
             if (!v) return std::unexpected(v.error());
             if (*v != "none" && !ValidListen(*v))
               return Err(node, key, "expected host:port, [v6-address]:port or \"none\"");
             c.listen = *v;
             return {};
           }},
          {"unix_socket",
           [&](const toml::node& node, const std::string& key) -> Status {
             auto v = String(node, key);
             if (!v) return std::unexpected(v.error());
             if (!v->empty() && v->front() != '/') return Err(node, key, "expected an absolute path");
             c.unix_socket = *v;
             return {};
           }},
          {"instance",
           [&](const toml::node& node, const std::string& key) -> Status {
             auto v = String(node, key);
             if (!v) return std::unexpected(v.error());
             if (auto s = engine::ValidateInstanceName(*v); !s) return Err(node, key, s.error().message);
             c.instance = *v;
             return {};
           }},
          {"audit_log",
           [&](const toml::node& node, const std::string& key) -> Status {
             auto v = String(node, key);
             if (!v) return std::unexpected(v.error());
             c.audit_log = *v;
             return {};
           }},
          {"audit_code", SetBool(c.audit_code)},
          {"shutdown_grace_seconds", SetSeconds(c.shutdown_grace, 0, 3600)},
          {"allowed_origins",
           [&](const toml::node& node, const std::string& key) -> Status {
             const auto* array = node.as_array();
             if (array == nullptr)
               return Err(node, key, "expected an array of strings, got " + TypeName(node));
             std::vector<std::string> origins;
             for (size_t i = 0; i < array->size(); ++i) {
               const std::string k = key + "[" + std::to_string(i) + "]";
               auto v = String(*array->get(i), k);
               if (!v) return std::unexpected(v.error());
               if (v->empty()) return Err(*array->get(i), k, "must not be empty");
               origins.push_back(*v);
             }
             c.allowed_origins = std::move(origins);
             return {};
           }},
          {"http", section([&](const toml::table& t, const std::string& prefix) {
             return Fields(
                 t, prefix,
                 {
                     {"max_connections", SetUint(c.max_connections, 1, 1u << 20)},
                     {"max_header_bytes", SetUint(c.max_header_bytes, 1024, 1u << 24)},
                     {"max_body_bytes", SetUint(c.max_body_bytes, 1, 1ull << 32)},
                     {"header_timeout_seconds", SetSeconds(c.header_timeout, 1, 86400)},
                     {"body_timeout_seconds", SetSeconds(c.body_timeout, 1, 86400)},
                     {"idle_timeout_seconds", SetSeconds(c.idle_timeout, 1, 86400)},
                     {"max_requests_per_connection", SetUint(c.max_requests_per_connection, 1, 1ull << 32)},
                     {"io_threads", SetUint(c.io_threads, 1, 256)},
                 });
           })},
          {"admission", section([&](const toml::table& t, const std::string& prefix) {
             std::vector<Field> fields{
                 {"max_running", SetUint(c.max_running, 0, 1u << 16)},
                 {"max_queue", SetUint(c.max_queue, 0, 1u << 20)},
             };
             CapFields(c.key_defaults, "_per_key", fields);
             return Fields(t, prefix, fields);
           })},
          {"engine", section([&](const toml::table& t, const std::string& prefix) {
             return Fields(
                 t, prefix,
                 {
                     {"warm", SetBool(c.warm)},
                     {"workers", SetUint(c.workers, 0, 1024)},
                     {"lean_workers", SetUint(c.lean_workers, 0, 1024)},
                     {"lean_memory_mb", SetUint(c.lean_memory_mb, 64, 1u << 20)},
                     {"full_memory_mb", SetUint(c.full_memory_mb, 256, 1u << 20)},
                     {"max_sessions", SetUint(c.max_sessions, 0, 1u << 16)},
                     {"session_idle_ttl_seconds", SetSeconds(c.session_idle_ttl, 1, 365ull * 86400)},
                     {"session_max_lifetime_seconds", SetSeconds(c.session_max_lifetime, 1, 365ull * 86400)},
                     {"session_state_dir",
                      [&](const toml::node& node, const std::string& key) -> Status {
                        auto v = String(node, key);
                        if (!v) return std::unexpected(v.error());
                        if (!v->empty() && v->front() != '/')
                          return Err(node, key, "must be an absolute path");
                        c.session_state_dir = *v;
                        return {};
                      }},
                     {"guard",
                      [&](const toml::node& node, const std::string& key) -> Status {
                        auto v = String(node, key);
                        if (!v) return std::unexpected(v.error());
                        auto guard = runtime::GuardNamed(*v);
                        if (!guard) return Err(node, key, "must be \"off\" or \"audit\"");
                        c.guard = *guard;
                        return {};
                      }},
                     {"guard_allow",
                      [&](const toml::node& node, const std::string& key) -> Status {
                        const auto* array = node.as_array();
                        if (array == nullptr)
                          return Err(node, key, "expected an array of strings, got " + TypeName(node));
                        c.guard_programs = false;
                        for (size_t i = 0; i < array->size(); ++i) {
                          auto v = String(*array->get(i), key + "[" + std::to_string(i) + "]");
                          if (!v) return std::unexpected(v.error());
                          if (*v != "subprocess")
                            return Err(*array->get(i), key,
                                       "'" + v->substr(0, 40) + "' is not \"subprocess\"");
                          c.guard_programs = true;
                        }
                        return {};
                      }},
                 });
           })},
          {"e2b", section([&](const toml::table& t, const std::string& prefix) {
             return Fields(t, prefix,
                           {
                               {"domain",
                                [&](const toml::node& node, const std::string& key) -> Status {
                                  auto v = String(node, key);
                                  if (!v) return std::unexpected(v.error());
                                  if (!v->empty() && !ValidDomain(*v))
                                    return Err(
                                        node, key,
                                        "expected a DNS name (labels of a-z, 0-9 and '-', joined by dots)");
                                  c.e2b_domain = *v;
                                  return {};
                                }},
                           });
           })},
          {"packages", section([&](const toml::table& t, const std::string& prefix) {
             return Fields(t, prefix,
                           {
                               {"wheelhouse",
                                [&](const toml::node& node, const std::string& key) -> Status {
                                  auto v = String(node, key);
                                  if (!v) return std::unexpected(v.error());
                                  if (!v->empty() && v->front() != '/')
                                    return Err(node, key, "must be an absolute path");
                                  c.wheelhouse = *v;
                                  return {};
                                }},
                           });
           })},
          // [lint] block: the seed's linters' codes that refuse every run (engine/gate.h).
          {"lint", section([&](const toml::table& t, const std::string& prefix) {
             return Fields(t, prefix,
                           {
                               {"block",
                                [&](const toml::node& node, const std::string& key) -> Status {
                                  const auto* array = node.as_array();
                                  if (array == nullptr)
                                    return Err(node, key,
                                               "expected an array of strings, got " + TypeName(node));
                                  std::vector<std::string> codes;
                                  for (size_t i = 0; i < array->size(); ++i) {
                                    auto v = String(*array->get(i), key + "[" + std::to_string(i) + "]");
                                    if (!v) return std::unexpected(v.error());
                                    codes.push_back(*v);
                                  }
                                  if (auto ok = runtime::CheckLintBlock(codes); !ok)
                                    return Err(node, key, ok.error().message);
                                  c.lint_block = std::move(codes);
                                  return {};
                                }},
                           });
           })},
          // [network] allow/deny: the widest policy a request may ask for (engine/net_policy.h).
          {"network", section([&](const toml::table& t, const std::string& prefix) {
             const ServerNetwork server{&c.network_max_connections, &c.network_max_bytes, &c.network_hosts};
             return Network(t, prefix, c.network, &server);
           })},
          {"limits", section([&](const toml::table& t, const std::string& prefix) {
             return Fields(t, prefix,
                           {
                               {"default", section([&](const toml::table& d, const std::string& p) {
                                  return Limits(d, p, c.limits.defaults);
                                })},
                               {"max", section([&](const toml::table& m, const std::string& p) {
                                  return Limits(m, p, c.limits.maxima);
                                })},
                           });
           })},
          {"keys", [&](const toml::node& node, const std::string&) { return Keys(node, c.keys); }},
      });
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\n' || s.front() == '\r')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

}  // namespace

Status CheckWheelhouse(const std::string& dir) {
  if (dir.empty() || dir.front() != '/') return Fail("the wheelhouse must be an absolute path");
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) return FailErrno("wheelhouse " + dir);
  if (!S_ISDIR(st.st_mode)) return Fail("wheelhouse " + dir + " is not a directory");
  if (::access(dir.c_str(), R_OK | X_OK) != 0) return FailErrno("wheelhouse " + dir);
  // The jail builds its root on a tmpfs over /tmp: a host path beneath it cannot be bound.
  char resolved[PATH_MAX];
  if (::realpath(dir.c_str(), resolved) == nullptr) return FailErrno("wheelhouse " + dir);
  if (std::string_view(resolved) == "/tmp" || std::string_view(resolved).starts_with("/tmp/"))
    return Fail("wheelhouse " + dir +
                " is under /tmp, where the sandbox builds its root; use another directory");
  return {};
}

Status LoadConfigFile(const std::string& path, ServerConfig& config) {
  auto text = ReadFile(path, 1u << 20);
  if (!text) return std::unexpected(Context("config " + path, text.error()));

  if (auto checked = CheckTomlText(*text, path); !checked) return checked;  // before toml++ sees it

  ServerConfig updated = config;
  const Reader reader(path);
#if TOML_EXCEPTIONS
  toml::table root;
  try {
    root = toml::parse(*text, path);
  } catch (const toml::parse_error& e) {
    const auto& begin = e.source().begin;
    return Fail(path + ":" + std::to_string(begin.line) + ":" + std::to_string(begin.column) + ": " +
                std::string(e.description()));
  }
#else
  toml::parse_result parsed = toml::parse(*text, path);
  if (!parsed) {
    const auto& begin = parsed.error().source().begin;
    return Fail(path + ":" + std::to_string(begin.line) + ":" + std::to_string(begin.column) + ": " +
                std::string(parsed.error().description()));
  }
  toml::table root = std::move(parsed).table();
#endif
  if (auto s = reader.Top(root, updated); !s) return s;

  if (auto s = engine::ValidateLimitsConfig(updated.limits); !s)
    return std::unexpected(Context(path, s.error()));
  for (size_t i = 0; i < updated.keys.size(); ++i) {
    const auto& bound = updated.keys[i].caps.network;
    if (!bound) continue;
    if (auto beyond = engine::FirstEntryBeyond(*bound, updated.network)) {
      return Fail(path + ": keys[" + std::to_string(i) + "].network: allow entry '" + *beyond +
                  "' is beyond the server's [network] allow");
    }
  }

  config = std::move(updated);
  return {};
}

Status ApplyEnvironment(ServerConfig& config) {
  if (const char* instance = std::getenv("EXECBOX_INSTANCE"); instance != nullptr && *instance != '\0') {
    if (auto s = engine::ValidateInstanceName(instance); !s)
      return std::unexpected(Context("EXECBOX_INSTANCE", s.error()));
    config.instance = instance;
  }
  const char* value = std::getenv("EXECBOX_API_KEYS");
  if (value == nullptr) return {};
  std::vector<ApiKey> added;
  std::string_view rest(value);
  size_t index = 0;  // counts non-empty tokens: env-1, env-2, ...
  while (true) {
    const size_t comma = rest.find(',');
    const std::string_view token = Trim(rest.substr(0, comma));
    if (!token.empty()) {
      ++index;
      // The token itself is never put in a message.
      if (token.size() < 16) {
        return Fail("EXECBOX_API_KEYS: token " + std::to_string(index) + " is shorter than 16 characters");
      }
      ApiKey key;
      key.id = "env-" + std::to_string(index);
      key.sha256_hex = Sha256Hex(token);
      for (const auto* list : {&config.keys, &added}) {
        for (const auto& other : *list) {
          if (other.id == key.id)
            return Fail("EXECBOX_API_KEYS: key id '" + key.id + "' is already configured");
          if (other.sha256_hex == key.sha256_hex) {
            return Fail("EXECBOX_API_KEYS: token " + std::to_string(index) +
                        " is already configured as key '" + other.id + "'");
          }
        }
      }
      added.push_back(std::move(key));
    }
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  config.keys.insert(config.keys.end(), std::make_move_iterator(added.begin()),
                     std::make_move_iterator(added.end()));
  return {};
}

}  // namespace execbox::cli
