#include "e2e/harness.h"

#include <fcntl.h>
#include <poll.h>
#include <pwd.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>

#include "lib/test_paths.h"


namespace execbox::e2e {
namespace {

constexpr const char* kTestUser = "execbox-test";

// Words of the environment variable `name` (split at spaces), none when it is unset.
std::vector<std::string> EnvWords(const char* name) {
  std::vector<std::string> words;
  const char* value = std::getenv(name);
  std::string word;
  for (const char* c = value ? value : ""; *c != '\0'; ++c) {
    if (*c != ' ') {
      word += *c;
    } else if (!word.empty()) {
      words.push_back(std::move(word));
      word.clear();
    }
  }
  if (!word.empty()) words.push_back(word);
  return words;
}

std::vector<std::string> Command(const std::vector<std::string>& args, Mode mode) {
  std::vector<std::string> cmd;
  if (mode == Mode::kUnprivileged) {
    // The VM stage (tests/vm) starts each unprivileged execbox in a cgroup delegated to the user.
    cmd = EnvWords("EXECBOX_TEST_DELEGATE");
    cmd.insert(cmd.end(), {"/usr/bin/setpriv", std::string("--reuid=") + kTestUser,
                           std::string("--regid=") + kTestUser, "--clear-groups", "--inh-caps=-all", "--"});
  }
  cmd.push_back(test::kExecboxBinary);
  cmd.insert(cmd.end(), args.begin(), args.end());
  return cmd;
}

}  // namespace

std::string ExpectedCgroupTier() {
  const char* tier = std::getenv("EXECBOX_TEST_CGROUP");
  return tier ? tier : "";
}

std::string ModeName(Mode mode) { return mode == Mode::kRoot ? "root" : "unprivileged"; }

const std::string& UnprivilegedUnavailable() {
  static const std::string reason = []() -> std::string {
    if (::getuid() != 0)
      return "the tests are not running as root, so they cannot switch to " + std::string(kTestUser);
    if (::getpwnam(kTestUser) == nullptr)
      return std::string("no user ") + kTestUser + " (scripts/test.sh creates it)";
    Invocation probe = RunExecbox({"run", "--json", "-c", "print(1)"}, Mode::kUnprivileged);
    if (probe.exit_status != 0) {
      return "execbox does not run as " + std::string(kTestUser) + " here (exit " +
             std::to_string(probe.exit_status) + "): " + probe.err.substr(0, 300);
    }
    return "";
  }();
  return reason;
}

Invocation RunExecbox(const std::vector<std::string>& args, Mode mode, const std::string& stdin_data,
                      const std::vector<std::string>& extra_env, const std::vector<std::string>& wrapper) {
  Invocation inv;
  std::vector<std::string> cmd = Command(args, mode);
  cmd.insert(cmd.begin(), wrapper.begin(), wrapper.end());
  // Built before fork: the child only execs.
  std::vector<std::string> env_strings(extra_env);
  // These tests are of the cold jail: a server that runs on this machine must not take their
  // `execbox run`s (the first of a repeated variable is the one getenv sees).
  env_strings.emplace_back("EXECBOX_SOCKET=/nonexistent/execbox-e2e.sock");
  for (char** e = environ; *e != nullptr; ++e) env_strings.emplace_back(*e);
#if defined(__SANITIZE_ADDRESS__)
  // ASan keeps freed memory in a quarantine of up to 256 MB, which the memory-bound tests
  // (execbox's peak RSS while the code floods its output) would measure instead of execbox.
  if (std::getenv("ASAN_OPTIONS") == nullptr) env_strings.emplace_back("ASAN_OPTIONS=quarantine_size_mb=8");
#endif
  std::vector<char*> envp;
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  int in[2], out[2], err[2];
  if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) return inv;
  auto start = std::chrono::steady_clock::now();
  pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(in[0], 0);
    ::dup2(out[1], 1);
    ::dup2(err[1], 2);
    std::vector<char*> argv;
    for (auto& a : cmd) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  ::close(in[0]);
  ::close(out[1]);
  ::close(err[1]);
  ::signal(SIGPIPE, SIG_IGN);
  (void)!::write(in[1], stdin_data.data(), stdin_data.size());
  ::close(in[1]);
  struct pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
  int open = 2;
  char buf[65536];
  while (open > 0) {
    if (::poll(fds, 2, -1) < 0) continue;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
      if (n <= 0) {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open;
      } else {
        (i == 0 ? inv.out : inv.err).append(buf, static_cast<size_t>(n));
      }
    }
  }
  int status = 0;
  struct rusage usage {};
  if (::wait4(pid, &status, 0, &usage) == pid) inv.max_rss_kib = usage.ru_maxrss;
  inv.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  inv.exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  inv.json = nlohmann::json::parse(inv.out, nullptr, false);
  if (inv.json.is_discarded()) inv.json = nullptr;
  return inv;
}

Invocation RunCode(const std::string& code, Mode mode, std::vector<std::string> extra) {
  std::vector<std::string> args = {"run", "--json"};
  args.insert(args.end(), extra.begin(), extra.end());
  args.push_back("-c");
  args.push_back(code);
  return RunExecbox(args, mode);
}

}  // namespace execbox::e2e
