// The router's import scan (runtime/import_scan.h): the code of any request, read by trusted
// code in the server before a zygote is chosen. It must stay within its input, never fail, and
// name only what an import statement can: each module once, an identifier, at most
// kMaxScannedModules of them.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "runtime/import_scan.h"

namespace {

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

bool IsName(std::string_view s) {
  if (s.empty() || (s[0] >= '0' && s[0] <= '9')) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    auto u = static_cast<unsigned char>(c);
    return u == '_' || (u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z') || (u >= '0' && u <= '9') || u >= 0x80;
  });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view source(reinterpret_cast<const char*>(data), size);
  const auto scan = execbox::runtime::ScanImports(source);
  Check(scan.modules.size() <= execbox::runtime::kMaxScannedModules);
  for (size_t i = 0; i < scan.modules.size(); ++i) {
    Check(IsName(scan.modules[i]));
    Check(source.find(scan.modules[i]) != std::string_view::npos);
    for (size_t j = 0; j < i; ++j) Check(scan.modules[i] != scan.modules[j]);
    (void)execbox::runtime::IsStandardModule(scan.modules[i]);
  }
  return 0;
}
