# execbox agent: runs one piece of user code inside the jail and reports what happened.
# Stdlib only, Python 3.11, one file (the C++ side embeds it verbatim).
#
# Invocation (see python_program.cc):
#     python3 -I -S -B -u /opt/execbox/agent.py /opt/execbox/request.json
# The working directory is the work dir, fd 0 is the given stdin (a pipe, EOF at its end),
# fd 1/2 are the live stdout/stderr, fd 3 is the report channel.
#
# Request (argv[1], JSON):
#     {"mode": "run" | "check", "code": str, "filename": "<cell>", "policy": profile | null,
#      "figures": {"max_width_px", "max_height_px", "max_bytes", "dpi"},
#      "max_repr_bytes": int, "max_stream_event_bytes": int}
#
# Report (fd 3): JSON Lines, one event per line, written as things happen, so a run that is
# killed has still delivered everything before the kill. Events, in order:
#     {"type": "findings", "findings": [{rule, severity, line, column, message, suggestion}]}
#     {"type": "stream", "name": "stdout" | "stderr", "text": str}      (ordered, merged)
#     {"type": "stream_truncated"}                       (once, after the stream budget)
#     {"type": "display", "data": {mime: value}, "metadata": {...}}
#     {"type": "result", "data": {mime: value}, "metadata": {...}}
#     {"type": "error", "phase": "policy" | "compile" | "run" | "internal", "ename",
#      "evalue", "traceback": [line, ...], "line"?, "column"?, "text"?}
#     {"type": "exit", "code": int}                      (last, whenever the agent finishes)
# Text MIME values are str, binary ones (image/png, image/jpeg, ...) base64 str, JSON ones
# (application/json, */*+json) JSON values. Every bundle has text/plain.
# Columns (findings and syntax errors) are 1-based character offsets, as CPython reports them
# in SyntaxError.offset; lines are 1-based.
#
# Exit codes (also in the exit event): 0 success (and check mode without refusals), the
# SystemExit code & 0xFF, 1 syntax error / policy refusal / uncaught exception, 130
# KeyboardInterrupt, 70 agent failure (error phase "internal"). Code that calls os._exit()
# itself ends without an exit event: the process status is then the only truth.
# The end of a run does what interpreter shutdown would -- join non-daemon threads, run atexit
# handlers (the user's and libraries'), flush sys.stdout/stderr and files left open for
# writing -- then sends the exit event and leaves with os._exit(), skipping teardown (about
# 250 ms with numpy, pandas and matplotlib loaded).
#
# Warm mode. A zygote (C++ embedding libpython) imports this file as the module execbox_agent
# (so __name__ is not "__main__" and main() does not run) and calls warm_up(preload) once:
# dist-packages on sys.path, the matplotlib font cache seeded, the preload modules imported
# (failures skipped and returned as "name: error" strings), matplotlib on Agg with one plot
# drawn, the agent's lazy imports done, no thread left running, gc.collect() + gc.freeze().
# It then forks one child per execution; the C++ side locks the child down, writes one ready
# byte on the channel and calls serve(channel_fd, session), which never returns and writes
# nothing on the channel. The channel is a connected AF_UNIX SOCK_STREAM socket; per request:
#     header: 8 bytes, the body's length as unsigned 64-bit little-endian, with exactly 4 fds
#             attached by SCM_RIGHTS: [stdin read end, stdout, stderr, report write ends]
#     body:   that many bytes of UTF-8 JSON, the request above plus optional
#             "inputs": [{"name": relative path, "content_base64": str}]
# The fds become 0, 1, 2 and the report fd (moved to >= 512, close-on-exec); the inputs are
# created in the work dir (parents made, no symlink followed, no file replaced, absolute
# names and '..' refused); the first execution of a child reseeds `random` and numpy's global
# RandomState (every child starts with the zygote's state); then the request runs as above,
# with SIGINT raising KeyboardInterrupt and SIGPIPE ignored, as in python3.
#   - One-shot (session false): the child ends like the cold agent (threads joined, atexit
#     handlers run, exit event, os._exit(code)), with b"D" written on the channel between the
#     exit event and os._exit: the host may answer before the process has wound down.
#   - Session (session true): the globals (one __main__ module), imports, open files and
#     threads persist from one execution to the next; display(), print() and pyplot.show()
#     report to the current execution. An execution ends without joining threads or running
#     atexit handlers: output flushed, exit event sent, report fd closed, /dev/null put on fds
#     0-2 (the host sees EOF on every pipe of the execution), one byte b"D" written on the
#     channel (the host's sign that the execution is over), and the next header awaited. A
#     SystemExit ends the execution with its code, not the session. Figures left open are
#     shown and closed. Each execution's source stays in linecache under its own name, so a
#     traceback through a function of an earlier execution shows that execution's line: an
#     execution runs under the request's filename unless an earlier execution of the session
#     used that name; then its 1-based number is added ("<cell>" -> "<cell-3>", "job.py" ->
#     "job-3.py"), and its tracebacks, warnings and events use that name.
# EOF on the channel where a header would start: os._exit(0). A broken header (wrong fd
# count, truncated control data, EOF inside it or the body) or a body that is not JSON: a
# message on stderr (the request's too, and an internal error and exit event on its report
# when its fds arrived) and os._exit(70). A JSON request that is invalid (bad mode, policy or
# inputs) is an internal error of that execution only (exit code 70; a session goes on).
import _ast  # the node classes, without the cost of importing ast (enum, contextlib, ...)
import _signal
import _thread
import binascii
import builtins
import codecs
import io
import json
import linecache
import os
import sys
import traceback

# The file name in this file's code objects (frames to hide), also when run from a .pyc.
AGENT_FILE = (lambda: None).__code__.co_filename
REPORT_FD = 3
INTERNAL_ERROR_EXIT = 70  # EX_SOFTWARE: the agent itself failed, not the user's code
DEFAULTS = {
    "max_repr_bytes": 1 << 20,
    "max_stream_event_bytes": 1 << 20,
    "figures": {"max_width_px": 2000, "max_height_px": 2000, "max_bytes": 4 << 20, "dpi": None},
}
# Stream text is merged into one event until a line ends or this much is pending.
STREAM_CHUNK_CHARS = 8192


# ---------------------------------------------------------------------------------------------
# Bytes that are not UTF-8 and strings that cannot be encoded must never crash anything.

def _stream_encode_errors(exc):
    """For text written to fd 1/2: a surrogate-escaped byte (U+DC80..U+DCFF, as produced when
    Python decodes invalid bytes with 'surrogateescape') goes out as that byte again; any other
    unencodable character (a lone surrogate) becomes U+FFFD."""
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    out = bytearray()
    for ch in exc.object[exc.start:exc.end]:
        code = ord(ch)
        out += bytes([code - 0xDC00]) if 0xDC80 <= code <= 0xDCFF else "\ufffd".encode()
    return bytes(out), exc.end


def _json_encode_errors(exc):
    """For the report: lone surrogates in any string become U+FFFD, so every line is UTF-8."""
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    # Bytes: the UTF-8 encoder only accepts ASCII text from an error handler.
    return "\ufffd".encode() * (exc.end - exc.start), exc.end


codecs.register_error("execbox.stream", _stream_encode_errors)
codecs.register_error("execbox.json", _json_encode_errors)


def _utf8_len(text):
    return len(text.encode("utf-8", "surrogatepass"))


def _cap_text(text, limit):
    """Keeps the head and the tail of text within limit UTF-8 bytes (the end of a long output
    matters as much as its start), with a marker saying how much was dropped."""
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= limit:
        return text, False
    marker_room = 64
    keep = max(limit - marker_room, 0)
    head, tail = data[: keep * 2 // 3], data[len(data) - (keep - keep * 2 // 3):] if keep else b""
    dropped = len(data) - len(head) - len(tail)
    marker = "\n... [%d bytes truncated] ...\n" % dropped
    return (head.decode("utf-8", "ignore") + marker + tail.decode("utf-8", "ignore")), True


def _safe_str(obj):
    try:
        return str(obj)
    except BaseException:  # noqa: BLE001 - a user __str__ may raise anything
        return "<unprintable %s object>" % type(obj).__name__


def _write_all(fd, data):
    written = os.write(fd, data)
    if written < len(data):  # a pipe may take less (e.g. after a signal)
        view = memoryview(data)[written:]
        while view:
            view = view[os.write(fd, view):]


# ---------------------------------------------------------------------------------------------
# The report channel.

_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))
_json_string = json.encoder.encode_basestring  # a str as a JSON string literal, non-ASCII kept


class Reporter:
    """Writes events as JSON Lines to the report fd, and keeps the ordered record of the
    stdout/stderr writes as stream events.

    Stream text is merged while consecutive writes go to the same stream and is sent when a
    write ends a line, another stream or event comes, STREAM_CHUNK_CHARS are pending, or the
    code calls flush(): one print() is one event, and only a trailing partial line can be
    missing from the events of a killed run (fd 1/2 have every byte anyway)."""

    def __init__(self, fd, stream_budget):
        self._fd = fd
        self._pid = os.getpid()
        self._lock = _thread.RLock()  # user threads print too
        self._writing = False
        self._undecoded = {"stdout": b"", "stderr": b""}  # the start of a split UTF-8 sequence
        self._pending_name = None
        self._pending = []
        self._pending_chars = 0
        self._stream_budget = stream_budget
        self._streams_truncated = False

    def active(self):
        return self._fd is not None

    def after_fork_in_child(self):
        """A child forked by the user's code writes to fd 1/2 but must not report."""
        self._fd = None
        self._lock = _thread.RLock()

    def set_stream_budget(self, budget):
        self._stream_budget = budget

    def restart(self, fd, stream_budget):
        """Warm mode: the next execution's report, on its own fd, through the same reporter (the
        streams and display() of a session hold this object)."""
        with self._lock:
            self._fd = fd
            self._pid = os.getpid()
            self._undecoded = {"stdout": b"", "stderr": b""}
            self._pending_name, self._pending, self._pending_chars = None, [], 0
            self._stream_budget = stream_budget
            self._streams_truncated = False

    def close(self):
        """Ends the report: the fd is closed (EOF for the host) and later writes are dropped."""
        with self._lock:
            fd, self._fd = self._fd, None
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass

    def emit(self, event):
        if not self.active() or os.getpid() != self._pid:
            return
        with self._lock:
            self._flush_stream_locked()
            self._write_locked(event)

    def record_stream(self, name, data):
        """Called after data (bytes) went to fd 1 or 2. This is on the path of every print(),
        so it is kept cheap."""
        if self._fd is None or self._streams_truncated:
            return
        with self._lock:
            pending = self._undecoded[name]
            if pending:
                data = pending + data
            text, used = codecs.utf_8_decode(data, "replace", False)
            self._undecoded[name] = data[used:]
            self._add_stream_text_locked(name, text)

    def flush_streams(self, final=False):
        if not self.active():
            return
        with self._lock:
            if final:
                for name, data in self._undecoded.items():
                    self._add_stream_text_locked(name, codecs.utf_8_decode(data, "replace", True)[0])
                    self._undecoded[name] = b""
            self._flush_stream_locked()

    def _add_stream_text_locked(self, name, text):
        if not text:
            return
        if self._pending_name != name:
            self._flush_stream_locked()
        self._pending_name = name
        self._pending.append(text)
        self._pending_chars += len(text)
        # A signal handler that prints while an event is being written must not interleave
        # its line with that event's line: it only queues.
        if not self._writing and (text[-1] in "\n\r" or self._pending_chars >= STREAM_CHUNK_CHARS):
            self._flush_stream_locked()

    def _flush_stream_locked(self):
        if not self._pending or self._writing:
            return
        name, text = self._pending_name, "".join(self._pending)
        self._pending, self._pending_chars = [], 0
        if self._streams_truncated:
            return
        data = text.encode("utf-8", "surrogatepass")
        if len(data) > self._stream_budget:
            text = data[: self._stream_budget].decode("utf-8", "ignore")
            self._streams_truncated = True
        self._stream_budget -= _utf8_len(text)
        if text:
            # Hand-built: the common event, one per printed line.
            self._write_line_locked('{"type":"stream","name":"%s","text":%s}' % (name, _json_string(text)))
        if self._streams_truncated:
            self._write_locked({"type": "stream_truncated"})

    def _write_locked(self, event):
        try:
            line = _ENCODER.encode(event)
        except (TypeError, ValueError, RecursionError) as exc:
            # Only an agent bug gets here: user-provided values are checked before.
            line = _ENCODER.encode({"type": "error", "phase": "internal", "ename": type(exc).__name__,
                                    "evalue": "unserializable %s event: %s" % (event.get("type"), exc),
                                    "traceback": []})
        self._write_line_locked(line)

    def _write_line_locked(self, line):
        if self._fd is None:  # closed by another thread since the caller looked
            return
        self._writing = True
        try:
            _write_all(self._fd, line.encode("utf-8", "execbox.json") + b"\n")
        except OSError:
            self._fd = None  # the host stopped listening; the code keeps running
        finally:
            self._writing = False

    def write_raw_line(self, line):
        """Last resort when memory is exhausted: a pre-encoded line."""
        if self.active():
            try:
                _write_all(self._fd, line)
            except OSError:
                pass


def take_report_fd():
    """Moves the report fd from 3 to a high, close-on-exec number, so that the user's code
    neither inherits it into child programs nor stumbles on it by opening files (fd 3 is the
    first free number). Hostile code can still find it; the host must treat every line as
    untrusted."""
    try:
        os.fstat(REPORT_FD)
    except OSError:
        return None  # run by hand without a report channel
    return _move_fd_high(REPORT_FD)


def _move_fd_high(fd):
    """Returns a close-on-exec copy of fd numbered 512 or above (where the fd limit allows) and
    closes fd."""
    import fcntl
    import resource
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    target = 512 if soft == resource.RLIM_INFINITY else max(min(512, soft - 1), REPORT_FD + 1)
    try:
        moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, target)
    except OSError:
        moved = os.dup(fd)  # non-inheritable too
    os.close(fd)
    return moved


# ---------------------------------------------------------------------------------------------
# stdout / stderr: every byte goes straight to fd 1/2 (live output for the host) and into the
# ordered stream record.

class OutBuffer(io.BufferedIOBase):
    """sys.stdout.buffer: raw bytes, written through."""

    def __init__(self, stream):
        super().__init__()
        self._stream = stream

    name = property(lambda self: self._stream.name)
    mode = "wb"

    def write(self, data):
        if self.closed:
            raise ValueError("write to closed file")
        data = bytes(data)
        self._stream.write_bytes(data)
        return len(data)

    def writable(self):
        return True

    def fileno(self):
        return self._stream.fileno()

    def isatty(self):
        return False

    def flush(self):
        self._stream.flush()

    def detach(self):
        raise io.UnsupportedOperation("detach")

    @property
    def raw(self):
        return self


class OutStream(io.TextIOBase):
    """sys.stdout / sys.stderr. Unbuffered: the host sees output as it is written."""

    encoding = "utf-8"
    errors = "surrogateescape"
    line_buffering = True
    write_through = True
    newlines = None

    def __init__(self, name, fd, reporter, on_buffer_use):
        super().__init__()
        self._name = name
        self._fd = fd
        self._reporter = reporter
        self._buffer = OutBuffer(self)
        self._on_buffer_use = on_buffer_use
        self.name = "<%s>" % name

    @property
    def buffer(self):
        # A wrapper the user builds on the buffer (io.TextIOWrapper(sys.stdout.buffer)) holds
        # its own unflushed text, which only interpreter teardown would flush: remember that.
        self._on_buffer_use()
        return self._buffer

    def write(self, text):
        if not isinstance(text, str):
            raise TypeError("write() argument must be str, not %s" % type(text).__name__)
        if self.closed:
            raise ValueError("I/O operation on closed file.")
        if text:
            self.write_bytes(text.encode("utf-8", "execbox.stream"))
        return len(text)

    def write_bytes(self, data):
        if data:
            _write_all(self._fd, data)
            self._reporter.record_stream(self._name, data)

    def write_internal(self, text):
        """For the agent's own messages: works even if the user closed the stream."""
        try:
            self.write_bytes(text.encode("utf-8", "execbox.stream"))
        except OSError:
            pass

    def flush(self):
        self._reporter.flush_streams()

    def fileno(self):
        return self._fd

    def isatty(self):
        return False

    def readable(self):
        return False

    def writable(self):
        return True

    def seekable(self):
        return False

    def reconfigure(self, **kwargs):
        """Accepted and ignored: code often asks for UTF-8, which this stream always is."""

    def detach(self):
        self._on_buffer_use()
        return self._buffer


# ---------------------------------------------------------------------------------------------
# The request.

class RequestError(Exception):
    pass


def _int_field(obj, key, default):
    value = obj.get(key, default)
    if value is None:
        return default
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise RequestError("%r must be a positive integer" % key)
    return value


def load_request(argv):
    if len(argv) != 2:
        raise RequestError("usage: agent.py REQUEST.json")
    with open(argv[1], "rb") as f:
        request = json.loads(f.read().decode("utf-8", "replace"))
    return parse_request(request)


def parse_request(request):
    """The checked request, with defaults, from the decoded JSON value."""
    if not isinstance(request, dict):
        raise RequestError("the request must be a JSON object")
    mode = request.get("mode", "run")
    if mode not in ("run", "check"):
        raise RequestError("mode must be 'run' or 'check'")
    code = request.get("code")
    if not isinstance(code, str):
        raise RequestError("code must be a string")
    filename = request.get("filename") or "<cell>"
    if not isinstance(filename, str):
        raise RequestError("filename must be a string")
    filename = filename.replace("\0", "\ufffd")
    policy = request.get("policy")
    rules = compile_policy(policy) if policy is not None else []
    figures = request.get("figures") or {}
    if not isinstance(figures, dict):
        raise RequestError("figures must be an object")
    defaults = DEFAULTS["figures"]
    dpi = figures.get("dpi", defaults["dpi"])
    if dpi is not None and (not isinstance(dpi, (int, float)) or isinstance(dpi, bool) or dpi <= 0):
        raise RequestError("figures.dpi must be a positive number")
    return {
        "mode": mode,
        # A UTF-8 byte order mark is not part of the program (Python skips it in files).
        "code": code[1:] if code.startswith("\ufeff") else code,
        "filename": filename,
        "policy_name": policy.get("name", "custom") if isinstance(policy, dict) else None,
        "rules": rules,
        "figures": {
            "max_width_px": _int_field(figures, "max_width_px", defaults["max_width_px"]),
            "max_height_px": _int_field(figures, "max_height_px", defaults["max_height_px"]),
            "max_bytes": _int_field(figures, "max_bytes", defaults["max_bytes"]),
            "dpi": dpi,
        },
        "max_repr_bytes": _int_field(request, "max_repr_bytes", DEFAULTS["max_repr_bytes"]),
        "max_stream_event_bytes": _int_field(request, "max_stream_event_bytes",
                                             DEFAULTS["max_stream_event_bytes"]),
    }


# ---------------------------------------------------------------------------------------------
# Syntax check: parse, split off a trailing expression, compile both parts.

class CompileFailure(Exception):
    def __init__(self, syntax_error):
        super().__init__()
        self.syntax_error = syntax_error


def _source_error(source, filename, message, index):
    """A SyntaxError for source text that compile() rejects with something else (ValueError
    for NUL bytes in 3.11, UnicodeEncodeError for lone surrogates). Python 3.12 reports the NUL
    case as SyntaxError too, and either way the code is not valid Python: status syntax_error."""
    start = 0
    for line, text in enumerate(split_lines(source), 1):
        if index < start + len(text):
            break
        start += len(text)
    column = index - start + 1
    return SyntaxError(message, (filename, line, column, text.rstrip("\r\n"), line, column + 1))


def split_lines(source):
    """Lines as Python counts them (\n, \r\n, \r), endings kept. str.splitlines() would also
    split at form feeds and U+2028, and shift every line number after one."""
    return io.StringIO(source, newline="").readlines()


def _ends_with_semicolon(lines, node):
    """Jupyter's convention: a trailing ';' after the last expression hides its value. After
    that expression only blanks, comments and ';' can follow."""
    rest = lines[node.end_lineno - 1].encode("utf-8", "surrogatepass")[node.end_col_offset:]
    rest = [rest.decode("utf-8", "replace")] + lines[node.end_lineno:]
    code = "".join(line.split("#", 1)[0] for line in rest)
    return code.strip().startswith(";")


def _future_flags(tree):
    import __future__
    flags = 0
    for node in tree.body:
        if isinstance(node, _ast.ImportFrom) and node.module == "__future__":
            for alias in node.names:
                feature = getattr(__future__, alias.name, None)
                flags |= getattr(feature, "compiler_flag", 0)
    return flags


def compile_cell(source, filename):
    """Returns (tree, body_code, last_code, show_last, warnings). The last statement, if it is
    an expression, is compiled separately in 'eval' mode so its value can become the result.
    Raises CompileFailure with a SyntaxError (or subclass) when the code is not valid."""
    import warnings
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            tree = compile(source, filename, "exec", _ast.PyCF_ONLY_AST, dont_inherit=True)
            last = None
            if tree.body and isinstance(tree.body[-1], _ast.Expr):
                last = tree.body.pop()
            body_code = compile(tree, filename, "exec", dont_inherit=True)
            last_code = None
            if last is not None:
                last_code = compile(_ast.Expression(last.value), filename, "eval",
                                    _future_flags(tree), dont_inherit=True)
                tree.body.append(last)
        except (SyntaxError, RecursionError, MemoryError) as exc:  # also IndentationError, TabError
            # RecursionError: nested too deeply, as Python reports it for a file.
            raise CompileFailure(exc) from None
        except UnicodeEncodeError as exc:  # before ValueError, its base class
            message = "source code cannot contain lone surrogates (U+%04X)" % ord(source[exc.start])
            raise CompileFailure(_source_error(source, filename, message, exc.start)) from None
        except ValueError as exc:
            if "\0" not in source:
                raise
            raise CompileFailure(_source_error(source, filename, str(exc), source.index("\0"))) from None
    show_last = last is not None and not _ends_with_semicolon(split_lines(source), last)
    return tree, body_code, last_code, show_last, caught


def _add_missing_caret(lines, exc):
    """CPython prints no caret for some errors (TabError, unexpected indent); a model reads
    the position more easily with one, so add it under the reported column."""
    if exc.text is None or any(line.strip().startswith("^") for line in lines):
        return
    text = exc.text.rstrip("\r\n")
    stripped = text.lstrip()
    shown = "    " + stripped
    if shown not in lines:
        return
    indent = len(text) - len(stripped)
    column = max((exc.offset or 1) - 1 - indent, 0)
    column = min(column, max(len(stripped) - 1, 0))
    lines.insert(lines.index(shown) + 1, "    " + " " * column + "^")


def syntax_error_event(exc, filename, source_lines):
    """The error event for a SyntaxError, with the traceback lines Python would print."""
    if not isinstance(exc, SyntaxError):
        return {"type": "error", "phase": "compile", "ename": type(exc).__name__,
                "evalue": _safe_str(exc),
                "traceback": ["%s: %s" % (type(exc).__name__, _safe_str(exc))]}
    if exc.text is None and exc.lineno and 0 < exc.lineno <= len(source_lines):
        # Errors found by the compiler (not the parser), e.g. 'return' outside function,
        # come without the line; Python would read it from the file.
        exc.text = source_lines[exc.lineno - 1]
    exc.filename = filename
    lines = "".join(traceback.format_exception_only(type(exc), exc)).rstrip("\n").split("\n")
    _add_missing_caret(lines, exc)
    event = {"type": "error", "phase": "compile", "ename": type(exc).__name__,
             "evalue": _safe_str(exc.msg), "traceback": lines}
    if exc.lineno:
        event["line"] = exc.lineno
    if exc.offset:
        event["column"] = exc.offset
    if exc.text is not None:
        event["text"] = exc.text.rstrip("\r\n")
    return event


# ---------------------------------------------------------------------------------------------
# Policy lint. A courtesy to the model -- fast, precise feedback with a suggestion of what to
# do instead -- and NEVER the security boundary: Python is far too dynamic for a static check
# to stop hostile code, and the jail (namespaces, seccomp, Landlock, cgroups) is what does.
#
# A profile is data: {"name": str, "description": str, "rules": [rule, ...]}. A rule:
#   "id": str, "action": "refuse" | "warn", "message": str, "suggestion": str,
#   "description": str (ignored), and one or more matchers:
#   "imports": [module pattern]   import x / from x import y / __import__('x') /
#                                 importlib.import_module('x'); a pattern also matches the
#                                 module's submodules
#   "calls": [qualified pattern]  any use -- call or mere reference -- of a qualified name,
#                                 resolved through import aliases, `x = os`, getattr(os, 'y'),
#                                 sys.modules['x'], __import__('x').y, and `from x import *`
#   "dynamic_calls": [name]       calls whose first argument is not a string literal, and any
#                                 use of the name other than a direct call (f = eval; f(s))
#   "path_calls": [name], "allowed_paths": [dir]
#                                 calls with a literal path argument outside the allowed dirs
#                                 (the work dir -- the current directory -- is always allowed;
#                                 relative paths are resolved against it)
#   "builtins_access": true       getattr/setattr/delattr/hasattr/vars on the builtins module
#                                 (`__builtins__` or `import builtins`), its __dict__, and
#                                 subscripts of it or with a '__builtins__' key
#   "attributes": [pattern]       attribute names, also via getattr(x, 'name')
# Patterns are fnmatch patterns. "{name}" in message and suggestion becomes what matched.
# Qualified names of builtins are bare: builtins.eval is "eval".

RULE_KEYS = {"id", "action", "message", "suggestion", "description", "imports", "calls",
             "dynamic_calls", "path_calls", "allowed_paths", "builtins_access", "attributes"}
IMPORT_FUNCTIONS = {"__import__", "importlib.__import__", "importlib.import_module"}
BUILTINS_PROBES = {"getattr", "setattr", "delattr", "hasattr", "vars"}


def compile_policy(profile):
    if not isinstance(profile, dict):
        raise RequestError("policy must be an object")
    rules = profile.get("rules", [])
    if not isinstance(rules, list):
        raise RequestError("policy.rules must be a list")
    compiled = []
    for rule in rules:
        if not isinstance(rule, dict) or not isinstance(rule.get("id"), str):
            raise RequestError("each policy rule must be an object with a string id")
        unknown = set(rule) - RULE_KEYS
        if unknown:
            raise RequestError("policy rule %s: unknown keys %s" % (rule["id"], sorted(unknown)))
        if rule.get("action", "refuse") not in ("refuse", "warn"):
            raise RequestError("policy rule %s: action must be refuse or warn" % rule["id"])
        for key in ("imports", "calls", "dynamic_calls", "path_calls", "allowed_paths", "attributes"):
            value = rule.get(key, [])
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise RequestError("policy rule %s: %s must be a list of strings" % (rule["id"], key))
        compiled.append(dict(rule, action=rule.get("action", "refuse"),
                             _imports=_pattern_matcher(rule.get("imports")),
                             _calls=_pattern_matcher(rule.get("calls")),
                             _attributes=_pattern_matcher(rule.get("attributes"))))
    return compiled


def _pattern_matcher(patterns):
    """One regular expression for a list of fnmatch patterns (the lint checks every name)."""
    if not patterns:
        return lambda name: False
    import fnmatch
    import re
    return re.compile("|".join(fnmatch.translate(p) for p in patterns)).match


def _children(node):
    for field in node._fields:
        value = getattr(node, field, None)
        if isinstance(value, _ast.AST):
            yield value
        elif isinstance(value, list):
            yield from (item for item in value if isinstance(item, _ast.AST))


def _walk(tree):
    todo = [tree]
    while todo:
        node = todo.pop()
        yield node
        todo.extend(_children(node))


def _norm(name):
    return name[len("builtins."):] if name.startswith("builtins.") else name


def _literal_str(node):
    return node.value if isinstance(node, _ast.Constant) and isinstance(node.value, str) else None


def _first_arg(call, keywords=()):
    if call.args and not isinstance(call.args[0], _ast.Starred):
        return call.args[0]
    for kw in call.keywords:
        if kw.arg in keywords:
            return kw.value
    return None


class Linter:
    def __init__(self, rules, source):
        self._rules = rules
        self._lines = split_lines(source)
        self._aliases = {}  # local name -> [qualified names]
        self._stars = []  # modules imported with *
        self._bound = set()  # names bound by the code itself (they shadow builtins)
        self._called = set()  # id() of nodes that are the function of a call
        self._findings = {}

    def run(self, tree):
        self._collect_names(tree)
        self.visit(tree)
        return sorted(self._findings.values(), key=lambda f: (f["line"], f["column"], f["rule"]))

    # Name resolution -------------------------------------------------------------------------

    def _collect_names(self, tree):
        assignments = []
        for node in _walk(tree):
            if isinstance(node, _ast.Import):
                for alias in node.names:
                    if alias.asname:
                        self._aliases[alias.asname] = [alias.name]
                    else:
                        top = alias.name.split(".")[0]
                        self._aliases[top] = [top]
            elif isinstance(node, _ast.ImportFrom) and node.level == 0 and node.module:
                for alias in node.names:
                    if alias.name == "*":
                        self._stars.append(node.module)
                    else:
                        self._aliases[alias.asname or alias.name] = [node.module + "." + alias.name]
            elif isinstance(node, (_ast.FunctionDef, _ast.AsyncFunctionDef, _ast.ClassDef)):
                self._bound.add(node.name)
            elif isinstance(node, _ast.arg):
                self._bound.add(node.arg)
            elif isinstance(node, _ast.Name) and not isinstance(node.ctx, _ast.Load):
                self._bound.add(node.id)
            elif isinstance(node, _ast.ExceptHandler) and node.name:
                self._bound.add(node.name)
            if isinstance(node, _ast.Assign) and len(node.targets) == 1:
                assignments.append((node.targets[0], node.value))
            elif isinstance(node, _ast.NamedExpr):
                assignments.append((node.target, node.value))
        # `o = os`, `imp = __import__`, `s = getattr(os, 'system')`: twice, for chains.
        for _ in range(2):
            for target, value in assignments:
                if isinstance(target, _ast.Name):
                    names = self._qualified(value)
                    if names:
                        self._aliases[target.id] = names

    def _qualified(self, node):
        """The qualified names an expression may stand for ([] if unknown)."""
        if isinstance(node, _ast.Name):
            if node.id in self._aliases:
                return self._aliases[node.id]
            if node.id == "__builtins__":
                return ["builtins"]
            if node.id in self._bound:
                return []
            return [node.id] + [star + "." + node.id for star in self._stars]
        if isinstance(node, _ast.Attribute):
            return [base + "." + node.attr for base in self._qualified(node.value)]
        if isinstance(node, _ast.Subscript):
            key = _literal_str(node.slice)
            if key is not None and "sys.modules" in self._qualified(node.value):
                return [key]
            return []
        if isinstance(node, _ast.Call):
            functions = {_norm(n) for n in self._qualified(node.func)}
            if "getattr" in functions and len(node.args) >= 2:
                attr = _literal_str(node.args[1])
                return [base + "." + attr for base in self._qualified(node.args[0])] if attr else []
            arg = _first_arg(node, ("name",))
            module = _literal_str(arg) if arg is not None else None
            if module is None or module.startswith("."):
                return []
            if functions & {"__import__", "importlib.__import__"}:
                fromlist = len(node.args) >= 4 or any(k.arg == "fromlist" for k in node.keywords)
                return [module if fromlist else module.split(".")[0]]
            if "importlib.import_module" in functions:
                return [module]
        return []

    # Findings --------------------------------------------------------------------------------

    def _column(self, lineno, col_offset):
        if not 0 < lineno <= len(self._lines):
            return col_offset + 1
        prefix = self._lines[lineno - 1].encode("utf-8", "surrogatepass")[:col_offset]
        return len(prefix.decode("utf-8", "replace")) + 1

    def _add(self, rule, node, name):
        line = getattr(node, "lineno", 1)
        column = self._column(line, getattr(node, "col_offset", 0))
        key = (rule["id"], line, column)
        if key in self._findings:
            return
        end_line = getattr(node, "end_lineno", None) or line
        end_column = self._column(end_line, node.end_col_offset) if end_line == line and \
            getattr(node, "end_col_offset", None) is not None else None
        name = name if len(name) <= 80 else name[:77] + "..."
        self._findings[key] = {
            "rule": rule["id"],
            "severity": "error" if rule["action"] == "refuse" else "warning",
            "line": line,
            "column": column,
            "message": rule.get("message", "refused by rule %s: {name}" % rule["id"]).replace("{name}", name),
            "suggestion": rule.get("suggestion", "").replace("{name}", name),
            "_end_column": end_column,
        }

    def _segment(self, node):
        """The node's source text (its first line if it spans more)."""
        line = self._lines[node.lineno - 1].encode("utf-8", "surrogatepass")
        end = node.end_col_offset if node.end_lineno == node.lineno else len(line)
        return line[node.col_offset:end].decode("utf-8", "replace").rstrip("\r\n")

    def _check_import(self, module, node):
        prefixes = []
        for part in module.split("."):
            prefixes.append(prefixes[-1] + "." + part if prefixes else part)
        for rule in self._rules:
            if any(rule["_imports"](p) for p in prefixes):
                self._add(rule, node, module)

    def _check_reference(self, names, node):
        called = id(node) in self._called
        for name in map(_norm, names):
            for rule in self._rules:
                if rule["_calls"](name):
                    self._add(rule, node, name)
                if not called and name in rule.get("dynamic_calls", ()):
                    self._add(rule, node, name)

    def _check_attribute_name(self, attr, node):
        for rule in self._rules:
            if rule["_attributes"](attr):
                self._add(rule, node, attr)

    def _check_path(self, rule, node, path):
        allowed = [os.getcwd()] + rule.get("allowed_paths", [])
        full = os.path.normpath(os.path.join(os.getcwd(), path))
        if not any(full == a.rstrip("/") or full.startswith(a.rstrip("/") + "/") for a in allowed):
            self._add(rule, node, path)

    def _is_builtins(self, node):
        return "builtins" in self._qualified(node)

    # Visitors (ast.NodeVisitor's protocol) ---------------------------------------------------

    def visit(self, node):
        method = getattr(self, "visit_" + type(node).__name__, None)
        if method is not None:
            method(node)
        else:
            self.generic_visit(node)

    def generic_visit(self, node):
        for child in _children(node):
            self.visit(child)

    def visit_Import(self, node):
        for alias in node.names:
            self._check_import(alias.name, node)
        self.generic_visit(node)

    def visit_ImportFrom(self, node):
        if node.level == 0 and node.module:
            self._check_import(node.module, node)
            for alias in node.names:
                if alias.name != "*":
                    # `from os import system` uses os.system; `from urllib import request`
                    # imports urllib.request.
                    self._check_import(node.module + "." + alias.name, node)
                    self._check_reference([node.module + "." + alias.name], node)
        self.generic_visit(node)

    def visit_Call(self, node):
        self._called.add(id(node.func))
        functions = [_norm(n) for n in self._qualified(node.func)]
        arg = _first_arg(node, ("source", "name", "file", "path", "filename", "expression",
                                "object"))
        literal = _literal_str(arg) if arg is not None else None
        for rule in self._rules:
            for function in functions:
                if function in rule.get("dynamic_calls", ()) and not (
                        isinstance(arg, _ast.Constant) and isinstance(arg.value, (str, bytes))):
                    self._add(rule, node, function)
                if function in rule.get("path_calls", ()) and literal is not None:
                    self._check_path(rule, node, literal)
                if rule.get("builtins_access") and function in BUILTINS_PROBES and \
                        node.args and self._is_builtins(node.args[0]):
                    self._add(rule, node, self._segment(node))
        for function in functions:
            if function in IMPORT_FUNCTIONS and literal is not None and not literal.startswith("."):
                self._check_import(literal, node)
            if function == "getattr" and len(node.args) >= 2:
                attr = _literal_str(node.args[1])
                if attr is not None:
                    self._check_attribute_name(attr, node)
                    self._check_reference(self._qualified(node), node)
        self.generic_visit(node)

    def visit_Attribute(self, node):
        self._check_reference(self._qualified(node), node)
        self._check_attribute_name(node.attr, node)
        if node.attr == "__dict__" and self._is_builtins(node.value):
            self._builtins_access(node)
        self.generic_visit(node)

    def visit_Name(self, node):
        if isinstance(node.ctx, _ast.Load):
            self._check_reference(self._qualified(node), node)
        self.generic_visit(node)

    def visit_Subscript(self, node):
        if self._is_builtins(node.value) or _literal_str(node.slice) == "__builtins__":
            self._builtins_access(node)
        self.generic_visit(node)

    def _builtins_access(self, node):
        for rule in self._rules:
            if rule.get("builtins_access"):
                self._add(rule, node, self._segment(node))


def lint(rules, source, tree):
    if not rules:
        return []
    # The visitor recurses once per level of nesting; what compile() accepted fits in this
    # (Python-to-Python calls use no C stack in 3.11).
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 20000))
    try:
        return Linter(rules, source).run(tree)
    except RecursionError:
        return [{"rule": "policy-check", "severity": "error", "line": 1, "column": 1,
                 "message": "the code is nested too deeply for the policy check",
                 "suggestion": "split deeply nested expressions into smaller statements",
                 "_end_column": None}]
    finally:
        sys.setrecursionlimit(limit)


def policy_error_event(policy_name, refusals, filename, source_lines):
    """A PolicyViolation shaped like a Python error: one block per refusal, with a caret."""
    lines = []
    for f in refusals:
        lines.append('  File "%s", line %d' % (filename, f["line"]))
        if 0 < f["line"] <= len(source_lines):
            text = source_lines[f["line"] - 1].rstrip("\r\n")
            stripped = text.lstrip(" \t\f")
            indent = len(text) - len(stripped)
            start = max(f["column"] - 1 - indent, 0)
            end = (f["_end_column"] or len(text) + 1) - 1 - indent
            lines.append("    " + stripped)
            lines.append("    " + " " * start + "^" * max(end - start, 1))
        message = "PolicyViolation: [%s] %s" % (f["rule"], f["message"])
        lines.append(message + (" Instead: " + f["suggestion"] if f["suggestion"] else ""))
    first = refusals[0]
    evalue = "the %s policy refused this code: line %d: %s" % (policy_name, first["line"], first["message"])
    if len(refusals) > 1:
        evalue += " (and %d more)" % (len(refusals) - 1)
    return {"type": "error", "phase": "policy", "ename": "PolicyViolation", "evalue": evalue,
            "traceback": lines, "line": first["line"], "column": first["column"]}


def public_finding(finding):
    return {k: v for k, v in finding.items() if not k.startswith("_")}


# ---------------------------------------------------------------------------------------------
# Rich representations (IPython's protocol).

REPR_METHODS = (
    ("text/html", "_repr_html_"),
    ("text/markdown", "_repr_markdown_"),
    ("image/svg+xml", "_repr_svg_"),
    ("image/png", "_repr_png_"),
    ("image/jpeg", "_repr_jpeg_"),
    ("text/latex", "_repr_latex_"),
    ("application/json", "_repr_json_"),
    ("application/javascript", "_repr_javascript_"),
    ("application/pdf", "_repr_pdf_"),
)
TEXT_LIKE = ("image/svg+xml", "application/javascript")


def _is_json_mime(mime):
    return mime == "application/json" or mime.endswith("+json")


def _real_method(obj, name):
    """The repr method, unless obj is a class or claims every attribute (a Mock, a proxy),
    as IPython checks."""
    if isinstance(obj, type):
        return None
    try:
        if getattr(obj, "_ipython_canary_method_should_not_exist_", None) is not None:
            return None
        method = getattr(obj, name, None)
    except Exception:  # noqa: BLE001 - a user __getattr__ may raise anything
        return None
    return method if callable(method) else None


def _json_checked(value):
    json.dumps(value, allow_nan=False)  # raises TypeError/ValueError if not plain JSON
    return value


class Formatter:
    """Builds MIME bundles. Anything user code does wrong (a repr method that raises, a value of
    the wrong type, an oversized value) skips that one representation with a note on stderr;
    it never fails the run."""

    def __init__(self, state):
        self._state = state
        self._max_text = state.request["max_repr_bytes"]
        self._max_binary = max(state.request["figures"]["max_bytes"], self._max_text)

    def _warn(self, message, exc=None):
        text = "execbox: %s" % message
        if exc is not None:
            text += ":\n" + "".join(format_exception(exc)).rstrip("\n")
        self._state.warn(text + "\n")

    def convert(self, mime, value, what):
        """A MIME value ready for JSON, or None (skipped, with a note)."""
        try:
            if _is_json_mime(mime):
                if isinstance(value, (str, bytes)):
                    value = json.loads(value)
                value = _json_checked(value)
                if len(json.dumps(value)) > self._max_text:
                    self._warn("%s is over %d bytes; %s skipped" % (what, self._max_text, mime))
                    return None
                return value
            textual = mime.startswith("text/") or mime in TEXT_LIKE
            if isinstance(value, (bytes, bytearray, memoryview)):
                value = bytes(value)
                if textual:
                    value = value.decode("utf-8", "replace")
                elif len(value) > self._max_binary:
                    self._warn("%s is %d bytes, over %d; %s skipped"
                               % (what, len(value), self._max_binary, mime))
                    return None
                else:
                    return binascii.b2a_base64(value, newline=False).decode("ascii")
            if not isinstance(value, str):
                self._warn("%s returned %s, not str or bytes; %s skipped"
                           % (what, type(value).__name__, mime))
                return None
            if textual:
                return _cap_text(value, self._max_text)[0]
            # A binary type given as str is already base64 (IPython's convention).
            if len(value) > self._max_binary * 4 // 3 + 4:
                self._warn("%s is over %d bytes; %s skipped" % (what, self._max_binary, mime))
                return None
            return value
        except Exception as exc:  # noqa: BLE001
            self._warn("%s gave an unusable %s value; skipped" % (what, mime), exc)
            return None

    def merge_metadata(self, metadata, extra, what):
        if not extra:
            return
        try:
            if not isinstance(extra, dict):
                raise TypeError("metadata must be a dict, not %s" % type(extra).__name__)
            metadata.update(_json_checked(dict(extra)))
        except Exception as exc:  # noqa: BLE001
            self._warn("the metadata from %s is not plain JSON; ignored" % what, exc)

    def _call_repr(self, obj, method_name, *args, **kwargs):
        method = _real_method(obj, method_name)
        if method is None:
            return None
        try:
            return method(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001
            self._warn("%s.%s() raised %s; skipped"
                       % (type(obj).__name__, method_name, type(exc).__name__), exc)
            return None

    def bundle(self, obj, include=None, exclude=None):
        """(data, metadata) for obj: _repr_mimebundle_ first, then the _repr_*_ methods for the
        types it did not give, then text/plain from repr()."""
        figure = self._state.figure_class()
        if figure is not None and isinstance(obj, figure):
            try:
                return self._state.figures.bundle(obj)
            except Exception as exc:  # noqa: BLE001
                self._warn("the figure could not be drawn; only its text is shown", exc)
        data, metadata = {}, {}
        name = type(obj).__name__
        result = self._call_repr(obj, "_repr_mimebundle_", include=include, exclude=exclude)
        if isinstance(result, tuple) and len(result) == 2:
            result, extra = result
            self.merge_metadata(metadata, extra, name + "._repr_mimebundle_()")
        if isinstance(result, dict):
            for mime, value in result.items():
                if not isinstance(mime, str):
                    continue
                converted = self.convert(mime, value, name + "._repr_mimebundle_()")
                if converted is not None:
                    data[mime] = converted
        elif result is not None:
            self._warn("%s._repr_mimebundle_() returned %s, not a dict; ignored"
                       % (name, type(result).__name__))
        for mime, method_name in REPR_METHODS:
            if mime in data or (include and mime not in include) or (exclude and mime in exclude):
                continue
            value = self._call_repr(obj, method_name)
            if isinstance(value, tuple) and len(value) == 2:
                value, extra = value
                self.merge_metadata(metadata, {mime: extra} if extra else None, name + "." + method_name)
            if value is not None:
                converted = self.convert(mime, value, "%s.%s()" % (name, method_name))
                if converted is not None:
                    data[mime] = converted
        wants_html = not (include and "text/html" not in include) and not (exclude and "text/html" in exclude)
        if "text/html" not in data and wants_html and self._is_pandas_series(obj):
            # pandas 1.5 gives DataFrame a _repr_html_ but not Series.
            try:
                frame = obj.to_frame()
            except Exception:  # noqa: BLE001
                frame = None
            value = self._call_repr(frame, "_repr_html_") if frame is not None else None
            if value is not None:
                converted = self.convert("text/html", value, name + ".to_frame()._repr_html_()")
                if converted is not None:
                    data["text/html"] = converted
        if "text/plain" not in data:
            data["text/plain"] = self.plain(obj)
        return data, metadata

    @staticmethod
    def _is_pandas_series(obj):
        pandas = sys.modules.get("pandas")
        series = getattr(pandas, "Series", None)
        return isinstance(series, type) and isinstance(obj, series)

    def plain(self, obj):
        try:
            text = repr(obj)
            if not isinstance(text, str):
                raise TypeError("__repr__ returned non-string (type %s)" % type(text).__name__)
        except BaseException as exc:  # noqa: BLE001 - incl. RecursionError, KeyboardInterrupt
            if isinstance(exc, (SystemExit, KeyboardInterrupt)):
                raise
            self._warn("repr() of a %s object raised %s; using the default repr"
                       % (type(obj).__name__, type(exc).__name__), exc)
            text = object.__repr__(obj)
        return _cap_text(text, self._max_text)[0]

    def raw_bundle(self, obj):
        """display(raw=True): obj is already a {mime: value} dict."""
        if not isinstance(obj, dict):
            raise TypeError("display(raw=True) takes dicts of MIME type to value, not %s"
                            % type(obj).__name__)
        data = {}
        for mime, value in obj.items():
            if not isinstance(mime, str):
                raise TypeError("MIME types must be str, not %s" % type(mime).__name__)
            converted = self.convert(mime, value, "display(raw=True)")
            if converted is not None:
                data[mime] = converted
        if "text/plain" not in data:
            data["text/plain"] = "<%s>" % ", ".join(sorted(data)) if data else ""
        return data, {}


# ---------------------------------------------------------------------------------------------
# matplotlib: Agg only; pyplot.show() and figures left open become image/png displays.

def _png_size(png):
    if png[:8] == b"\x89PNG\r\n\x1a\n" and png[12:16] == b"IHDR":
        return int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    return 0, 0


class Figures:
    def __init__(self, state):
        self._state = state
        self._limits = state.request["figures"]
        self._displayed = []  # figures shown by display() or as the result: not shown again

    @staticmethod
    def _pyplot():
        return sys.modules.get("matplotlib.pyplot")

    def _render(self, fig, dpi):
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=dpi)
        return buf.getvalue()

    def png(self, fig):
        """(png bytes or None, metadata). A figure over the pixel caps is rendered at a lower dpi
        so it fits; a PNG over the byte cap is rendered smaller until it fits. Either way the
        metadata says so, with the size it would have had."""
        limits = self._limits
        max_w, max_h, max_bytes = limits["max_width_px"], limits["max_height_px"], limits["max_bytes"]
        target = float(limits["dpi"] or fig.dpi)
        w_in, h_in = (float(v) for v in fig.get_size_inches())
        full_w, full_h = max(round(w_in * target), 1), max(round(h_in * target), 1)
        dpi = target * min(1.0, max_w / full_w, max_h / full_h)
        original = {"original_width": full_w, "original_height": full_h}
        reason = "it cannot be rendered within the caps"
        for _ in range(8):
            if dpi * max(w_in, h_in) < 16 or dpi * min(w_in, h_in) < 1:
                reason = "it cannot be rendered small enough to fit the caps"
                break
            png = self._render(fig, dpi)
            width, height = _png_size(png)
            if width > max_w or height > max_h:  # e.g. rcParams['savefig.bbox'] = 'tight'
                dpi *= min(max_w / width, max_h / height) * 0.99
                continue
            if len(png) > max_bytes:
                reason = "its PNG is over %d bytes even when rendered smaller" % max_bytes
                dpi *= min(0.9, max(0.25, (max_bytes / len(png)) ** 0.5 * 0.95))
                continue
            metadata = {"width": width, "height": height}
            if dpi < target * 0.999:
                metadata.update({"downscaled": True}, **original)
            return png, metadata
        return None, dict({"omitted": True, "reason": reason}, **original)

    def bundle(self, fig):
        self._displayed.append(fig)
        return self._figure_bundle(fig)

    def show_one(self, fig):
        data, metadata = self.bundle(fig)
        self._state.reporter.emit({"type": "display", "data": data, "metadata": metadata})

    def _figure_bundle(self, fig):
        formatter = self._state.formatter
        plain = formatter.plain(fig)
        png, metadata = self.png(fig)
        if png is None:
            return {"text/plain": "%s (not shown: %s)" % (plain, metadata["reason"])}, metadata
        return {"image/png": binascii.b2a_base64(png, newline=False).decode("ascii"),
                "text/plain": plain}, metadata

    def _open_figures(self):
        helpers = sys.modules.get("matplotlib._pylab_helpers")
        if helpers is None:
            return []
        managers = sorted(helpers.Gcf.get_all_fig_managers(), key=lambda m: m.num)
        return [m.canvas.figure for m in managers]

    def show(self):
        """pyplot.show(): every open figure becomes a display, then all are closed. A figure that
        fails to draw raises into the user's code, as it would in a notebook."""
        figures = self._open_figures()
        try:
            for fig in figures:
                data, metadata = self._figure_bundle(fig)
                self._state.reporter.emit({"type": "display", "data": data, "metadata": metadata})
        finally:
            self._close(figures)

    def flush_leftovers(self):
        """At the end: figures the code never showed are emitted too (a model that forgets
        show() still gets its plot). A failure is a note on stderr, not an error of the run."""
        figures = self._open_figures()
        for fig in figures:
            if any(fig is shown for shown in self._displayed):
                continue
            try:
                data, metadata = self._figure_bundle(fig)
            except Exception as exc:  # noqa: BLE001
                self._state.warn("execbox: a figure could not be drawn:\n%s" % "".join(format_exception(exc)))
                data = {"text/plain": "%s (not shown: drawing it raised %s)" % (
                    self._state.formatter.plain(fig), type(exc).__name__)}
                metadata = {"omitted": True, "reason": "drawing it raised %s" % type(exc).__name__}
            self._state.reporter.emit({"type": "display", "data": data, "metadata": metadata})
        self._close(figures)

    def _close(self, figures):
        pyplot = self._pyplot()
        if pyplot is not None:
            for fig in figures:
                try:
                    pyplot.close(fig)
                except Exception:  # noqa: BLE001
                    pass


# The Figures of the execution that is running: patched show() methods look it up, so that
# in a warm session they serve the current execution, not the one that patched them.
_current_figures = None


def patch_pyplot(pyplot, figures):
    global _current_figures
    _current_figures = figures
    if getattr(pyplot.show, "_execbox", False):
        return
    original = pyplot.show

    def show(*args, **kwargs):
        """Display all open figures (execbox: each becomes an image/png display output) and
        close them."""
        _current_figures.show()

    show._execbox = True
    show.__wrapped__ = original
    pyplot.show = show
    # Figure.show() only warns on Agg ("non-interactive"); here it shows that one figure.
    figure_class = getattr(sys.modules.get("matplotlib.figure"), "Figure", None)
    if figure_class is not None and not getattr(figure_class.show, "_execbox", False):
        def figure_show(self, warn=True):
            """Show the figure (execbox: as an image/png display output)."""
            _current_figures.show_one(self)

        figure_show._execbox = True
        figure_class.show = figure_show


class PatchingLoader:
    """Wraps the loader of matplotlib.pyplot to patch show() right after the module runs;
    everything else (get_source for tracebacks, ...) is the real loader's."""

    def __init__(self, loader, figures):
        self._loader = loader
        self._figures = figures

    def __getattr__(self, name):
        return getattr(self._loader, name)

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        patch_pyplot(module, self._figures)


class PyplotHook:
    """A sys.meta_path finder that only acts on matplotlib.pyplot, so that matplotlib is never
    imported unless the user's code imports it."""

    def __init__(self, figures):
        self._figures = figures

    def find_spec(self, name, path=None, target=None):
        if name != "matplotlib.pyplot":
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                if spec.loader is not None:
                    spec.loader = PatchingLoader(spec.loader, self._figures)
                return spec
        return None

    def invalidate_caches(self):
        pass


# ---------------------------------------------------------------------------------------------
# Tracebacks that show only the user's frames.

def _exception_chain(exc):
    seen, todo = set(), [exc]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        yield e
        todo.extend((e.__cause__, e.__context__))
        todo.extend(getattr(e, "exceptions", ()) if isinstance(e, BaseExceptionGroup) else ())


def strip_agent_frames(exc):
    """Removes this file's frames from the traceback of exc and of every exception chained to
    it. Library frames stay: an error inside numpy shows numpy's frames under the user's."""
    for e in _exception_chain(exc):
        kept, tb = [], e.__traceback__
        while tb is not None:
            code = tb.tb_frame.f_code
            if code.co_filename != AGENT_FILE and code is not _execute.__code__:
                kept.append(tb)
            tb = tb.tb_next
        for a, b in zip(kept, kept[1:]):
            a.tb_next = b
        if kept:
            kept[-1].tb_next = None
        e.__traceback__ = kept[0] if kept else None


def format_exception(exc):
    strip_agent_frames(exc)
    return traceback.format_exception(type(exc), exc, exc.__traceback__)


def run_error_event(exc, filename, limit):
    lines = format_exception(exc)
    text, _ = _cap_text("".join(lines).rstrip("\n"), limit)
    event = {"type": "error", "phase": "run", "ename": type(exc).__name__,
             "evalue": _cap_text(_safe_str(exc), limit)[0], "traceback": text.split("\n")}
    line, tb = None, exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == filename:
            line = tb.tb_lineno
        tb = tb.tb_next
    if line is not None:
        event["line"] = line
    return event, "".join(lines)


# ---------------------------------------------------------------------------------------------
# Files the code opened for writing must not lose buffered data to os._exit.

class OpenTracker:
    """Wraps open() to remember files opened for writing. Buffered data in a file the code never
    closed is normally written by interpreter teardown; this agent skips teardown (os._exit:
    with the scientific stack loaded it costs ~250 ms), so it closes such files itself."""

    def __init__(self):
        import weakref
        self.files = weakref.WeakSet()
        self.buffer_used = False
        self._real_open = io.open
        self._installed = False

    def install(self):
        if self._installed:  # a warm session's later executions
            return
        self._installed = True
        real_open, files = self._real_open, self.files

        def open(file, mode="r", buffering=-1, encoding=None, errors=None, newline=None,
                 closefd=True, opener=None):
            f = real_open(file, mode, buffering, encoding, errors, newline, closefd, opener)
            if isinstance(mode, str) and any(c in mode for c in "wax+"):
                try:
                    files.add(f)
                except TypeError:
                    pass
            return f

        for attr in ("__doc__", "__name__", "__qualname__", "__module__"):
            setattr(open, attr, getattr(real_open, attr))
        open.__wrapped__ = real_open
        builtins.open = io.open = open

    def needs_cleanup(self):
        return self.buffer_used or any(not f.closed for f in list(self.files))


# ---------------------------------------------------------------------------------------------
# The run.

class State:
    """Everything about this execution that the helpers share."""

    def __init__(self, request, reporter):
        self.request = request
        self.reporter = reporter
        self.stdout = None
        self.stderr = None
        self.main = None
        self.tracker = None
        self.compiled = None  # compile_cell()'s result
        self.findings = []
        self.formatter = Formatter(self)
        self.figures = Figures(self)

    def warn(self, text):
        """A note from the agent, on the user's stderr (and so in the stream record)."""
        stream = self.stderr
        if stream is not None:
            stream.write_internal(text)

    def figure_class(self):
        module = sys.modules.get("matplotlib.figure")
        return getattr(module, "Figure", None)


def _prepare_interpreter(state):
    """What `site` would do, without its cost, and the notebook's extras."""
    _add_dist_packages()
    # `-I` puts no script directory on the path; the work dir is where the user's modules are.
    sys.path.insert(0, os.getcwd())
    _install_builtins(lambda: state)
    sys.argv = [state.request["filename"]]
    _seed_matplotlib_cache()


def _add_dist_packages():
    version = "python%d.%d" % sys.version_info[:2]
    for path in ("/usr/local/lib/%s/dist-packages" % version, "/usr/lib/python3/dist-packages",
                 "/usr/lib/%s/dist-packages" % version):
        if os.path.isdir(path) and path not in sys.path:
            sys.path.append(path)


def _install_builtins(current_state):
    """exit, quit and help as `site` makes them, and display(); current_state() is the State
    that display() reports to."""
    import _sitebuiltins
    builtins.exit = _sitebuiltins.Quitter("exit", "Ctrl-D (i.e. EOF)")
    builtins.quit = _sitebuiltins.Quitter("quit", "Ctrl-D (i.e. EOF)")
    builtins.help = _sitebuiltins._Helper()
    builtins.display = _make_display(current_state)


# A font list built once by the host (runtime/font_cache.cc); without it matplotlib rebuilds
# it on every first import, ~200-300 ms of each run that plots.
MATPLOTLIB_SEED = "/opt/execbox/matplotlib"


def _seed_matplotlib_cache():
    target = os.environ.get("MPLCONFIGDIR")
    if not target or not os.path.isdir(MATPLOTLIB_SEED):
        return
    try:
        os.makedirs(target, exist_ok=True)
        for name in os.listdir(MATPLOTLIB_SEED):
            with open(os.path.join(MATPLOTLIB_SEED, name), "rb") as src:
                data = src.read()
            with open(os.path.join(target, name), "wb") as dst:
                dst.write(data)
    except OSError:
        pass  # matplotlib builds its own


def _make_display(current_state):
    def display(*objs, include=None, exclude=None, metadata=None, transient=None,
                display_id=None, raw=False, clear=False, **kwargs):
        """Show each object as a rich output (IPython's display()): one display output per
        object, in order, with text/plain and any richer representations it has."""
        state = current_state()
        for obj in objs:
            if raw:
                data, md = state.formatter.raw_bundle(obj)
            else:
                data, md = state.formatter.bundle(obj, include, exclude)
            if metadata:
                state.formatter.merge_metadata(md, metadata, "display(metadata=...)")
            state.reporter.emit({"type": "display", "data": data, "metadata": md})

    return display


def _install_streams(state):
    tracker = state.tracker

    def on_buffer_use():
        tracker.buffer_used = True

    state.stdout = OutStream("stdout", 1, state.reporter, on_buffer_use)
    state.stderr = OutStream("stderr", 2, state.reporter, on_buffer_use)
    sys.stdout = sys.__stdout__ = state.stdout
    sys.stderr = sys.__stderr__ = state.stderr


def _new_main_module(filename):
    """A fresh __main__ for the user's globals, in sys.modules so that pickle, dataclasses and
    typing find the user's classes."""
    module = type(sys)("__main__")
    module.__builtins__ = builtins
    if not (filename.startswith("<") and filename.endswith(">")):
        module.__file__ = filename  # a real file, as `python3 file.py` would have it
    sys.modules["__main__"] = module
    return module


def _register_source(filename, source):
    """Tracebacks, warnings and inspect.getsource() read the user's lines from linecache;
    mtime None keeps checkcache() from dropping the entry."""
    linecache.cache[filename] = (len(source), None, split_lines(source), filename)


# The frame that runs the user's module code. A warning with a stacklevel that reaches above
# the module (warnings.warn(..., stacklevel=2) at top level) lands here; Python reports such a
# warning as "sys:1: ..." and so does this frame: file "sys", line 1, module "sys".
_EXECUTE_SOURCE = "lambda body, last, ns: (exec(body, ns), None if last is None else eval(last, ns))[1]"
_execute = eval(compile(_EXECUTE_SOURCE, "sys", "eval"), {"__name__": "sys", "__builtins__": builtins})


def _system_exit_code(state, exc):
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF  # what the process exit status would be
    state.warn(_safe_str(code) + "\n")  # Python prints a non-int exit value
    return 1


def _print_traceback(state, exc, text):
    """Python prints an uncaught exception on stderr (through sys.excepthook if replaced)."""
    try:
        if sys.excepthook is not sys.__excepthook__:
            sys.excepthook(type(exc), exc, exc.__traceback__)
            return
        stream = sys.stderr if sys.stderr is not None else state.stderr
        stream.write(text)
        stream.flush()
    except Exception:  # noqa: BLE001 - the user's stderr or hook may be broken
        state.warn(text)


# Memory for reporting a MemoryError: released before formatting, and a line to fall back on.
_RESERVE = None
_MEMORY_ERROR_LINE = (json.dumps({"type": "error", "phase": "run", "ename": "MemoryError",
                                  "evalue": "", "traceback": ["MemoryError"]}) + "\n").encode()


def _report_run_error(state, exc):
    global _RESERVE
    filename, limit = state.request["filename"], state.request["max_repr_bytes"]
    if isinstance(exc, MemoryError):
        _RESERVE = None
        traceback.clear_frames(exc.__traceback__)  # the frames' locals hold the big objects
        import gc
        gc.collect()
    # The user may have lowered the limit, or the error may be a RecursionError: formatting
    # needs some headroom.
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 1000))
    try:
        event, text = run_error_event(exc, filename, limit)
    except MemoryError:
        state.main.__dict__.clear()  # the code failed anyway; its state is what fills memory
        import gc
        gc.collect()
        try:
            event, text = run_error_event(exc, filename, limit)
        except MemoryError:
            state.reporter.write_raw_line(_MEMORY_ERROR_LINE)
            return
    _print_traceback(state, exc, text)
    try:
        state.reporter.emit(event)
    except MemoryError:
        state.reporter.write_raw_line(_MEMORY_ERROR_LINE)


def run(state, request):
    """Runs the (checked) code; returns the exit code."""
    global _RESERVE
    _tree, body_code, last_code, show_last, compile_warnings = state.compiled
    filename = request["filename"]
    import warnings
    for w in compile_warnings:  # as Python would have shown them while compiling
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    if state.main is None:
        state.main = _new_main_module(filename)
    else:  # a warm session: the globals of its earlier executions
        sys.modules["__main__"] = state.main
    hook = PyplotHook(state.figures)
    if "matplotlib.pyplot" in sys.modules:  # preloaded (a zygote)
        patch_pyplot(sys.modules["matplotlib.pyplot"], state.figures)
    # One hook at a time: a warm session's earlier executions installed theirs.
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, PyplotHook)]
    sys.meta_path.insert(0, hook)
    state.tracker.install()
    _RESERVE = bytearray(1 << 20)

    exit_code, error, value = 0, None, None
    try:
        value = _execute(body_code, last_code, state.main.__dict__)
    except SystemExit as exc:
        exit_code = _system_exit_code(state, exc)
    except BaseException as exc:  # noqa: BLE001 - everything the code raised is reported
        error = exc
        exit_code = 130 if isinstance(exc, KeyboardInterrupt) else 1
    # The code is done: a late Ctrl-C must not interrupt the report.
    _signal.signal(_signal.SIGINT, _signal.SIG_IGN)
    if error is not None and isinstance(error, MemoryError):
        _report_run_error(state, error)  # before anything else needs memory
        error = None
    try:
        result = None
        if error is None and value is not None and show_last:
            # Before the leftover figures: a figure that is the result is not shown twice.
            data, metadata = state.formatter.bundle(value)
            result = {"type": "result", "data": data, "metadata": metadata}
        if "matplotlib.pyplot" in sys.modules:
            state.figures.flush_leftovers()
        if result is not None:
            state.reporter.emit(result)
    except MemoryError as exc:
        error, exit_code = exc, 1
    except Exception as exc:  # noqa: BLE001 - e.g. matplotlib in a state it cannot draw
        state.warn("execbox: the outputs could not be completed:\n%s" % "".join(format_exception(exc)))
    if error is not None:
        _report_run_error(state, error)
    del value, error
    return exit_code


def _run_exit_handlers():
    """What interpreter shutdown does before teardown: wait for non-daemon threads, then run
    atexit handlers (the user's and libraries', e.g. logging's flush), in that order."""
    threading = sys.modules.get("threading")
    if threading is not None:
        try:
            threading._shutdown()
        except BaseException:  # noqa: BLE001
            pass
    import atexit
    try:
        atexit._run_exitfuncs()
    except BaseException:  # noqa: BLE001
        pass


def _flush_std_streams():
    """The current sys.stdout/stderr: the code may have replaced them with buffered wrappers."""
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except Exception:  # noqa: BLE001
            pass


def _flush_files(state):
    """Flushes what teardown would have: the current sys.stdout/stderr (the code may have
    replaced them with buffered wrappers) and files the code opened for writing and never
    closed. Clearing the user's globals and collecting closes them the way teardown does; that
    costs a collection, so only when such a file exists."""
    _flush_std_streams()
    tracker = state.tracker
    if tracker is None or not tracker.needs_cleanup():
        return
    try:
        if state.main is not None:
            state.main.__dict__.clear()
        import gc
        gc.collect()
        for f in list(tracker.files):
            if not f.closed:
                f.flush()
    except Exception:  # noqa: BLE001
        pass


def finish(state, exit_code, after_report=None):
    if state.stdout is not None:
        _run_exit_handlers()
        _flush_files(state)
    state.reporter.flush_streams(final=True)
    state.reporter.emit({"type": "exit", "code": exit_code})
    if after_report is not None:
        after_report()
    os._exit(exit_code)


def check_and_compile(state):
    """The checks both modes share. Returns None if the code may run, else the exit code."""
    request = state.request
    source, filename = request["code"], request["filename"]
    source_lines = split_lines(source)
    try:
        compiled = compile_cell(source, filename)
    except CompileFailure as failure:
        event = syntax_error_event(failure.syntax_error, filename, source_lines)
        if request["mode"] == "run":
            state.warn("\n".join(event["traceback"]) + "\n")
        state.reporter.emit(event)
        return 1
    tree, compile_warnings = compiled[0], compiled[4]
    findings = lint(request["rules"], source, tree)
    for w in compile_warnings:
        findings.append({"rule": w.category.__name__, "severity": "warning",
                         "line": w.lineno or 1, "column": 1, "message": _safe_str(w.message),
                         "suggestion": ""})
    findings.sort(key=lambda f: (f["line"], f["column"]))
    state.compiled, state.findings = compiled, findings
    refusals = [f for f in findings if f["severity"] == "error"]
    if findings:
        state.reporter.emit({"type": "findings", "findings": [public_finding(f) for f in findings]})
    if refusals:
        event = policy_error_event(request["policy_name"], refusals, filename, source_lines)
        if request["mode"] == "run":
            state.warn("\n".join(event["traceback"]) + "\n")
        state.reporter.emit(event)
        return 1
    return None


def internal_error_event(exc):
    lines = traceback.format_exception(type(exc), exc, exc.__traceback__)
    return {"type": "error", "phase": "internal", "ename": type(exc).__name__,
            "evalue": _safe_str(exc), "traceback": "".join(lines).rstrip("\n").split("\n")}


def main():
    reporter = Reporter(take_report_fd(), DEFAULTS["max_stream_event_bytes"])
    os.register_at_fork(after_in_child=reporter.after_fork_in_child)
    state = None
    try:
        request = load_request(sys.argv)
        reporter.set_stream_budget(request["max_stream_event_bytes"])
        state = State(request, reporter)
        _register_source(request["filename"], request["code"])
        if request["mode"] == "run":
            state.tracker = OpenTracker()
            _install_streams(state)
            _prepare_interpreter(state)
        exit_code = check_and_compile(state)
        if exit_code is None:
            exit_code = 0 if request["mode"] == "check" else run(state, request)
    except BaseException as exc:  # noqa: BLE001 - the agent's own failure, reported as such
        reporter.emit(internal_error_event(exc))
        try:
            os.write(2, ("execbox agent: internal error: %s\n" % _safe_str(exc)).encode("utf-8", "replace"))
        except OSError:
            pass
        exit_code = INTERNAL_ERROR_EXIT
    if state is None:
        reporter.emit({"type": "exit", "code": exit_code})
        os._exit(exit_code)
    finish(state, exit_code)



# ---------------------------------------------------------------------------------------------
# Warm mode (see the header): warm_up() once in the zygote, serve() in each forked child.

# What this file imports lazily while it runs (and serve() needs): imported once in the zygote,
# so that no child pays for them.
_LAZY_IMPORTS = ("__future__", "_sitebuiltins", "_socket", "atexit", "fcntl", "fnmatch", "gc",
                 "re", "resource", "warnings", "weakref")


def _describe(exc):
    return "%s: %s" % (type(exc).__name__, _safe_str(exc))


def warm_up(preload, plot=True, freeze=True):
    """Prepares the zygote's interpreter so that each forked child starts warm: the library
    path, the matplotlib font cache, the modules in preload (a list of names; one that fails
    to import is skipped), matplotlib on Agg with one plot drawn (fonts and the renderer
    loaded) when plot is true and matplotlib was loaded, and the agent's own lazy imports.
    Starts no thread. Ends with gc.freeze() (unless freeze is false, for measuring), so that
    children do not copy the zygote's objects when the collector walks them. Returns a list of "name: error" strings, one per failure
    (a thread found still running after the imports is reported as "threads: ...")."""
    import importlib
    failures = []
    _add_dist_packages()
    _seed_matplotlib_cache()
    for name in preload:
        try:
            importlib.import_module(name)
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - a broken package is skipped
            failures.append("%s: %s" % (name, _describe(exc)))
    matplotlib = sys.modules.get("matplotlib")
    if matplotlib is not None:
        try:
            matplotlib.use("Agg")
            if plot:
                _warm_plot(importlib.import_module("matplotlib.pyplot"))
        except Exception as exc:  # noqa: BLE001
            failures.append("matplotlib.pyplot: %s" % _describe(exc))
    for name in _LAZY_IMPORTS:
        try:
            importlib.import_module(name)
        except Exception as exc:  # noqa: BLE001
            failures.append("%s: %s" % (name, _describe(exc)))
    try:
        _warm_agent()
    except Exception as exc:  # noqa: BLE001
        failures.append("execbox_agent: %s" % _describe(exc))
    threads = _thread_count()
    if threads > 1:
        failures.append("threads: %d threads are running after the warm-up; namespaces "
                        "cannot be entered and fork() keeps only the caller" % threads)
    import gc
    gc.collect()
    if freeze:
        gc.freeze()
    return failures


def _warm_plot(pyplot):
    """One small line plot with text, rendered to an in-memory PNG and closed."""
    fig = pyplot.figure(figsize=(2, 1.5), dpi=72)
    ax = fig.add_subplot()
    ax.plot([0, 1, 2], [0, 1, 0], label="warm-up")
    ax.set_title("warm-up")
    ax.legend()
    fig.savefig(io.BytesIO(), format="png")
    pyplot.close(fig)


def _warm_agent():
    """Runs the agent's own paths once -- compile, the policy check, a traceback -- so that the
    modules they import lazily (traceback imports ast for its carets) are loaded."""
    filename = "<execbox-warm-up>"
    source = "x = 0\n1 / x\n"
    _register_source(filename, source)
    try:
        tree, body_code, last_code, _show, _warnings = compile_cell(source, filename)
        lint(compile_policy({"rules": [{"id": "warm", "imports": ["socket"], "calls": ["os.*"]}]}),
             source, tree)
        try:
            _execute(body_code, last_code, {"__builtins__": builtins, "__name__": "__warm_up__"})
        except ZeroDivisionError as exc:
            run_error_event(exc, filename, DEFAULTS["max_repr_bytes"])
    finally:
        linecache.cache.pop(filename, None)


def _thread_count():
    try:
        return len(os.listdir("/proc/self/task"))  # native threads too (OpenBLAS, numexpr)
    except OSError:
        threading = sys.modules.get("threading")
        return threading.active_count() if threading is not None else 1


# The channel: each request is an 8-byte header (the body's length, unsigned little-endian)
# carrying CHANNEL_FDS fds by SCM_RIGHTS, then the body.
HEADER_BYTES = 8
CHANNEL_FDS = 4  # stdin (a read end), stdout, stderr, report (write ends)
MAX_BODY_BYTES = 1 << 30


class ChannelError(Exception):
    """The host broke the protocol: the channel cannot be trusted any more."""

    def __init__(self, message, fds=()):
        super().__init__(message)
        self.fds = list(fds)


class _Channel:
    def __init__(self, fd):
        import _socket
        self._net = _socket
        # Family and type given: no getsockopt() to ask for them.
        self._sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM, 0, fd)
        # Room for a few more fds than expected, so that a wrong count is reported as such.
        self._ancillary = _socket.CMSG_SPACE(4 * (CHANNEL_FDS + 12))

    def send_done(self):
        try:
            self._sock.sendall(b"D")
        except OSError:
            pass  # the host is gone: the next receive() sees EOF and ends the child

    def receive(self):
        """(fds, body) of the next request, or None when the host closed the channel between
        requests. Raises ChannelError (with the fds received so far) for a broken request."""
        net, header, fds = self._net, b"", []
        while len(header) < HEADER_BYTES:
            try:
                data, ancillary, flags, _ = self._sock.recvmsg(HEADER_BYTES - len(header), self._ancillary,
                                                               net.MSG_CMSG_CLOEXEC)
            except ConnectionResetError:
                # The host closed its end with our "D" unread: the same as EOF.
                data, ancillary, flags = b"", [], 0
            for level, kind, cdata in ancillary:
                if level == net.SOL_SOCKET and kind == net.SCM_RIGHTS:
                    whole = len(cdata) - len(cdata) % 4
                    fds.extend(int.from_bytes(cdata[i:i + 4], sys.byteorder, signed=True)
                               for i in range(0, whole, 4))
            if flags & net.MSG_CTRUNC:
                raise ChannelError("more file descriptors than expected came with a request "
                                   "header (the control data was truncated)", fds)
            if not data:
                if not header and not fds:
                    return None
                raise ChannelError("the channel closed inside a request header (%d of %d bytes)"
                                   % (len(header), HEADER_BYTES), fds)
            header += data
        if len(fds) != CHANNEL_FDS:
            raise ChannelError("a request header carries %d file descriptors, not %d"
                               % (len(fds), CHANNEL_FDS), fds)
        length = int.from_bytes(header, "little")
        if length > MAX_BODY_BYTES:
            raise ChannelError("a request body of %d bytes is over the limit of %d bytes"
                               % (length, MAX_BODY_BYTES), fds)
        body = bytearray(length)
        view, got = memoryview(body), 0
        while got < length:
            n = self._sock.recv_into(view[got:])
            if n == 0:
                raise ChannelError("the channel closed after %d of %d body bytes" % (got, length), fds)
            got += n
        return fds, body


def _channel_failure(message, fds):
    """The host broke the protocol: says so wherever it can be read, and leaves."""
    text = ("execbox agent: %s\n" % message).encode("utf-8", "replace")
    targets = [2]
    if len(fds) == CHANNEL_FDS:  # the request's own stderr and report
        targets.insert(0, fds[2])
        events = [{"type": "error", "phase": "internal", "ename": "ChannelError", "evalue": message,
                   "traceback": []}, {"type": "exit", "code": INTERNAL_ERROR_EXIT}]
        try:
            _write_all(fds[3], "".join(_ENCODER.encode(e) + "\n" for e in events).encode("utf-8", "replace"))
        except OSError:
            pass
    for fd in targets:
        try:
            _write_all(fd, text)
        except OSError:
            pass
    os._exit(INTERNAL_ERROR_EXIT)


def _fd_above_stdio(fd):
    """fd itself if above 2, else a close-on-exec copy above 2 (fd is closed)."""
    if fd > 2:
        return fd
    import fcntl
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    os.close(fd)
    return moved


def _null_fds():
    """(read fd, write fd) that stand in for stdin and stdout/stderr between executions: EOF
    and a sink. /dev/null, or where the jail has none, pipes whose other end is closed."""
    try:
        fd = _fd_above_stdio(os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC))
        return fd, fd
    except OSError:
        read_end, write_end = os.pipe()
        os.close(write_end)
        other_read, other_write = os.pipe()
        os.close(other_read)
        return _fd_above_stdio(read_end), _fd_above_stdio(other_write)


def _new_stdin():
    """sys.stdin on fd 0 as python3 makes it, with nothing buffered from an earlier execution."""
    raw = io.FileIO(0, "r", closefd=False)
    raw.name = "<stdin>"
    stream = io.TextIOWrapper(io.BufferedReader(raw), encoding="utf-8", errors="surrogateescape")
    stream.mode = "r"
    return stream


def _reseed_randomness():
    """Every child of a zygote starts with the zygote's PRNG states: the loaded generators are
    reseeded from os.urandom (a module imported later seeds itself)."""
    random = sys.modules.get("random")
    if random is not None:
        random.seed()
    numpy_random = getattr(sys.modules.get("numpy"), "random", None)
    if numpy_random is not None:
        numpy_random.seed()  # the legacy global RandomState behind np.random.*


def _parse_inputs(request):
    """The request's "inputs", checked: [(name, path parts, base64 text)]. The host validated
    the names; they are checked again: relative, no '..', no NUL."""
    inputs = request.get("inputs") or []
    if not isinstance(inputs, list):
        raise RequestError("inputs must be a list")
    checked = []
    for item in inputs:
        if not (isinstance(item, dict) and isinstance(item.get("name"), str)
                and isinstance(item.get("content_base64"), str)):
            raise RequestError("each input must be an object with a string name and content_base64")
        name = item["name"]
        parts = [part for part in name.split("/") if part not in ("", ".")]
        if name.startswith("/") or "\0" in name or not parts or ".." in parts:
            raise RequestError("input file name %r is not a relative path inside the work dir" % name)
        checked.append((name, parts, item["content_base64"]))
    return checked


def _write_inputs(work_dir, inputs):
    """Creates each input file under the work dir (an fd: the code may have changed directory),
    with its parent directories, following no symbolic link (a session's code may have planted
    one) and replacing no file."""
    for name, parts, content in inputs:
        try:
            data = binascii.a2b_base64(content)
        except (binascii.Error, ValueError) as exc:
            raise RequestError("input %r is not valid base64: %s" % (name, exc)) from None
        directory = work_dir
        try:
            for part in parts[:-1]:
                try:
                    os.mkdir(part, 0o755, dir_fd=directory)
                except FileExistsError:
                    pass
                child = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                                dir_fd=directory)
                if directory != work_dir:
                    os.close(directory)
                directory = child
            fd = os.open(parts[-1], os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                         0o644, dir_fd=directory)
            try:
                _write_all(fd, data)
            finally:
                os.close(fd)
        except OSError as exc:
            raise RequestError("input %r could not be written: %s" % (name, exc.strerror or exc)) from None
        finally:
            if directory != work_dir:
                os.close(directory)


class _Server:
    """A forked child's loop: one request and exit, or (a session) one request after another
    with the user's globals kept."""

    def __init__(self, channel_fd, session):
        _signal.signal(_signal.SIGPIPE, _signal.SIG_IGN)  # as python3 does
        _signal.signal(_signal.SIGINT, _signal.SIG_IGN)  # while idle: a late Ctrl-C is for no one
        channel_fd = _fd_above_stdio(channel_fd)  # fds 0-2 are replaced per execution
        os.set_inheritable(channel_fd, False)
        self.null_in, self.null_out = _null_fds()
        for fd in (0, 1, 2):  # open, so that received fds never land on them
            try:
                os.fstat(fd)
            except OSError:
                os.dup2(self.null_in if fd == 0 else self.null_out, fd)
        self.channel = _Channel(channel_fd)
        self.session = session
        self.work_dir = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        self.reporter = Reporter(None, DEFAULTS["max_stream_event_bytes"])
        os.register_at_fork(after_in_child=self.reporter.after_fork_in_child)
        self.executions = 0
        self.reseeded = False
        self.state = None  # the current execution's: display() reports to it
        # A session's, kept across executions:
        self.tracker = None
        self.streams = None
        self.main = None
        self.path_entry = None  # the work dir, first on sys.path
        self.sources = {}  # filename -> source of each execution

    def prewarm(self):
        """Before any request: what every execution's first steps do, on a throwaway cell, so
        that the copy-on-write faults of a fresh fork (slow on some VMs) and the reseeding
        happen here, ahead of demand, not in the request. Nothing of it stays: its globals,
        its report (to /dev/null) and its linecache entry are dropped."""
        _reseed_randomness()
        self.reseeded = True
        reporter = Reporter(os.dup(self.null_out), DEFAULTS["max_stream_event_bytes"])
        try:
            raw = json.loads(json.dumps({"mode": "run", "code": "x = [1]\nx", "filename": "<execbox-prewarm>",
                                         "policy": None}))
            request = parse_request(raw)
            state = State(request, reporter)
            _tree, body_code, last_code, _show, _warnings = compile_cell(request["code"], request["filename"])
            scratch = {"__builtins__": builtins}
            value = _execute(body_code, last_code, scratch)
            data, metadata = state.formatter.bundle(value)
            reporter.emit({"type": "result", "data": data, "metadata": metadata})
            reporter.emit({"type": "exit", "code": 0})
        except Exception:  # noqa: BLE001 - only an optimisation
            pass
        finally:
            linecache.cache.pop("<execbox-prewarm>", None)
            reporter.close()

    def loop(self):
        self.prewarm()
        while True:
            try:
                received = self.channel.receive()
            except ChannelError as exc:
                _channel_failure(str(exc), exc.fds)
            if received is None:
                os._exit(0)  # the host is done with this child
            self.handle(*received)

    def handle(self, fds, body):
        self.executions += 1
        for fd, target in zip(fds, (0, 1, 2)):
            os.dup2(fd, target)  # inheritable, as python3's stdio is
        report_fd = _move_fd_high(fds[3])
        for fd in fds[:3]:
            os.close(fd)
        reporter = self.reporter
        reporter.restart(report_fd, DEFAULTS["max_stream_event_bytes"])
        state = None
        try:
            _signal.signal(_signal.SIGPIPE, _signal.SIG_IGN)  # the code may have changed them
            _signal.signal(_signal.SIGINT, _signal.default_int_handler)
            sys.stdin = sys.__stdin__ = _new_stdin()
            if self.executions == 1 and not self.reseeded:
                _reseed_randomness()
            try:
                raw = json.loads(body.decode("utf-8", "replace"))
            except (ValueError, RecursionError) as exc:
                raise ChannelError("the request body is not JSON: %s" % exc) from None
            del body
            request = parse_request(raw)
            inputs = _parse_inputs(raw)
            del raw
            if self.session:
                self._name_execution(request)
            reporter.set_stream_budget(request["max_stream_event_bytes"])
            state = self.state = State(request, reporter)
            _write_inputs(self.work_dir, inputs)
            _register_source(request["filename"], request["code"])
            if request["mode"] == "run":
                self._prepare_interpreter(state)
            exit_code = check_and_compile(state)
            if exit_code is None:
                exit_code = 0 if request["mode"] == "check" else run(state, request)
            if state.main is not None:
                self.main = state.main
        except ChannelError as exc:  # a body that is not JSON: the framing may be off too
            reporter.emit(internal_error_event(exc))
            try:
                os.write(2, ("execbox agent: %s\n" % exc).encode("utf-8", "replace"))
            except OSError:
                pass
            reporter.emit({"type": "exit", "code": INTERNAL_ERROR_EXIT})
            os._exit(INTERNAL_ERROR_EXIT)
        except BaseException as exc:  # noqa: BLE001 - the agent's own failure, reported as such
            reporter.emit(internal_error_event(exc))
            message = "execbox agent: internal error: %s\n" % _safe_str(exc)
            try:
                os.write(2, message.encode("utf-8", "replace"))
            except OSError:
                pass
            exit_code = INTERNAL_ERROR_EXIT
        if not self.session:
            # The report is complete: "D" lets the host answer now, while this process (pid 1
            # of its namespace, whose exit takes every other process with it) winds down.
            if state is None:
                reporter.emit({"type": "exit", "code": exit_code})
                self.channel.send_done()
                os._exit(exit_code)
            finish(state, exit_code, self.channel.send_done)
        self._end_execution(state, exit_code)

    def _name_execution(self, request):
        """Each execution of a session keeps its source in linecache under its own name, so
        that a traceback through a function of an earlier execution shows that execution's
        lines. An execution runs under the request's filename unless an earlier one of the
        session used it; then the execution's 1-based number is added: "<cell>" -> "<cell-3>",
        "job.py" -> "job-3.py"."""
        for name, source in self.sources.items():  # the code may have cleared linecache
            if name not in linecache.cache:
                _register_source(name, source)
        filename = name = request["filename"]
        number = self.executions
        while name in self.sources:
            if filename.startswith("<") and filename.endswith(">") and len(filename) > 1:
                name = "%s-%d>" % (filename[:-1], number)
            else:
                root, ext = os.path.splitext(filename)
                name = "%s-%d%s" % (root, number, ext)
            number += 1
        request["filename"] = name
        self.sources[name] = request["code"]

    def _prepare_interpreter(self, state):
        """_prepare_interpreter() for a warm child: what lasts once per process, what belongs
        to the execution each time."""
        first = self.tracker is None
        if first or not self.session:
            self.tracker = OpenTracker()
        state.tracker = self.tracker
        streams = self.streams
        if streams is None or streams[0].closed or streams[1].closed:
            _install_streams(state)
            self.streams = (state.stdout, state.stderr)
        else:  # the same objects, which the code (a logging handler, ...) may hold
            state.stdout, state.stderr = streams
            sys.stdout = sys.__stdout__ = state.stdout
            sys.stderr = sys.__stderr__ = state.stderr
        if first:
            _add_dist_packages()
            self.path_entry = os.getcwd()
            sys.path.insert(0, self.path_entry)
            _install_builtins(lambda: self.state)
            if "matplotlib" not in sys.modules:
                _seed_matplotlib_cache()  # for an import by the code (/tmp may be fresh)
        else:
            finder = sys.path_importer_cache.get(self.path_entry)
            if finder is not None:
                finder.invalidate_caches()  # modules the earlier executions wrote
        sys.argv = [state.request["filename"]]
        state.main = self.main

    def _end_execution(self, state, exit_code):
        """The end of a session's execution: unlike finish(), no threads joined and no atexit
        handlers (they belong to the session); the output flushed, the exit event sent, and the
        execution's fds closed so that the host sees EOF on each."""
        _signal.signal(_signal.SIGINT, _signal.SIG_IGN)
        _flush_std_streams()
        tracker = state.tracker if state is not None else None
        if tracker is not None:
            for f in list(tracker.files):  # for the host, which collects files now
                try:
                    if not f.closed:
                        f.flush()
                except Exception:  # noqa: BLE001
                    pass
        self.reporter.flush_streams(final=True)
        self.reporter.emit({"type": "exit", "code": exit_code})
        self.reporter.close()
        os.dup2(self.null_in, 0)
        os.dup2(self.null_out, 1)
        os.dup2(self.null_out, 2)
        # Tells the host the execution is over (EOF on the pipes alone cannot: a process the
        # code forked may hold them, and a dying session closes them too).
        self.channel.send_done()


def serve(channel_fd, session):
    """Runs requests received on channel_fd (see the header) in this forked, locked-down
    child: one, or with session true one after another with the globals kept. Never returns."""
    try:
        _Server(channel_fd, bool(session)).loop()
    except BaseException as exc:  # noqa: BLE001 - the agent itself failed
        try:
            os.write(2, ("execbox agent: serve failed: %s\n" % _describe(exc)).encode("utf-8", "replace"))
        except OSError:
            pass
    os._exit(INTERNAL_ERROR_EXIT)


if __name__ == "__main__":
    main()
