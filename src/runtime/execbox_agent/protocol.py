# The agent's wire formats: the request it runs, the report it writes, and the warm channel
# that carries requests to a forked child. The C++ side (runtime/python_program.cc, the
# engine's report reader, jail/warm_child.cc) speaks exactly this.
#
# Invocation (see python_program.cc and __main__.py):
#     python3 -I -S -B -u -X utf8 /opt/execbox/execbox_agent/__main__.pyc /opt/execbox/request.json
# UTF-8 mode (-X utf8; the zygote's embedded interpreter too): file names, open() and the
# preferred encoding are UTF-8 whatever the locale. The working directory is the work dir, fd 0
# is the given stdin (a pipe, EOF at its end), fd 1/2 are the live stdout/stderr, fd 3 is the
# report channel.
#
# Request (argv[1], JSON):
#     {"mode": "run" | "check" | "snapshot" | "restore" (the last two: a warm session's, see
#      snapshot.py; they ignore code and answer with one result event) | "command" | "listdir" |
#      "drop_context" (a warm session's too, see sandbox_ops.py), "code": str,
#      "filename": "<cell>", "policy": profile | null,
#      "figures": {"max_width_px", "max_height_px", "max_bytes", "dpi"},
#      "max_repr_bytes": int, "max_stream_event_bytes": int,
#      optional, a session's only: "context": str (the namespace: "" the default one),
#      "env": {str: str} and "cwd": str (for this execution only; run, command, listdir),
#      "depth": int >= 1 (listdir)}
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
#
# The warm channel (warm.py): a connected AF_UNIX SOCK_STREAM socket between the zygote's
# host and one forked child; per request:
#     header: 8 bytes, the body's length as unsigned 64-bit little-endian, with exactly 4 fds
#             attached by SCM_RIGHTS: [stdin read end, stdout, stderr, report write ends]
#     body:   that many bytes of UTF-8 JSON, the request above plus optional
#             "inputs": [{"name": relative path, "content_base64": str}]
# and from the child, one byte b"D" when an execution's report is complete. EOF where a header
# would start ends the child. A broken header (wrong fd count, truncated control data, EOF
# inside it or the body) or a body that is not JSON: a message on stderr (the request's too,
# and an internal error and exit event on its report when its fds arrived) and exit 70. A JSON
# request that is invalid (bad mode, policy or inputs) is an internal error of that execution
# only (exit code 70; a session goes on).
import _thread
import codecs
import json
import os
import sys

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

def _json_encode_errors(exc):
    """For the report: lone surrogates in any string become U+FFFD, so every line is UTF-8."""
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    # Bytes: the UTF-8 encoder only accepts ASCII text from an error handler.
    return "\ufffd".encode() * (exc.end - exc.start), exc.end


codecs.register_error("execbox.json", _json_encode_errors)


def utf8_len(text):
    return len(text.encode("utf-8", "surrogatepass"))


def cap_text(text, limit):
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


def safe_str(obj):
    try:
        return str(obj)
    except BaseException:  # noqa: BLE001 - a user __str__ may raise anything
        return "<unprintable %s object>" % type(obj).__name__


def describe(exc):
    return "%s: %s" % (type(exc).__name__, safe_str(exc))


def write_all(fd, data):
    written = os.write(fd, data)
    if written < len(data):  # a pipe may take less (e.g. after a signal)
        view = memoryview(data)[written:]
        while view:
            view = view[os.write(fd, view):]


# ---------------------------------------------------------------------------------------------
# The report channel.

_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))
_json_string = json.encoder.encode_basestring  # a str as a JSON string literal, non-ASCII kept


def event_line(event):
    """One report line: the event as compact JSON, UTF-8, newline-terminated. Raises TypeError
    or ValueError for a value that is not plain JSON."""
    return _line(_ENCODER.encode(event))


def _line(text):
    return text.encode("utf-8", "execbox.json") + b"\n"


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
        self._stream_budget -= utf8_len(text)
        if text:
            # Hand-built: the common event, one per printed line.
            line = '{"type":"stream","name":"%s","text":%s}' % (name, _json_string(text))
            self._write_line_locked(_line(line))
        if self._streams_truncated:
            self._write_locked({"type": "stream_truncated"})

    def _write_locked(self, event):
        try:
            line = event_line(event)
        except (TypeError, ValueError, RecursionError) as exc:
            # Only an agent bug gets here: user-provided values are checked before.
            line = event_line({"type": "error", "phase": "internal", "ename": type(exc).__name__,
                               "evalue": "unserializable %s event: %s" % (event.get("type"), exc),
                               "traceback": []})
        self._write_line_locked(line)

    def _write_line_locked(self, line):
        if self._fd is None:  # closed by another thread since the caller looked
            return
        self._writing = True
        try:
            write_all(self._fd, line)
        except OSError:
            self._fd = None  # the host stopped listening; the code keeps running
        finally:
            self._writing = False

    def write_raw_line(self, line):
        """Last resort when memory is exhausted: a pre-encoded line."""
        if self.active():
            try:
                write_all(self._fd, line)
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
    return move_fd_high(REPORT_FD)


def move_fd_high(fd):
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
        raise RequestError("usage: execbox_agent/__main__.py REQUEST.json")
    with open(argv[1], "rb") as f:
        request = json.loads(f.read().decode("utf-8", "replace"))
    return parse_request(request)


MODES = ("run", "check", "snapshot", "restore", "command", "listdir", "drop_context")
SESSION_MODES = ("command", "listdir", "drop_context")  # not a one-shot child's, nor the cold agent's


def _string_field(request, key, nul_ok=False):
    value = request.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise RequestError("%s must be a string" % key)
    if "\0" in value and not nul_ok:  # a path
        raise RequestError("%s must not contain NUL characters" % key)
    return value


def _env_field(request):
    """The "env" object: names and values that os.environ can hold."""
    env = request.get("env")
    if env is None:
        return {}
    if not isinstance(env, dict):
        raise RequestError("env must be an object of strings")
    for name, value in env.items():
        if not isinstance(value, str):
            raise RequestError("env[%r] must be a string" % name)
        if not name or "=" in name or "\0" in name:
            raise RequestError("env name %r is not a valid environment variable name" % name)
        if "\0" in value:
            raise RequestError("env[%r] must not contain NUL characters" % name)
    return dict(env)


def _packages_field(request):
    """The "packages" list: names for wheelhouse.install, which checks each one."""
    packages = request.get("packages")
    if packages is None:
        return []
    if not isinstance(packages, list) or not all(isinstance(p, str) for p in packages):
        raise RequestError("packages must be a list of strings")
    return packages


def parse_request(request):
    """The checked request, with defaults, from the decoded JSON value."""
    if not isinstance(request, dict):
        raise RequestError("the request must be a JSON object")
    mode = request.get("mode", "run")
    if mode not in MODES:
        raise RequestError("mode must be one of %s" % ", ".join(repr(m) for m in MODES))
    code = request.get("code")
    if not isinstance(code, str):
        raise RequestError("code must be a string")
    filename = request.get("filename") or "<cell>"
    if not isinstance(filename, str):
        raise RequestError("filename must be a string")
    filename = filename.replace("\0", "\ufffd")
    policy = request.get("policy")
    if policy is not None:
        from .lint import compile_policy  # here: lint needs RequestError from this module
        rules = compile_policy(policy)
    else:
        rules = []
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
        "context": _string_field(request, "context", nul_ok=True),  # only a name
        "env": _env_field(request),
        "cwd": _string_field(request, "cwd"),
        "depth": _int_field(request, "depth", 1),
        "packages": _packages_field(request),
        "package_set": _string_field(request, "package_set"),  # the host's: wheelhouse.use_set
    }


def parse_inputs(request):
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


# ---------------------------------------------------------------------------------------------
# The warm channel: each request is an 8-byte header (the body's length, unsigned
# little-endian) carrying CHANNEL_FDS fds by SCM_RIGHTS, then the body.

HEADER_BYTES = 8
CHANNEL_FDS = 4  # stdin (a read end), stdout, stderr, report (write ends)
MAX_BODY_BYTES = 1 << 30
DONE = b"D"  # the child's one byte per execution: its report is complete


class ChannelError(Exception):
    """The host broke the protocol: the channel cannot be trusted any more."""

    def __init__(self, message, fds=()):
        super().__init__(message)
        self.fds = list(fds)


class Channel:
    def __init__(self, fd):
        import _socket
        self._net = _socket
        # Family and type given: no getsockopt() to ask for them.
        self._sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM, 0, fd)
        # Room for a few more fds than expected, so that a wrong count is reported as such.
        self._ancillary = _socket.CMSG_SPACE(4 * (CHANNEL_FDS + 12))

    def send_done(self):
        try:
            self._sock.sendall(DONE)
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


def channel_failure(message, fds):
    """The host broke the protocol: says so wherever it can be read, and leaves."""
    text = ("execbox agent: %s\n" % message).encode("utf-8", "replace")
    targets = [2]
    if len(fds) == CHANNEL_FDS:  # the request's own stderr and report
        targets.insert(0, fds[2])
        events = [{"type": "error", "phase": "internal", "ename": "ChannelError", "evalue": message,
                   "traceback": []}, {"type": "exit", "code": INTERNAL_ERROR_EXIT}]
        try:
            write_all(fds[3], b"".join(event_line(e) for e in events))
        except OSError:
            pass
    for fd in targets:
        try:
            write_all(fd, text)
        except OSError:
            pass
    os._exit(INTERNAL_ERROR_EXIT)
