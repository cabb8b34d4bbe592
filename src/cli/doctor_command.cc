#include "cli/doctor_command.h"

#include <iostream>

#include "cli/local_server.h"
#include "jail/doctor.h"
#include "jail/zygote.h"
#include "runtime/python_program.h"
#include "runtime/worker.h"

namespace execbox::cli {
namespace {

// The warm path (pool and sessions) by trying it: a zygote with nothing preloaded, one child
// that runs print(1) as a warm execution does.
jail::Check WarmCheck() {
  using Clock = std::chrono::steady_clock;
  jail::Check c{.layer = "warm workers (pool, sessions)", .required = false};
  c.fix =
      "warm workers take per-execution limits from cgroups: run as root, or in a systemd unit "
      "or scope with Delegate=yes on cgroup v2; `execbox run` works without them";
  auto policy = runtime::MakeWorkerPolicy({.preload = {}, .warm_plot = false});
  if (!policy) {
    c.detail = policy.error().message;
    return c;
  }
  auto start = Clock::now();
  auto zygote = jail::Zygote::Start(*policy, std::chrono::seconds(60));
  if (!zygote) {
    c.detail = zygote.error().message;
    return c;
  }
  auto started = Clock::now();
  auto child = (*zygote)->Spawn({});
  if (!child) {
    c.detail = "the zygote started but could not isolate a child: " + child.error().message;
    return c;
  }
  auto ms = [](auto d) {
    return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(d).count());
  };
  auto isolated = Clock::now();
  runtime::PythonProgram program;
  program.code = "print(1)";
  auto request = runtime::MakeRequest(program, true);
  if (!request) {
    c.detail = request.error().message;
    return c;
  }
  auto out = (*child)->Execute(*request, "", program.limits, {});
  if (!out) {
    c.detail = "the zygote isolated a child but could not hand it code: " + out.error().message;
    return c;
  }
  if (out->ending != jail::Ending::kExited || out->stdout_capture.Text("") != "1\n") {
    c.detail = std::string("a warm child ran print(1) but ended ") + jail::EndingName(out->ending) +
               " with stdout '" + out->stdout_capture.Text("").substr(0, 200) + "'";
    return c;
  }
  c.ok = true;
  c.detail = "a zygote started in " + ms(started - start) + " ms (nothing preloaded), isolated a child in " +
             ms(isolated - started) + " ms, which ran print(1) in " + ms(Clock::now() - isolated) + " ms";
  return c;
}

// Not a layer: whether `execbox run` and `execbox mcp` have a local server's warm pool to use.
jail::Check LocalServerCheck() {
  jail::Check c{.layer = "local server (fast execbox run and mcp)", .required = false};
  c.fix =
      "start `execbox serve --unix PATH` (the package's service serves /run/execbox/execbox.sock to root "
      "and the group execbox; `systemctl --user enable --now execbox` serves "
      "$XDG_RUNTIME_DIR/execbox/execbox.sock); meanwhile `execbox run` starts a cold jail each time";
  auto found = FindLocalServer();
  if (!found) {
    c.detail = "none answers (" + found.error().message + ")";
    return c;
  }
  auto ready = found->client->Send({.method = "GET", .target = "/readyz", .json_body = {}, .headers = {}});
  if (!ready || ready->status != 200) {
    c.detail = found->path + " answers but is not ready" + (ready ? "" : ": " + ready.error().message);
    return c;
  }
  c.ok = true;
  c.detail = "`execbox run` and `execbox mcp` use the server on " + found->path;
  return c;
}

}  // namespace

void AddDoctorCommand(CLI::App& app, int& exit_status) {
  CLI::App* doctor = app.add_subcommand("doctor",
                                        "Check, by trying each one, which isolation layers this host gives "
                                        "(exit 1 if a required one is missing)");
  doctor->callback([&exit_status] {
    bool usable = true;
    auto checks = jail::Diagnose();
    checks.push_back(WarmCheck());
    checks.push_back(LocalServerCheck());
    for (const auto& c : checks) {
      const char* mark = c.ok ? "ok  " : (c.required ? "FAIL" : "warn");
      std::cout << mark << "  " << c.layer << ": " << c.detail << "\n";
      if (!c.ok) std::cout << "      fix: " << c.fix << "\n";
      if (!c.ok && c.required) usable = false;
    }
    std::cout << (usable ? "execbox can run on this host\n" : "execbox cannot run on this host as it is\n");
    exit_status = usable ? 0 : 1;
  });
}

}  // namespace execbox::cli
