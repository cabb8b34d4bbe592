// What the runtime knows about Python: how to turn a piece of code into a jail Policy that
// runs it with Debian's interpreter and the scientific stack, through the agent.
#pragma once

#include <string>
#include <vector>

#include "jail/policy.h"

namespace execbox::runtime {

struct PythonProgram {
  std::string code;
  std::string display_name = "<cell>";  // file name shown in tracebacks
  std::string stdin_data;
  std::vector<jail::InputFile> inputs;
  jail::Limits limits;
  bool collect_files = false;
  jail::FileCollection collect;
};

// Where the interpreter and the agent live inside the jail.
inline constexpr const char* kInterpreter = "/usr/bin/python3";
inline constexpr const char* kAgentPath = "/opt/execbox/agent.py";
inline constexpr const char* kCodePath = "/opt/execbox/code.py";

jail::Policy MakePolicy(const PythonProgram& program);

// The agent's source, embedded at build time.
const std::string& AgentSource();

}  // namespace execbox::runtime
