// Runs the real execbox binary (built beside the tests) the way a user would, as root or as
// an unprivileged user, and parses its --json result.
#pragma once

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

namespace execbox::e2e {

enum class Mode { kRoot, kUnprivileged };

struct Invocation {
  int exit_status = -1;  // as a shell reports it: code, or 128+signal
  std::string out;
  std::string err;
  nlohmann::json json;  // parsed stdout when it is JSON, else null
  double seconds = 0;
  // ru_maxrss from wait4 of the execbox process: the peak RSS of execbox itself or of any
  // descendant it reaped (the jail's init, which reaps the code), so an upper bound for execbox.
  long max_rss_kib = -1;
};

// Why unprivileged runs cannot happen on this host, or "" when they can.
const std::string& UnprivilegedUnavailable();

// Runs `execbox args...`; stdin_data is given on standard input. extra_env ("KEY=value") is
// added to the environment execbox inherits from the test. `wrapper` (a command and its
// arguments, run as root) is put before everything else, e.g. tests/e2e/container_like.
Invocation RunExecbox(const std::vector<std::string>& args, Mode mode = Mode::kRoot,
                      const std::string& stdin_data = "", const std::vector<std::string>& extra_env = {},
                      const std::vector<std::string>& wrapper = {});

// `execbox run --json [extra...] -c code`.
Invocation RunCode(const std::string& code, Mode mode = Mode::kRoot, std::vector<std::string> extra = {});

std::string ModeName(Mode mode);

// The cgroup tier ("cgroup-v2") every run must report its memory limit enforced by, from
// EXECBOX_TEST_CGROUP (set by the VM stage, tests/vm), or "" when any enforcement will do.
std::string ExpectedCgroupTier();

// A test run once as root and once as the unprivileged user (skipped, with the reason printed,
// where the host does not allow it).
class BothModes : public ::testing::TestWithParam<Mode> {
 protected:
  void SetUp() override {
    if (GetParam() == Mode::kUnprivileged && !UnprivilegedUnavailable().empty()) {
      GTEST_SKIP() << "unprivileged run skipped: " << UnprivilegedUnavailable();
    }
  }
  Invocation Code(const std::string& code, std::vector<std::string> extra = {}) {
    return RunCode(code, GetParam(), std::move(extra));
  }
};

// Names the mode in test output instead of printing its bytes.
inline void PrintTo(Mode mode, std::ostream* os) { *os << ModeName(mode); }

}  // namespace execbox::e2e
