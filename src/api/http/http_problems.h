// The problems every HTTP route shares, built in one place so that a status, type and title
// never drift apart between routes.
#pragma once

#include <string>
#include <string_view>

#include "api/http/problem.h"
#include "engine/sessions.h"

namespace execbox::api {

Problem MethodNotAllowed(std::string_view method, const std::string& allow);
// A failed session call: 404 unknown session or file, 413 file too large, 429 too many
// sessions, 500 otherwise (a route with its own meaning for kFailed checks it first).
Problem SessionProblem(const engine::SessionFailure& failure, const std::string& id);
Problem SessionsUnavailable();
// A refusal's label in execbox_rejected_requests_total: the problem type, '-' as '_'.
std::string RejectionReason(const Problem& problem);

}  // namespace execbox::api
