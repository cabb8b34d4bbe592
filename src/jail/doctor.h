// Finds, by trying each one, which isolation layers this host gives to this process.
#pragma once

#include <string>
#include <vector>

namespace execbox::jail {

struct Check {
  std::string layer;
  bool ok = false;
  bool required = true;  // a run refuses to start without it
  std::string detail;    // what was found
  std::string fix;       // one line, when not ok
};

std::vector<Check> Diagnose();

}  // namespace execbox::jail
