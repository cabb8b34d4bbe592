#include "runtime/python_program.h"

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>
#include <regex>
#include <string_view>

#include "base/base64.h"
#include "base/io.h"
#include "runtime/font_cache.h"

namespace execbox::runtime {

// The sandbox's own installs go to its home, the work dir.
static_assert(std::string_view(kPackagesBase).starts_with(jail::kHomeDir));

namespace {

// The code runs as "user" (Policy's uid and gid 1000) at home in the work dir, as on E2B's
// sandboxes, whose SDKs and the code written for them expect /home/user and that owner name.
const char* const kPasswd =
    "root:x:0:0:root:/root:/usr/sbin/nologin\n"
    "user:x:1000:1000:user:/home/user:/bin/bash\n"
    "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n";
const char* const kGroup = "root:x:0:\nuser:x:1000:\nnogroup:x:65534:\n";
const char* const kHosts = "127.0.0.1\tlocalhost\n::1\tlocalhost\n127.0.1.1\tsandbox\n";
const char* const kNsswitch = "passwd: files\ngroup: files\nhosts: files\n";

std::string Hex(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += kDigits[c >> 4];
    out += kDigits[c & 15];
  }
  return out;
}

}  // namespace

const std::vector<AgentModule>* UsableAgentBytecode() {
  static const std::vector<AgentModule>* usable = []() -> const std::vector<AgentModule>* {
    const AgentBytecode& b = EmbeddedAgentBytecode();
    auto probe = ReadFile(b.stdlib_probe, 1 << 20);
    if (!probe || probe->size() < 4 || Hex(probe->substr(0, 4)) != b.magic_hex) return nullptr;
    return &b.modules;
  }();
  return usable;
}

std::string AgentMainPath() {
  return std::string(kAgentDir) + (UsableAgentBytecode() != nullptr ? "/__main__.pyc" : "/__main__.py");
}

namespace {

const char* ModeName(Mode mode) {
  switch (mode) {
    case Mode::kRun:
      return "run";
    case Mode::kCheck:
      return "check";
    case Mode::kCommand:
      return "command";
    case Mode::kListDir:
      return "listdir";
    case Mode::kDropContext:
      return "drop_context";
  }
  return "run";
}

bool SessionOnly(Mode mode) { return mode != Mode::kRun && mode != Mode::kCheck; }

Expected<nlohmann::json> RequestJson(const PythonProgram& program) {
  auto profile = LintProfile(program.lint_profile);
  if (!profile) return std::unexpected(profile.error());
  nlohmann::json request = {
      {"mode", ModeName(program.mode)},
      {"code", program.code},
      {"filename", program.display_name},
      {"policy", nlohmann::json::parse(*profile)},
      {"figures",
       {{"max_width_px", program.figures.max_width_px},
        {"max_height_px", program.figures.max_height_px},
        {"max_bytes", program.figures.max_bytes},
        {"dpi", program.figures.dpi}}},
      {"max_repr_bytes", program.limits.output_bytes},
      {"max_stream_event_bytes", program.limits.output_bytes},
  };
  // A session's extras, only when set: a plain request stays as it always was.
  if (!program.context.empty()) request["context"] = program.context;
  if (!program.env.empty()) request["env"] = program.env;
  if (!program.cwd.empty()) request["cwd"] = program.cwd;
  if (program.mode == Mode::kListDir) request["depth"] = program.list_depth;
  if (!program.packages.empty()) request["packages"] = program.packages;
  if (!program.extra_mimes.empty()) request["extra_mimes"] = program.extra_mimes;
  if (!program.analyzers.empty()) request["analyzers"] = program.analyzers;
  if (!program.lint_block.empty()) request["lint_block"] = program.lint_block;
  if (program.egress) {
    request["egress_fd"] = jail::kEgressFd;
    request["egress_port"] = kEgressPort;
  }
  if (program.guard == Guard::kAudit && program.mode == Mode::kRun) {
    // What the jail lets the code write (jail/policy.h), and the one library dir in it: the
    // packages a session installed, whose extensions the guard takes as they are before the code.
    request["guard"] = {{"writable", {jail::kHomeDir, "/tmp", "/dev/shm"}},
                        {"libraries", {kPackagesBase}},
                        {"network", program.egress},
                        {"programs", program.guard_programs}};
  }
  if (!program.package_set.empty()) {
    if (!IsPackageSetName(program.package_set)) return Fail("not a package set name");
    if (program.package_set_build_dir.empty())
      request["package_set"] = std::string(kPackageSetsDir) + "/" + program.package_set;
  }
  return request;
}

}  // namespace

Expected<std::string> MakeRequest(const PythonProgram& program, bool with_inputs) {
  auto request = RequestJson(program);
  if (!request) return std::unexpected(request.error());
  if (with_inputs) {
    nlohmann::json inputs = nlohmann::json::array();
    for (const auto& f : program.inputs) {
      if (auto s = jail::ValidateRelativeName(f.name); !s) return Fail("input file: " + s.error().message);
      inputs.push_back({{"name", f.name}, {"content_base64", Base64Encode(f.content)}});
    }
    (*request)["inputs"] = std::move(inputs);
  }
  // Invalid UTF-8 in the code is replaced, so the request is always valid JSON.
  return request->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string MakeStateCopyRequest(StateCopy what, uint64_t output_bytes) {
  nlohmann::json request = {{"mode", what == StateCopy::kSnapshot ? "snapshot" : "restore"},
                            {"code", ""},
                            {"filename", "<snapshot>"},
                            {"policy", nullptr},
                            {"max_repr_bytes", output_bytes},
                            {"max_stream_event_bytes", output_bytes}};
  return request.dump();
}

std::string_view GuardName(Guard guard) { return kGuardNames[static_cast<int>(guard)]; }

std::optional<Guard> GuardNamed(std::string_view name) {
  for (Guard guard : {Guard::kOff, Guard::kAudit}) {
    if (GuardName(guard) == name) return guard;
  }
  return std::nullopt;
}

Status CheckAnalyzerNames(const std::vector<std::string>& analyzers) {
  for (const auto& name : analyzers) {
    if (std::find(kAnalyzers.begin(), kAnalyzers.end(), name) == kAnalyzers.end())
      return Fail("analyzers: '" + name.substr(0, 40) + "' is not one of pyflakes, flake8, bandit");
  }
  return {};
}

Status CheckLintBlock(const std::vector<std::string>& block) {
  if (block.size() > kMaxLintBlockCodes)
    return Fail("lint.block: at most " + std::to_string(kMaxLintBlockCodes) + " codes");
  for (const auto& code : block) {
    const bool alnum =
        std::all_of(code.begin(), code.end(), [](unsigned char c) { return std::isalnum(c) != 0; });
    if (code.empty() || code.size() > 16 || !alnum)
      return Fail("lint.block: '" + code.substr(0, 40) + "' is not a code (1 to 16 letters and digits)");
  }
  return {};
}

Status CheckPackageNames(const std::vector<std::string>& names) {
  if (names.size() > kMaxPackages)
    return Fail("at most " + std::to_string(kMaxPackages) + " packages per request");
  // The agent's wheelhouse.check_spec says it again, with the same rule; this one answers
  // before a sandbox is spent on a bad name.
  static const std::regex kSpec(
      "[A-Za-z0-9]([A-Za-z0-9._-]{0,98}[A-Za-z0-9])?(\\[[A-Za-z0-9._,-]{1,100}\\])?"
      "((===?|[<>!~]=|[<>])[A-Za-z0-9.*+!-]{1,64}(,(===?|[<>!~]=|[<>])[A-Za-z0-9.*+!-]{1,64}){0,3})?");
  for (const auto& name : names) {
    if (!std::regex_match(name, kSpec)) {
      bool printable = name.size() <= 100 &&
                       std::all_of(name.begin(), name.end(), [](char c) { return c >= 0x20 && c < 0x7f; });
      std::string shown = printable ? "'" + name + "'" : "a name";
      return Fail(
          "packages: " + shown +
          " is not a package name (a name, optionally with a version such as name==1.2, and nothing else: "
          "no path, URL or option)");
    }
  }
  return {};
}

namespace {

// `pip` and `pip3` in the sandbox: an install goes through the agent's checks (wheelhouse.py).
const char* const kPipScript =
    "#!/bin/sh\n"
    "# pip in the sandbox: installs come only from the server's wheelhouse (docs/packages.md \"Packages\").\n"
    "exec /usr/bin/python3 -I -S -c 'import sys; sys.path.insert(0, \"/opt/execbox\"); "
    "from execbox_agent.wheelhouse import main; sys.exit(main(sys.argv[1:]))' \"$@\"\n";

bool PinsHashes(const std::string& wheelhouse) {
  auto text = ReadFile(wheelhouse + "/" + kWheelhouseHashes, 4 << 20);
  return text && text->find("--hash") != std::string::npos;
}

}  // namespace

bool IsPackageSetName(const std::string& name) {
  return !name.empty() && name.size() <= 64 && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
  });
}

jail::Policy BasePythonPolicy(const std::string& wheelhouse, const std::string& package_sets) {
  jail::Policy p;
  p.env = {
      std::string("PATH=") + kToolsDir + ":/usr/local/bin:/usr/bin:/bin",
      "LANG=C.UTF-8",
      "LC_ALL=C.UTF-8",
      std::string("HOME=") + jail::kHomeDir,
      "TMPDIR=/tmp",
      // Caches (fontconfig, matplotlib) go to /tmp, so they never come back as output files.
      "XDG_CACHE_HOME=/tmp/.cache",
      "XDG_CONFIG_HOME=/tmp/.config",
      "MPLBACKEND=Agg",
      "MPLCONFIGDIR=/tmp/.matplotlib",
      "PYTHONDONTWRITEBYTECODE=1",
      "PYTHONIOENCODING=utf-8",
      "OPENBLAS_NUM_THREADS=1",
      "OMP_NUM_THREADS=1",
      "MKL_NUM_THREADS=1",
      "NUMEXPR_MAX_THREADS=1",
      // pip never reaches for the network (unless a network policy lets it: below), and installs
      // only into the work dir's user base
      // (/usr is read-only here: "break system packages" cannot break anything).
      std::string("PYTHONUSERBASE=") + kPackagesBase,
      "PIP_NO_INDEX=1",
      "PIP_USER=1",
      "PIP_BREAK_SYSTEM_PACKAGES=1",
      "PIP_ONLY_BINARY=:all:",
      "PIP_DISABLE_PIP_VERSION_CHECK=1",
      "PIP_NO_CACHE_DIR=1",
      "PIP_ROOT_USER_ACTION=ignore",
  };
  if (!wheelhouse.empty()) {
    p.binds.push_back({.path = wheelhouse, .required = true, .inside = kWheelhouseDir});
    if (!PinsHashes(wheelhouse)) p.env.push_back(std::string("PIP_FIND_LINKS=") + kWheelhouseDir);
  }
  if (!package_sets.empty())
    p.binds.push_back({.path = package_sets, .required = true, .inside = kPackageSetsDir});
  p.root_links = {"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"};
  p.binds.insert(p.binds.begin(),
                 {
                     {.path = "/usr", .required = true},
                     {.path = "/etc/ld.so.cache"},
                     // BLAS/LAPACK and other shared libraries are found through these symlinks.
                     {.path = "/etc/alternatives"},
                     {.path = "/etc/localtime"},
                     {.path = "/etc/mime.types"},
                     {.path = "/etc/python3"},
                     {.path = "/etc/python3.11"},
                     {.path = "/etc/matplotlibrc"},
                     {.path = "/etc/fonts"},
                 });
  p.files = {
      {.path = "/etc/passwd", .content = kPasswd},
      {.path = "/etc/group", .content = kGroup},
      {.path = "/etc/hosts", .content = kHosts},
      {.path = "/etc/hostname", .content = "sandbox\n"},
      {.path = "/etc/nsswitch.conf", .content = kNsswitch},
  };
  // Bytecode or source, never both: a .py next to its .pyc would be imported (and compiled).
  const std::vector<AgentModule>* bytecode = UsableAgentBytecode();
  for (const AgentModule& m : bytecode != nullptr ? *bytecode : AgentSources()) {
    p.files.push_back({.path = std::string(kAgentDir) + "/" + m.name, .content = m.content});
  }
  for (const char* name : {"pip", "pip3"})
    p.files.push_back({.path = std::string(kToolsDir) + "/" + name, .content = kPipScript, .mode = 0555});
  return p;
}

Expected<jail::Policy> MakePolicy(const PythonProgram& program) {
  // A cold jail runs one request and ends: a command, a listing or a context is a session's.
  if (SessionOnly(program.mode)) {
    return Fail(std::string("mode ") + ModeName(program.mode) + " is for a session only");
  }
  auto request = MakeRequest(program, false);
  if (!request) return std::unexpected(request.error());
  jail::Policy p = BasePythonPolicy(program.wheelhouse);
  // -I: ignore PYTHON* variables and the user site; -S: skip site (Debian's .pth files cost
  // ~12 ms), the agent sets sys.path itself; -B: no .pyc writes; -u: unbuffered, for live output;
  // -X utf8: UTF-8 mode whatever the locale, as the warm interpreter (worker_main.cc) runs.
  p.argv = {kInterpreter, "-I", "-S", "-B", "-u", "-X", "utf8", AgentMainPath(), kRequestPath};
  p.files.push_back({.path = kRequestPath, .content = std::move(*request)});

  if (program.seed_matplotlib && program.mode == Mode::kRun) {
    for (const auto& f : MatplotlibSeedFiles()) p.files.push_back(f);
  }
  if (!program.package_set_build_dir.empty()) {
    // The set's directory is the user base, at the place the sets are seen at later (so that
    // whatever pip wrote with its path in it stays right), and its size is bounded as the
    // work dir would have bounded it, and its files as kMaxPackageSetFiles (the agent checks the
    // wheels' unpacked size and file count first; the host checks again when it seals the set).
    if (program.mode != Mode::kRun || program.packages.empty() || !program.code.empty())
      return Fail("a package set is built by a run with packages and no code");
    const std::string inside = std::string(kPackageSetsDir) + "/" + program.package_set;
    p.binds.push_back(
        {.path = program.package_set_build_dir, .required = true, .inside = inside, .writable = true});
    std::erase_if(p.env, [](const std::string& e) { return e.starts_with("PYTHONUSERBASE="); });
    p.env.push_back("PYTHONUSERBASE=" + inside);
    p.env.push_back("EXECBOX_INSTALL_MAX_BYTES=" + std::to_string(program.limits.work_dir_bytes));
    p.env.push_back("EXECBOX_INSTALL_MAX_FILES=" + std::to_string(kMaxPackageSetFiles));
  }
  if (program.egress) {
    const std::string http = "http://127.0.0.1:" + std::to_string(kEgressPort);
    const std::string socks = "socks5h://127.0.0.1:" + std::to_string(kEgressPort);
    for (const char* name : {"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"})
      p.env.push_back(std::string(name) + "=" + http);
    for (const char* name : {"ALL_PROXY", "all_proxy"}) p.env.push_back(std::string(name) + "=" + socks);
    for (const char* name : {"NO_PROXY", "no_proxy"}) p.env.push_back(std::string(name) + "=localhost,127.0.0.1");
    // pip may reach an index the policy allows (`pip install --index-url ...`): the wheelhouse
    // stays one of its sources, no longer the only one.
    std::erase(p.env, std::string("PIP_NO_INDEX=1"));
    p.egress_port = kEgressPort;  // the descriptor is the engine's (cold_execution.cc)
  }
  p.inputs = program.inputs;
  p.stdin_data = program.stdin_data;
  p.limits = program.limits;
  p.collect = program.collect;
  p.collect.enabled = program.collect_files && program.mode == Mode::kRun;
  p.report_channel = true;
  return p;
}

}  // namespace execbox::runtime
