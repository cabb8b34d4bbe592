// Writes collected files under a host directory without ever following a link there.
#pragma once

#include <string>
#include <vector>

#include "base/error.h"
#include "engine/result.h"

namespace execbox::cli {

Status WriteFilesUnder(const std::string& dir, const std::vector<engine::OutputFile>& files);

}  // namespace execbox::cli
