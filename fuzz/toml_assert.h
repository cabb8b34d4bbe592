// Included first in every file that uses toml++ in the fuzz build (fuzz/CMakeLists.txt): its
// assertions go through BOOST_ASSERT, to the fuzz build's handler (fuzz/known_asserts.cc).
#pragma once

#include <boost/assert.hpp>

#define TOML_ASSERT(expr) BOOST_ASSERT(expr)
