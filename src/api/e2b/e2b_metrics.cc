// E2B's sandbox metrics: GET /sandboxes/{id}/metrics, the SDKs' getMetrics. One sample, taken
// when asked, by a short process of the session's own (the sandbox's interpreter, as its user,
// through the gate like any command; tagged kMetricsTag, which E2B's process list leaves out):
// it sees what the sandbox sees, every process of the session in its /proc, and so measures
// what the code and its commands use together:
//   cpuUsedPct  the CPU all of them used over kSampleSeconds, as a share of the CPUs there are
//               (E2B's: 100 is every CPU busy);
//   memUsed     their proportional set size (a page shared by several counts once; resident
//               size where a process does not show it), memTotal the session's memory limit;
//   diskUsed    what the home (the work dir, a tmpfs of the session's disk size) holds, of
//               diskTotal.
// The session's cgroup has the exact counters, but the host has no way to read one session's
// yet (issue 35's note); this sample needs none and runs beside running code.
#include <algorithm>
#include <cmath>
#include <csignal>
#include <sstream>

#include "api/common/json_text.h"
#include "api/e2b/e2b_api.h"
#include "api/e2b/e2b_sandbox.h"
#include "api/e2b/e2b_wire.h"
#include "api/http/auth.h"

namespace execbox::api::e2b {
namespace {

constexpr const char* kSampleSeconds = "0.5";
// The sample has this long to come back (a sandbox at its process limit refuses it at once).
constexpr std::chrono::seconds kSampleTimeout{10};

// argv[1] the interval in seconds, argv[2] the home. Prints one line: CPU seconds used over
// the interval, the interval, memory bytes, disk total and used bytes, the CPU count.
constexpr const char* kSampleScript = R"py(
import os, sys, time
def pids():
    return [p for p in os.listdir("/proc") if p.isdigit()]
def cpu():
    total = 0
    for p in pids():
        try:
            with open("/proc/%s/stat" % p) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += sum(int(v) for v in fields[11:15])  # utime stime cutime cstime
        except (OSError, ValueError, IndexError):
            pass
    return total / os.sysconf("SC_CLK_TCK")
def memory():
    total, page = 0, os.sysconf("SC_PAGE_SIZE")
    for p in pids():
        try:
            with open("/proc/%s/smaps_rollup" % p) as f:
                total += next(int(l.split()[1]) * 1024 for l in f if l.startswith("Pss:"))
            continue
        except (OSError, ValueError, StopIteration):
            pass
        try:
            with open("/proc/%s/statm" % p) as f:
                total += int(f.read().split()[1]) * page
        except (OSError, ValueError, IndexError):
            pass
    return total
c0, t0 = cpu(), time.monotonic()
time.sleep(float(sys.argv[1]))
c1, t1 = cpu(), time.monotonic()
d = os.statvfs(sys.argv[2])
print(c1 - c0, t1 - t0, memory(), d.f_blocks * d.f_frsize, (d.f_blocks - d.f_bfree) * d.f_frsize,
      os.cpu_count() or 1)
)py";

struct Sample {
  double cpu_seconds = 0, interval = 0;
  uint64_t memory = 0, disk_total = 0, disk_used = 0, cpus = 1;
};

std::optional<Sample> ParseSample(const std::string& line) {
  std::istringstream in(line);
  Sample s;
  if (!(in >> s.cpu_seconds >> s.interval >> s.memory >> s.disk_total >> s.disk_used >> s.cpus))
    return std::nullopt;
  if (s.interval <= 0 || s.cpus == 0) return std::nullopt;
  return s;
}

// The query's start or end (Unix seconds), absent when not given; false when not a number.
bool UnixSeconds(std::string_view query, std::string_view name, std::optional<int64_t>& out) {
  auto value = QueryParam(query, name);
  if (!value || value->empty()) return true;
  try {
    size_t used = 0;
    out = std::stoll(*value, &used);
    return used == value->size();
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace

void E2bApi::Metrics(HttpRequest& request, std::shared_ptr<Exchange>& exchange, const ApiKey& key,
                     std::shared_ptr<Sandbox> sandbox) {
  std::optional<int64_t> start, end;
  if (!UnixSeconds(request.query, "start", start) || !UnixSeconds(request.query, "end", end))
    return SendError(*exchange, 400, "start and end are Unix times in seconds");
  const engine::Caller caller = CallerOf(key);
  const engine::Origin origin{.transport = engine::Transport::kE2b, .peer = request.peer};
  calls_.Spawn([this, exchange, sandbox, caller, origin, start, end] {
    auto limits = gate_.SessionLimits(caller, sandbox->id);
    if (!limits) return SendRefusal(*exchange, limits.error());
    const auto now = std::chrono::system_clock::now();
    const int64_t now_unix = std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch()).count();
    // One sample, of now: a window that leaves now out has none.
    if ((start && *start > now_unix) || (end && *end < now_unix - 1))
      return SendJson(*exchange, 200, nlohmann::json::array());
    engine::ProcessSpec spec;
    spec.argv = {"python3", "-I", "-S", "-c", kSampleScript, kSampleSeconds, kHome};
    spec.tag = kMetricsTag;
    auto started = gate_.StartProcess(caller, sandbox->id, spec, origin);
    if (!started) return SendRefusal(*exchange, started.error());
    auto ended = gate_.WaitProcess(caller, sandbox->id, started->pid,
                                   std::chrono::steady_clock::now() + kSampleTimeout, nullptr);
    if (!ended) return SendRefusal(*exchange, ended.error());
    auto out = gate_.ReadProcessOutput(caller, sandbox->id, started->pid, 0, 4096, std::nullopt, nullptr);
    if (!out) return SendRefusal(*exchange, out.error());
    std::string text, errors;
    for (const auto& c : out->read.chunks)
      (c.stream == engine::OutputStream::kStdout ? text : errors) += c.data;
    auto sample = ParseSample(text);
    if (ended->running || !sample) {
      if (ended->running) (void)gate_.SignalProcess(caller, sandbox->id, started->pid, SIGKILL, origin);
      return SendError(*exchange, 500,
                       "the sandbox's metrics could not be sampled" +
                           (errors.empty() ? std::string() : ": " + errors.substr(0, 300)));
    }
    const double pct = 100.0 * sample->cpu_seconds / sample->interval / static_cast<double>(sample->cpus);
    nlohmann::json metric = {
        {"timestamp", Rfc3339(now)},
        {"timestampUnix", now_unix},
        {"cpuCount", sample->cpus},
        {"cpuUsedPct", std::min(100.0, std::max(0.0, std::round(pct * 100) / 100))},
        // At most the limit: the sum of Pss also counts pages the session shares with the
        // zygote it was forked from, which its cgroup is not charged for (seen under ASan).
        {"memUsed", std::min<uint64_t>(sample->memory, limits->memory_bytes)},
        {"memTotal", limits->memory_bytes},
        {"memCache", 0},  // the page cache is the cgroup's to tell (see above); not measured
        {"diskUsed", sample->disk_used},
        {"diskTotal", sample->disk_total},
    };
    SendJson(*exchange, 200, nlohmann::json::array({metric}));
  });
}

}  // namespace execbox::api::e2b
