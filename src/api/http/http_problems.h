// The problems every HTTP route shares, built in one place so that a status, type and title
// never drift apart between routes.
#pragma once

#include <string>
#include <string_view>

#include "api/http/problem.h"

namespace execbox::api {

Problem MethodNotAllowed(std::string_view method, const std::string& allow);

}  // namespace execbox::api
