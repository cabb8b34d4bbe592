// The agent's report (engine/report.h): JSON Lines that code inside the sandbox can forge at
// will on fd 3. ParseReport must bound what it keeps, and the Result assembled from it must
// render, whatever the lines hold: as the API's JSON, as text, and as MCP's tool result (which
// moves images out of display bundles).
#include <cstddef>
#include <cstdint>
#include <string>

#include "api/mcp/json_rpc.h"
#include "api/mcp/mcp_tools.h"
#include "engine/report.h"
#include "engine/result_assembly.h"
#include "engine/result_json.h"
#include "engine/result_text.h"

namespace {

namespace engine = execbox::engine;

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

// The calls under test, in one place: adapt here when their signatures change.
void Run(const std::string& report) {
  engine::AgentReport r = engine::ParseReport(report);
  // report.cc's caps: forged lines cannot grow a result without bound.
  Check(r.findings.size() <= 1000 && r.display.size() <= 1000);
  Check(r.stream_bytes <= (16u << 20) + report.size());
  if (r.error) Check(r.error->traceback.size() <= 2000);
  for (size_t i = 1; i < r.streams.size(); ++i) Check(r.streams[i].name != r.streams[i - 1].name);
  for (const auto& s : r.streams) Check(s.name == "stdout" || s.name == "stderr");

  // What the engine does with it after a run that exited (the paths that read the report).
  execbox::runtime::PythonProgram program;
  execbox::jail::Outcome outcome;
  outcome.report = report;
  outcome.ended_by_report = true;
  engine::Result result = engine::AssembleResult(program, program.limits, outcome);
  (void)engine::Dump(engine::ToJson(result));
  (void)engine::TextOf(result);
  (void)execbox::api::Serialize(execbox::api::ExecutionToolResult(result));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Run(std::string(reinterpret_cast<const char*>(data), size));
  return 0;
}
