#include "api/http/http_problems.h"

namespace execbox::api {

Problem MethodNotAllowed(std::string_view method, const std::string& allow) {
  return Problem{.status = 405,
                 .type = "method-not-allowed",
                 .title = "Method not allowed",
                 .detail = std::string(method) + " is not allowed here; allowed: " + allow,
                 .headers = {{"Allow", allow}}};
}

}  // namespace execbox::api
