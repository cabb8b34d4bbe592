#include "engine/result_text.h"

#include <cstdio>
#include <optional>
#include <tuple>

#include "base/base64.h"

namespace execbox::engine {
namespace {

using nlohmann::json;

const json& Part(const MimeBundle& bundle, const char* key) {
  static const json kEmpty = json::object();
  auto it = bundle.find(key);
  return it != bundle.end() && it->is_object() ? *it : kEmpty;
}

std::string HumanSize(size_t bytes) {
  char buf[32];
  if (bytes < (1u << 20)) {
    std::snprintf(buf, sizeof buf, "%.1f KiB", static_cast<double>(bytes) / 1024);
  } else {
    std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  }
  return buf;
}

uint32_t BigEndian32(const std::string& bytes, size_t at) {
  uint32_t v = 0;
  for (size_t i = 0; i < 4; ++i) v = v << 8 | static_cast<unsigned char>(bytes[at + i]);
  return v;
}

// "[figure 640x480 PNG, 23.4 KiB]" for a bundle that holds an image; nullopt otherwise.
std::optional<std::string> FigureLine(const MimeBundle& bundle) {
  const json& data = Part(bundle, "data");
  for (auto [mime, kind] : {std::tuple{"image/png", "PNG"}, std::tuple{"image/jpeg", "JPEG"},
                            std::tuple{"image/svg+xml", "SVG"}}) {
    if (!data.contains(mime) || !data[mime].is_string()) continue;
    const std::string& value = data[mime].get_ref<const std::string&>();
    std::optional<std::string> bytes = std::string_view(kind) == "SVG" ? value : Base64Decode(value);
    if (!bytes) continue;
    std::string size;
    const json& meta = Part(bundle, "metadata");
    if (meta.contains("width") && meta.contains("height")) {
      size = meta["width"].dump() + "x" + meta["height"].dump() + " ";
    } else if (std::string_view(kind) == "PNG" && bytes->size() >= 24) {
      size = std::to_string(BigEndian32(*bytes, 16)) + "x" + std::to_string(BigEndian32(*bytes, 20)) + " ";
    }
    return "[figure " + size + kind + ", " + HumanSize(bytes->size()) + "]";
  }
  return std::nullopt;
}

bool IsLimit(Status s) {
  return s == Status::kTimeout || s == Status::kMemoryLimit || s == Status::kOutputLimit ||
         s == Status::kKilled || s == Status::kInternalError;
}

std::string Trimmed(std::string text) {
  while (!text.empty() && text.back() == '\n') text.pop_back();
  return text;
}

}  // namespace

std::string PlainText(const MimeBundle& bundle) {
  const json& data = Part(bundle, "data");
  auto it = data.find("text/plain");
  return it != data.end() && it->is_string() ? it->get<std::string>() : "";
}

std::vector<TextPart> RenderText(const Result& r, const TextOptions& o) {
  std::vector<TextPart> parts;
  auto out = [&](std::string text) {
    text = Trimmed(std::move(text));
    if (!text.empty()) parts.push_back({.to_stderr = false, .text = std::move(text)});
  };
  auto err = [&](std::string text) {
    text = Trimmed(std::move(text));
    if (!text.empty()) parts.push_back({.to_stderr = true, .text = std::move(text)});
  };
  const bool show_traceback = r.error && !IsLimit(r.status);
  if (o.streams) {
    out(r.stdout_text.text);
    if (r.stdout_text.truncated) {
      err("[execbox] stdout truncated: " + std::to_string(r.stdout_text.dropped_bytes) + " bytes dropped");
    }
    // The agent writes the traceback to stderr too; it is shown once, below.
    std::string stderr_text = r.stderr_text.text;
    if (show_traceback && !r.error->traceback.empty()) {
      if (auto at = stderr_text.find(r.error->traceback.front()); at != std::string::npos)
        stderr_text.erase(at);
    }
    err(stderr_text);
    if (r.stderr_text.truncated) {
      err("[execbox] stderr truncated: " + std::to_string(r.stderr_text.dropped_bytes) + " bytes dropped");
    }
  }
  size_t figures = 0;
  auto bundle = [&](const MimeBundle& b) {
    if (auto figure = FigureLine(b)) {
      out(*figure + (o.figure_note ? o.figure_note(figures, b) : ""));
      ++figures;
    } else {
      out(PlainText(b));
    }
  };
  for (const auto& d : r.display) bundle(d);
  if (r.result) bundle(*r.result);
  for (const auto& f : r.files) {
    out("[file " + f.name + ", " + std::to_string(f.content.size()) + " bytes, " + f.mime_type + "]");
  }
  for (const auto& s : r.skipped_files) err("[execbox] file not collected: " + s);
  if (r.network) {
    for (const NetConnection& c : r.network->connections) {
      std::string line =
          "[execbox] network: " + (c.host.empty() ? "?" : c.host) + ":" + std::to_string(c.port);
      if (!c.address.empty() && c.address != c.host) line += " (" + c.address + ")";
      if (c.allowed && c.reason.empty()) {
        line += " allowed, " + std::to_string(c.bytes_sent) + " bytes sent, " +
                std::to_string(c.bytes_received) + " received";
      } else {
        line +=
            (c.allowed ? " failed: " : " refused: ") + c.reason + (c.rule.empty() ? "" : " (" + c.rule + ")");
      }
      err(line);
    }
    if (r.network->omitted > 0)
      err("[execbox] network: " + std::to_string(r.network->omitted) + " more attempts not listed");
  }
  if (r.guard) {
    for (const GuardEvent& e : r.guard->refused) err("[execbox] guard refused " + e.event + ": " + e.detail);
    if (r.guard->omitted > 0)
      err("[execbox] guard: " + std::to_string(r.guard->omitted) + " more refusals not listed");
  }
  for (const auto& f : r.findings) {
    // Refusals come as the error; Python's own compile warnings are on stderr already.
    if (f.severity == "error" || f.rule.ends_with("Warning")) continue;
    err("[execbox] " + (f.tool.empty() ? std::string("policy") : f.tool) + " " + f.severity + " [" + f.rule +
        "] line " + std::to_string(f.line) + ":" + std::to_string(f.column) + ": " + f.message +
        (f.suggestion.empty() ? "" : " (" + f.suggestion + ")"));
  }
  if (show_traceback && o.streams) {
    std::string text;
    for (const auto& line : r.error->traceback) text += Trimmed(line) + "\n";
    const std::string last = r.error->ename + ": " + r.error->evalue;
    if (r.error->traceback.empty() || Trimmed(r.error->traceback.back()) != last) text += last;
    err(text);
  }
  if (IsLimit(r.status)) {
    std::string line = std::string("[execbox] ") + StatusName(r.status);
    if (r.error) line += ": " + r.error->ename + ": " + r.error->evalue;
    err(line);
  }
  if (o.session_note && r.session && r.session->preserved && r.session->restored) {
    std::string line = "[execbox] session restored: " + r.session->restored_note;
    for (const auto& e : r.session->not_restored) line += "; not restored: " + e.name + " (" + e.type + ")";
    err(line);
  }
  if (o.session_note && r.session && !r.session->preserved) {
    err("[execbox] session state lost (" +
        (r.session->lost_reason.empty() ? "unknown" : r.session->lost_reason) +
        (r.session->files_kept
             ? "): variables and imports from earlier executions are gone; the kernel restarted, and the "
               "session's files and background processes are kept"
             : "): variables and imports from earlier executions are gone; the session restarted empty"));
  }
  return parts;
}

std::string TextOf(const Result& r, const TextOptions& o) {
  std::string text;
  for (const auto& part : RenderText(r, o)) text += (text.empty() ? "" : "\n") + part.text;
  return text.empty() ? "[no output]" : text;
}

}  // namespace execbox::engine
