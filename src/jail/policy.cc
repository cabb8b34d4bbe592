#include "jail/policy.h"

namespace execbox::jail {

Status ValidateRelativeName(const std::string& name) {
  if (name.empty()) return Fail("file name is empty");
  if (name.size() > 255 * 4) return Fail("file name is longer than 1020 bytes");
  if (name.front() == '/') return Fail("file name '" + name + "' is absolute");
  size_t start = 0;
  while (start <= name.size()) {
    size_t end = name.find('/', start);
    if (end == std::string::npos) end = name.size();
    std::string_view part(name.data() + start, end - start);
    if (part.empty()) return Fail("file name '" + name + "' has an empty component");
    if (part == "." || part == "..") return Fail("file name '" + name + "' has a '.' or '..' component");
    if (part.size() > 255) return Fail("a component of file name '" + name + "' is longer than 255 bytes");
    start = end + 1;
  }
  for (unsigned char c : name) {
    if (c < 0x20 || c == 0x7f) return Fail("file name has a NUL or control character");
  }
  return {};
}

Status ValidateLimits(const Limits& l) {
  if (l.wall_time.count() <= 0) return Fail("limit: wall time must be positive");
  if (l.cpu_time.count() <= 0) return Fail("limit: cpu time must be positive");
  if (l.memory_bytes < (16ull << 20)) return Fail("limit: memory must be at least 16 MiB");
  if (l.max_processes < 1) return Fail("limit: max processes must be at least 1");
  if (l.output_bytes < 1024) return Fail("limit: output must be at least 1 KiB");
  if (l.work_dir_bytes < 4096) return Fail("limit: work dir size must be at least 4 KiB");
  if (l.open_files < 16) return Fail("limit: open files must be at least 16");
  return {};
}

Status Validate(const Policy& p) {
  if (p.argv.empty() || p.argv[0].empty() || p.argv[0][0] != '/') {
    return Fail("policy: argv[0] must be an absolute path inside the jail");
  }
  if (p.work_dir.size() < 2 || p.work_dir[0] != '/' || p.work_dir.find("/..") != std::string::npos)
    return Fail("policy: work_dir must be absolute, without ..");
  if (!p.work_dir_alias.empty()) {
    const std::string& a = p.work_dir_alias;
    if (a.size() < 2 || a[0] != '/' || a.find("/..") != std::string::npos)
      return Fail("policy: work_dir_alias must be absolute, without ..");
    // Inside the work dir the code could remove the link; above it, the link would hide it.
    auto within = [](const std::string& inner, const std::string& outer) {
      return inner == outer || inner.starts_with(outer + "/");
    };
    if (within(a, p.work_dir) || within(p.work_dir, a))
      return Fail("policy: work_dir_alias must be a place of its own, neither in nor above work_dir");
  }
  if (p.hostname.empty() || p.hostname.size() > 64) return Fail("policy: hostname must be 1-64 bytes");
  if (p.uid == 0 || p.gid == 0) return Fail("policy: the code must not run as id 0 inside");
  if (auto s = ValidateLimits(p.limits); !s) return s;
  if (p.egress_fd >= 0 && (p.egress_port < 1024 || p.zygote || !p.report_channel))
    return Fail("policy: egress needs a port from 1024 up and a report channel, and no zygote");
  for (const auto& f : p.files) {
    if (f.path.empty() || f.path[0] != '/') return Fail("policy: synthetic file path must be absolute");
  }
  for (const auto& b : p.binds) {
    if (b.path.empty() || b.path[0] != '/') return Fail("policy: a bind's host path must be absolute");
    if (!b.inside.empty() && (b.inside[0] != '/' || b.inside.find("/..") != std::string::npos))
      return Fail("policy: a bind's place inside must be absolute, without ..");
    if (b.writable && p.zygote)
      return Fail("policy: a zygote gets no writable bind (its children would inherit it)");
  }
  for (const auto& in : p.inputs) {
    if (auto s = ValidateRelativeName(in.name); !s) return Fail("input file: " + s.error().message);
  }
  for (const auto& e : p.env) {
    if (e.find('=') == std::string::npos) return Fail("policy: env entry '" + e + "' has no '='");
  }
  return {};
}

}  // namespace execbox::jail
