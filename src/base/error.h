// Errors are values: every fallible call returns Expected<T> and says what it attempted.
#pragma once

#include <cerrno>
#include <cstring>
#include <expected>
#include <string>
#include <utility>

namespace execbox {

struct Error {
  std::string message;
};

template <typename T>
using Expected = std::expected<T, Error>;

// Status for calls that return nothing on success.
using Status = std::expected<void, Error>;

inline std::unexpected<Error> Fail(std::string message) { return std::unexpected(Error{std::move(message)}); }

// "what(args): strerror(errno)", the form every failing syscall is reported in.
inline std::unexpected<Error> FailErrno(const std::string& what, int err = errno) {
  return std::unexpected(Error{what + ": " + std::strerror(err)});
}

// Prefixes an error with the context it happened in.
inline Error Context(const std::string& where, Error e) { return Error{where + ": " + e.message}; }

}  // namespace execbox
