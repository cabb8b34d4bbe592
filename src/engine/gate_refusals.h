// Refusals the gate's files share (gate.cc, gate_sessions.cc).
#pragma once

#include <string>

#include "engine/refusal.h"

namespace execbox::engine {

// `here`: this server's instance name; an id naming another instance says where it lives.
Refusal SessionNotFound(const std::string& id, const std::string& here);
Refusal SessionsUnavailable();

}  // namespace execbox::engine
