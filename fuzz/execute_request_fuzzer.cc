// The HTTP API's request bodies (execute_request.h): one input is tried as the body of
// POST /v1/execute, of /v1/sessions/{id}/execute, of /v1/check, of POST /v1/sessions, as a
// bare JSON object, and as a file path (a files[] name or the {path} of the files route).
// Whatever the bytes, each parser answers with a value or a Problem; a value must keep the
// promises the header makes, and the limits it names resolve within the server's maxima.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "api/http/execute_request.h"
#include "engine/limit_schema.h"

namespace {

namespace api = execbox::api;
namespace engine = execbox::engine;

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

// What ValidateFilePath promises of a path it accepts.
void CheckPath(std::string_view path) {
  Check(!path.empty() && path.size() <= 1020 && path.front() != '/');
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    std::string_view part = path.substr(start, end - start);
    Check(!part.empty() && part.size() <= 255 && part != "." && part != "..");
    start = end + 1;
  }
  for (unsigned char c : path) Check(c >= 0x20 && c != 0x7f);
}

// A program the parser accepts holds no NUL in its code and only valid file names.
void CheckProgram(const execbox::runtime::PythonProgram& program) {
  Check(program.code.find('\0') == std::string::npos);
  for (const auto& file : program.inputs) CheckPath(file.name);
}

// The limits a request names, resolved as the gate resolves them against the server's
// defaults: within the maxima, or refused.
void CheckLimits(const engine::LimitOverrides& overrides) {
  static const engine::LimitsConfig config;
  auto limits = engine::ApplyLimitOverrides(config, config.defaults, overrides);
  if (!limits) return;
  for (const auto& spec : engine::LimitTable()) Check(spec.get(*limits) <= spec.get(config.maxima));
}

// The calls under test, in one place: adapt here when their signatures change.
void Run(std::string_view input) {
  (void)api::ParseJsonObject(input);
  if (auto request = api::ParseExecuteBody(input, /*allow_session_id=*/true)) {
    CheckProgram(request->program);
    CheckLimits(request->limits);
  }
  if (auto request = api::ParseExecuteBody(input, /*allow_session_id=*/false)) {
    Check(!request->session_id);
    CheckProgram(request->program);
  }
  if (auto request = api::ParseCheckBody(input)) CheckProgram(request->program);
  if (auto body = api::ParseSessionBody(input)) CheckLimits(body->limits);
  if (auto path = api::ValidateFilePath(input)) CheckPath(*path);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Run(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
