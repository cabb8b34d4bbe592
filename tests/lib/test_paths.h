// Where the binaries under test and the checkout are, for the tests that start them or read the
// docs. The values live in one small file generated per build tree (tests/CMakeLists.txt), so
// the tests' own sources hold no path of this clone and compile from the compiler cache in any.
#pragma once

namespace execbox::test {

extern const char* const kExecboxBinary;  // build/execbox
extern const char* const kContainerLike;  // tests/e2e/container_like.cc, built
extern const char* const kSourceDir;      // the checkout

}  // namespace execbox::test
