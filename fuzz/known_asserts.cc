// The fuzz build keeps assertions on (BOOST_ENABLE_ASSERT_HANDLER, fuzz/clang.cmake; toml++'s
// through fuzz/toml_assert.h), and Boost's and toml++'s come here. A failed one aborts, and
// libFuzzer reports the input, except:
// - Boost assertions known to be wrong in Debian 12's Boost and fixed upstream since, listed
//   below: the code after them is right, release builds (NDEBUG) skip them, and so do we;
// - toml++'s: Debian's libtomlplusplus.so, which execbox links, is built without them, and
//   the inputs that fail them get an ordinary parse error from it. They are printed, once per
//   assertion, and the run goes on as the library does.
// Each one the fuzzers found is described, with its input, in fuzz/findings/. With
// EXECBOX_FUZZ_STRICT_ASSERTS=1 in the environment every assertion aborts (to reproduce those).
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <string>

namespace {

struct KnownAssertion {
  const char* file;  // the end of __FILE__
  const char* expr;
  const char* upstream;
  std::atomic<bool> reported{false};
};

KnownAssertion known[] = {
    // A final chunk ("0\r\n") whose trailer arrives in pieces: the code after it returns
    // need_more correctly; the assertion was one byte too strict.
    {"boost/beast/http/impl/basic_parser.ipp", "n >= 5",
     "Boost.Beast 1.74; fixed upstream by boostorg/beast pull 2861"},
};

bool EndsWith(const char* s, const char* suffix) {
  size_t n = std::strlen(s), m = std::strlen(suffix);
  return n >= m && std::strcmp(s + n - m, suffix) == 0;
}

void Failed(const char* expr, const char* msg, const char* function, const char* file, long line) {
  static const bool strict = std::getenv("EXECBOX_FUZZ_STRICT_ASSERTS") != nullptr;
  for (auto& k : known) {
    if (strict) break;
    if (EndsWith(file, k.file) && std::strcmp(expr, k.expr) == 0) {
      if (!k.reported.exchange(true)) {
        std::fprintf(stderr, "fuzz: known assertion skipped (%s): %s:%ld: %s\n", k.upstream, file, line,
                     expr);
      }
      return;
    }
  }
  if (!strict && std::strstr(file, "/toml++/") != nullptr) {
    static std::mutex mu;
    static std::set<std::string> seen;
    std::lock_guard lock(mu);
    if (seen.insert(std::string(file) + ":" + std::to_string(line)).second) {
      std::fprintf(stderr,
                   "fuzz: toml++ assertion, not fatal (Debian's library is built without it): %s:%ld: %s\n",
                   file, line, expr);
    }
    return;
  }
  std::fprintf(stderr, "%s:%ld: %s: Assertion `%s' failed%s%s.\n", file, line, function, expr,
               msg ? ": " : "", msg ? msg : "");
  std::abort();
}

}  // namespace

namespace boost {

void assertion_failed(const char* expr, const char* function, const char* file, long line) {
  Failed(expr, nullptr, function, file, line);
}

void assertion_failed_msg(const char* expr, const char* msg, const char* function, const char* file,
                          long line) {
  Failed(expr, msg, function, file, line);
}

}  // namespace boost
