// envd's process.Process requests (the JSON mapping of E2B's process.proto) as the session's
// process table (engine/session_processes.h) takes them, and the ProcessConfig List answers
// with. Pure functions, so they are tested alone (tests/unit/e2b_process_request_test.cc);
// what a value may be (a pty's size, an env name, a program that exists) is the table's to
// refuse, not this file's.
#pragma once

#include <cstdint>
#include <expected>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "api/e2b/e2b_wire.h"
#include "engine/session_processes.h"

namespace execbox::api::e2b {

// process.ProcessSelector: a pid, or (pid 0) a tag.
struct ProcessSelector {
  int32_t pid = 0;
  std::string tag;
};
// The `process` selector of a request (Connect, SendInput, ...).
std::expected<ProcessSelector, RpcError> SelectorOf(const nlohmann::json& request);

// A StartRequest: what the table starts, over the sandbox's environment `env`; and its
// process.ProcessConfig as sent (its envs and cwd, which the table does not keep), for List.
struct StartSpec {
  engine::ProcessSpec spec;
  nlohmann::json config;
};
std::expected<StartSpec, RpcError> StartSpecOf(const nlohmann::json& start,
                                               const std::map<std::string, std::string>& env);
// The ProcessConfig of a process started otherwise (through /v1): what the table knows of it.
nlohmann::json ConfigOf(const engine::ProcessInfo& info);

// A unary call's request (List, SendInput, SendSignal, CloseStdin, Update).
struct ProcessCall {
  ProcessSelector selector;  // all but List
  std::string input;         // SendInput: the bytes, for stdin or the pty alike
  int signal = 0;            // SendSignal: SIGKILL or SIGTERM
  // Update: the pty's new size (rows, cols); none, nothing to change.
  std::optional<std::pair<uint16_t, uint16_t>> size;
};
std::expected<ProcessCall, RpcError> ProcessCallOf(const std::string& method, const nlohmann::json& body);

// A StreamInput's messages (a client stream, read whole): the start event's selector, then
// each data event's bytes (keep-alives skipped).
struct InputStream {
  ProcessSelector selector;
  std::vector<std::string> inputs;
};
std::expected<InputStream, RpcError> StreamInputOf(const std::vector<std::string>& messages);

}  // namespace execbox::api::e2b
