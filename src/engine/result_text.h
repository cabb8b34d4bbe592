// How a Result reads as text: the one rendering that `execbox run`, `execbox repl` and MCP's
// text block share. A terminal that streamed stdout and stderr live asks for the rest only; MCP
// asks for everything, in one block.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "engine/result.h"

namespace execbox::engine {

struct TextOptions {
  // Include the code's stdout and stderr (with truncation notes) and its traceback; false for
  // a terminal that showed them as they came (the agent writes the traceback to stderr too).
  bool streams = true;
  // Say when a session's state was lost; the REPL says it once per loss itself.
  bool session_note = true;
  // Appended to a figure's line, e.g. " -> out/figure-1.png" (index counts figures from 0).
  std::function<std::string(size_t index, const MimeBundle& bundle)> figure_note;
};

struct TextPart {
  bool to_stderr = false;  // where a terminal writes it; MCP joins every part in order
  std::string text;        // one or more lines, without the final newline
};

// In order: stdout, stderr (without its copy of the traceback), each displayed item (its
// text/plain; a figure as "[figure 640x480 PNG, 23.4 KiB]"), the last expression's value, the
// files written ("[file NAME, SIZE bytes, MIME]"), lint warnings, the error's traceback, a
// limit's "[execbox] timeout: TimeoutError: ...", and "[execbox] session state lost (...)".
std::vector<TextPart> RenderText(const Result& r, const TextOptions& options = {});
// Every part joined by newlines; "[no output]" when there is none.
std::string TextOf(const Result& r, const TextOptions& options = {});
// The text/plain of a MIME bundle, or "" when it has none.
std::string PlainText(const MimeBundle& bundle);

}  // namespace execbox::engine
