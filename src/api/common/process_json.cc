#include "api/common/process_json.h"

#include "api/common/json_text.h"

namespace execbox::api {

using nlohmann::json;

json ProcessInfoJson(const engine::ProcessInfo& p) {
  json j = {{"pid", p.pid},
            {"argv", p.argv},
            {"tag", p.tag},
            {"pty", p.pty},
            {"started", Rfc3339(p.started)},
            {"running", p.running},
            {"stdin_open", p.stdin_open},
            {"output_bytes", p.output_bytes},
            {"exit_code", p.exit_code ? json(*p.exit_code) : json(nullptr)},
            {"signal", p.signal ? json(*p.signal) : json(nullptr)}};
  if (!p.command.empty()) j["command"] = p.command;
  if (p.ended) j["ended"] = Rfc3339(*p.ended);
  if (!p.running) j["ended_by"] = p.ended_by;
  if (p.pty) j["size"] = {{"rows", p.rows}, {"cols", p.cols}};
  return j;
}

}  // namespace execbox::api
