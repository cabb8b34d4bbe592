# Initial cache of the fuzz build: cmake -S . -B build-fuzz -C fuzz/clang.cmake (make fuzz).
#
# Compiler: clang 16. The code uses C++23 std::expected from libstdc++ 12, whose <expected> is
# only there when __cpp_concepts >= 202002L, and no Debian 12 clang says so (14, 15 and 16 all
# define 201907L). So every choice needs the one hack of this build, redefining the macro, and
# the least bad is the clang that implements what the macro promises: P0848 (conditionally
# trivial special members, what <expected> relies on) is complete from clang 16 (its release
# notes); 15 had only the destructor part (it compiles this code with the macro, but on half
# the feature); 14 still rejects <expected> with it.
set(CMAKE_CXX_COMPILER clang++-16 CACHE STRING "")
set(EXECBOX_CONCEPTS_FIX "-U__cpp_concepts -D__cpp_concepts=202002L")

# Coverage for libFuzzer, ASan (LeakSanitizer with it) and UBSan on every library; the fuzzer
# executables add -fsanitize=fuzzer (libFuzzer's main) at link time.
set(CMAKE_CXX_FLAGS "-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -DBOOST_ENABLE_ASSERT_HANDLER ${EXECBOX_CONCEPTS_FIX}" CACHE STRING "")
# Assertions stay on (Boost's, toml++'s and nlohmann's included); Boost's and toml++'s go to the
# handler in fuzz/known_asserts.cc. -O1, as OSS-Fuzz builds.
set(CMAKE_BUILD_TYPE Debug CACHE STRING "")
set(CMAKE_CXX_FLAGS_DEBUG "-g -O1" CACHE STRING "")

set(EXECBOX_FUZZ ON CACHE BOOL "")
# The -Werror set is tuned for g++ 12; clang warns differently. The main build keeps it on.
set(EXECBOX_WERROR OFF CACHE BOOL "")
