// What the runtime knows about Python: how to turn a piece of code into a jail Policy that
// runs it with Debian's interpreter and the scientific stack, through the agent.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "jail/policy.h"

namespace execbox::runtime {

// kRun and kCheck take Python code. The others are for a session's child only (a sandbox's
// operations besides Python, as E2B's API has them), each answered by one result whose
// application/json says what happened:
//   kCommand: `code` is a shell command line, run with /bin/bash -l -c (else /bin/sh -c) in the
//     session's sandbox under its limits; its stdout and stderr are the execution's, live;
//     the result is {"exit_code": N}.
//   kListDir: `code` is a directory path in the sandbox; the result is {"entries": [...]} to
//     `list_depth` levels, each {name, path, type ("file"|"dir"|"symlink"|"other"), size, mode,
//     permissions, owner, group, modified (seconds since the epoch), symlink_target?}; a missing
//     path or not a directory is an error (FileNotFoundError, NotADirectoryError). The agent
//     adds "path" (the directory, absolute) and "truncated" (true past 10,000 entries); paths
//     are absolute, mode the permission bits, entries breadth first (sandbox_ops.py).
//   kDropContext: forgets the context `context`, the default one's globals or another's
//     process (its next execution starts empty); the
//     result is {"context": name, "dropped": whether it existed}.
enum class Mode { kRun, kCheck, kCommand, kListDir, kDropContext };

// The guard (execbox_agent/guard.py, docs/security.md "The guard"): audit hooks (PEP 578) the
// agent installs in the interpreter just before the code runs, which refuse what the sandbox's
// policy forbids (writing outside the writable dirs, the network without a policy, programs
// unless allowed, native libraries from outside the interpreter's, another hook) with a
// PermissionError, and list it in the Result's `guard`. A layer inside the process, on top of
// the jail, never instead of it.
enum class Guard { kOff, kAudit };
inline constexpr const char* kGuardNames[] = {"off", "audit"};
std::string_view GuardName(Guard guard);
std::optional<Guard> GuardNamed(std::string_view name);

// Caps on what one figure may cost; bigger figures are downscaled and flagged.
struct FigureLimits {
  uint32_t max_width_px = 2000;
  uint32_t max_height_px = 2000;
  uint64_t max_bytes = 4ull << 20;
  uint32_t dpi = 100;
};

struct PythonProgram {
  Mode mode = Mode::kRun;
  std::string code;
  std::string display_name = "<cell>";      // file name shown in tracebacks
  std::string lint_profile = "permissive";  // the static check's profile (LintProfileNames); not jail::Policy
  std::string stdin_data;
  std::vector<jail::InputFile> inputs;
  jail::Limits limits;
  FigureLimits figures;
  bool collect_files = true;
  jail::FileCollection collect;
  // Give matplotlib a prebuilt font list (see font_cache.h).
  bool seed_matplotlib = true;
  // Sessions only. A session holds several Python contexts (E2B's name) sharing one work dir:
  // "" is the default one, the kernel's (the one snapshots copy); every other is an interpreter
  // process of its own, forked by the kernel at its first execution (execbox_agent/contexts.py).
  std::string context;
  // Environment variables set for this execution only, put back as they were after it.
  std::map<std::string, std::string> env;
  // The working directory for this execution only ("": the work dir), put back after it. A
  // relative one is relative to the work dir. For kRun, "" leaves the directory where the
  // session's earlier code left it (os.chdir lasts from cell to cell, as in a notebook).
  std::string cwd;
  uint32_t list_depth = 1;  // kListDir
  // kRun: representations beyond IPython's that the agent adds where they apply, from
  // kExtraMimes (the agent's e2b_formats.py); the E2B front end asks for all of them.
  std::vector<std::string> extra_mimes;
  // The seed's linters run on the code before it runs (kRun) or as the check (kCheck), their
  // findings beside the policy lint's: names from kAnalyzers. `lint_block`: codes (prefixes) of
  // their findings that refuse the run (status policy_violation); the analyzers they need run
  // whether named or not (execbox_agent/analyzers.py).
  std::vector<std::string> analyzers;
  std::vector<std::string> lint_block;
  // kRun: distributions installed from the wheelhouse before the code runs (wheelhouse.py in
  // the agent; each a name with an optional version, checked there and by CheckPackageNames).
  std::vector<std::string> packages;
  // The host directory of the operator's wheelhouse, bound read-only at kWheelhouseDir; "" for
  // none. The engine's setting ([packages] wheelhouse), never a request's.
  std::string wheelhouse;
  // kRun with packages, set by the engine, never by a request (engine/package_sets.h): the name
  // of a package set already built with exactly `packages`. The agent takes them from
  // kPackageSetsDir/<name> (read-only, seen through the zygote's bind) instead of installing
  // them again. "" for none.
  std::string package_set;
  // Building the package set `package_set`: a host directory, bound writable at
  // kPackageSetsDir/<name> and made the user base, that `packages` are installed into by a run
  // with no code of its own, in a cold jail. "" for any other run.
  std::string package_set_build_dir;
  // Network through the host's proxy (engine/egress_proxy.h): the agent relays from
  // 127.0.0.1:kEgressPort, and the proxy variables point there. Set by the engine with the
  // jail's egress descriptor, never by a request.
  bool egress = false;
  // kRun: the guard, and whether it lets the code run programs (subprocess, os.system, os.exec*).
  // The engine's setting where a server has one ([engine] guard), else the request's.
  Guard guard = Guard::kOff;
  bool guard_programs = false;
};

// What PythonProgram::extra_mimes may hold: what E2B's code interpreter adds to a result (as
// e2b/data and e2b/chart there; JSON types here, which the report carries as JSON values): a
// DataFrame's columns, a matplotlib figure's chart, a list or dict as application/json.
inline const std::vector<std::string> kExtraMimes = {"application/vnd.e2b.data+json",
                                                     "application/vnd.e2b.chart+json", "application/json"};

// What PythonProgram::analyzers may hold: the seed's linters (Debian's python3-pyflakes,
// python3-flake8, python3-bandit, run inside the sandbox on the code's text).
inline const std::vector<std::string> kAnalyzers = {"pyflakes", "flake8", "bandit"};
// At most this many codes in a `lint_block` list, each 1 to 16 letters and digits.
inline constexpr size_t kMaxLintBlockCodes = 200;
// The analyzers' names, and the block list's codes, each checked before anything runs: an error
// naming the first that is not one.
Status CheckAnalyzerNames(const std::vector<std::string>& analyzers);
Status CheckLintBlock(const std::vector<std::string>& block);

// Where the agent's relay listens in the sandbox, for HTTP_PROXY, HTTPS_PROXY and ALL_PROXY.
inline constexpr uint16_t kEgressPort = 3128;

// At most this many names in a request's `packages`.
inline constexpr size_t kMaxPackages = 32;
// At most this many files and directories in a package set: it lives on the host's disk, whose
// inodes a wheel of many tiny files would use up long before its bytes reach `disk_mb`.
inline constexpr uint64_t kMaxPackageSetFiles = 50000;
// The request's package names, checked before anything runs: each a distribution name with
// optional extras and version clauses, never a path, URL or option.
Status CheckPackageNames(const std::vector<std::string>& names);

// Where the interpreter and the agent live inside the jail. The agent is the package
// execbox_agent, one file per module: .pyc when UsableAgentBytecode(), else .py.
inline constexpr const char* kInterpreter = "/usr/bin/python3";
inline constexpr const char* kAgentDir = "/opt/execbox/execbox_agent";
inline constexpr const char* kRequestPath = "/opt/execbox/request.json";
// The wheelhouse inside, the sandbox's own `pip` (the agent's wheelhouse.py) and the user base
// installs go to (under the work dir, a name the file collection skips: jail::kPrivatePrefix).
inline constexpr const char* kWheelhouseDir = "/opt/execbox/wheels";
inline constexpr const char* kToolsDir = "/opt/execbox/bin";
inline constexpr const char* kPackagesBase = "/home/user/.execbox-packages";
// A wheelhouse whose requirements.txt pins --hash values takes installs only through the
// agent's checks (pip, packages); else plain `python3 -m pip` finds its wheels too.
inline constexpr const char* kWheelhouseHashes = "requirements.txt";
// Package sets (engine/package_sets.h) inside: one directory per set, a user base with the
// installed packages and the host's manifest.json of them.
inline constexpr const char* kPackageSetsDir = "/opt/execbox/package-sets";
// A package set's name: lowercase hex (a digest), nothing a path could be made of.
bool IsPackageSetName(const std::string& name);

// Fails for an unknown lint profile.
Expected<jail::Policy> MakePolicy(const PythonProgram& program);

// The agent's request as JSON text. `with_inputs` embeds the input files (base64): a warm
// child receives them with the request, where a cold jail's init writes them itself.
Expected<std::string> MakeRequest(const PythonProgram& program, bool with_inputs);

// A warm session's state, copied as data (the agent's snapshot.py): the request that makes a
// snapshot file in the session's work dir (named kSnapshotFile, for the host to read there), or
// that restores the one the host put at kRestoreFile. Either answers with one result whose
// application/json is the agent's summary.
inline constexpr const char* kSnapshotFile = ".execbox-snapshot";
inline constexpr const char* kRestoreFile = ".execbox-restore";
enum class StateCopy { kSnapshot, kRestore };
std::string MakeStateCopyRequest(StateCopy what, uint64_t output_bytes);

// What every Python jail shares, cold or warm: interpreter, environment, system files, agent,
// the wheelhouse and the package sets (host directories, "" for none; both read-only).
jail::Policy BasePythonPolicy(const std::string& wheelhouse = "", const std::string& package_sets = "");

// One file of the agent package: its name in kAgentDir ("cell.py") and its content.
struct AgentModule {
  std::string name;
  std::string content;
};

// The agent's modules as source, embedded at build time.
const std::vector<AgentModule>& AgentSources();

// The agent compiled at build time ("cell.pyc", ...), and how to tell whether the installed
// interpreter can load it: the magic (hex) must match the first 4 bytes of `stdlib_probe`, a
// stdlib .pyc.
struct AgentBytecode {
  std::vector<AgentModule> modules;
  std::string magic_hex;
  std::string stdlib_probe;
};
const AgentBytecode& EmbeddedAgentBytecode();
// The bytecode when the interpreter can load it (checked once per process), else nullptr.
const std::vector<AgentModule>* UsableAgentBytecode();
// The cold agent's script in the jail: kAgentDir's __main__.pyc, or __main__.py.
std::string AgentMainPath();

// The lint profiles, embedded at build time.
std::vector<std::string> LintProfileNames();
// The profile's JSON text, or an error naming the known profiles.
Expected<std::string> LintProfile(const std::string& name);

}  // namespace execbox::runtime
