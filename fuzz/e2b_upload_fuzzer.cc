// What an E2B client sends that the front end parses itself (api/e2b/e2b_wire.h,
// e2b_process_request.h): a multipart upload under the Content-Type it names (the input's first
// line), Connect envelopes, the process RPCs' requests (the body as JSON, or a client stream of
// envelopes), and the paths of files. Each must answer a value or an error, never read past its
// input, and never let a file path out of the work dir.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "api/e2b/e2b_process_request.h"
#include "api/e2b/e2b_wire.h"

namespace {

namespace e2b = execbox::api::e2b;

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t newline = input.find('\n');
  const std::string_view content_type = input.substr(0, newline);
  const std::string_view body =
      newline == std::string_view::npos ? std::string_view{} : input.substr(newline + 1);

  if (auto files = e2b::ParseMultipart(content_type, body)) {
    Check(!files->empty());
    for (const auto& f : *files) {
      Check(f.content.size() <= body.size());
      Check(body.find(f.content) != std::string_view::npos);
    }
  }
  if (auto message = e2b::FirstEnvelope(input)) Check(message->size() + 5 <= input.size());
  if (auto messages = e2b::Envelopes(input)) {
    size_t bytes = 0;
    for (const auto& m : *messages) bytes += 5 + m.size();
    Check(bytes <= input.size());
    (void)e2b::StreamInputOf(*messages);
  }
  const auto request = nlohmann::json::parse(body, nullptr, false);
  if (auto start = e2b::StartSpecOf(request, {})) {
    Check(start->spec.command.empty() != start->spec.argv.empty());
    Check(start->spec.cwd.empty() || start->spec.cwd.front() == '/');
  }
  for (const char* method : {"List", "SendInput", "SendSignal", "CloseStdin", "Update"}) {
    if (auto call = e2b::ProcessCallOf(method, request))
      Check(std::string_view(method) == "List" || call->selector.pid > 0 || !call->selector.tag.empty());
  }
  for (std::string_view path : {content_type, body.substr(0, 256)}) {
    if (auto relative = e2b::WorkDirPath(path)) Check(!relative->empty() && relative->front() != '/');
    (void)e2b::SandboxPath(path);
    Check(e2b::AbsoluteInSandbox(path).front() == '/');
    const std::string quoted = e2b::ShellQuote(path);
    Check(quoted.size() >= 2 && quoted.front() == '\'' && quoted.back() == '\'');
  }
  return 0;
}
