// execbox-openapi: writes the OpenAPI document a server with the built-in limits serves, as
// docs/openapi.json holds it for review (`make openapi`; tests/unit/openapi_test.cc compares
// the two). A binary of its own rather than an `execbox` subcommand: the generator is for this
// checkout, not for users, so the installed command line stays as it is.
#include <iostream>

#include "api/http/openapi.h"

int main(int argc, char**) {
  if (argc != 1) {
    std::cerr << "usage: execbox-openapi > docs/openapi.json\n";
    return 2;
  }
  std::cout << execbox::api::OpenApiJson(execbox::engine::LimitsConfig{}).dump(2) << "\n";
  return std::cout.good() ? 0 : 1;
}
