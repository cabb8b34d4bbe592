// Runs the real execbox binary (built beside the tests) the way a user would, as root or as
// an unprivileged user, and parses its --json result.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace execbox::e2e {

enum class Mode { kRoot, kUnprivileged };

struct Invocation {
  int exit_status = -1;  // as a shell reports it: code, or 128+signal
  std::string out;
  std::string err;
  nlohmann::json json;  // parsed stdout when it is JSON, else null
  double seconds = 0;
};

// Why unprivileged runs cannot happen on this host, or "" when they can.
const std::string& UnprivilegedUnavailable();

// Runs `execbox args...`; stdin_data is given on standard input.
Invocation RunExecbox(const std::vector<std::string>& args, Mode mode = Mode::kRoot,
                      const std::string& stdin_data = "");

// `execbox run --json [extra...] -c code`.
Invocation RunCode(const std::string& code, Mode mode = Mode::kRoot, std::vector<std::string> extra = {});

std::string ModeName(Mode mode);

// Names the mode in test output instead of printing its bytes.
inline void PrintTo(Mode mode, std::ostream* os) { *os << ModeName(mode); }

}  // namespace execbox::e2e
