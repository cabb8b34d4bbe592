# The report the agent writes on fd 3 (the C++ side reads it: engine/report.cc).
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
#     {"type": "network_attempts", "attempts": [{host, port}], "omitted": int}
#                                      (just before exit; without network only: netwatch.py)
#     {"type": "guard", "mode": "audit", "refused": [{event, detail}], "omitted": int}
#                                      (just before exit, once the guard is installed: guard.py)
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
import _thread
import codecs
import os

from . import guard, netwatch, wire_json
from .text import utf8_len

REPORT_FD = 3
INTERNAL_ERROR_EXIT = 70  # EX_SOFTWARE: the agent itself failed, not the user's code
# Stream text is merged into one event until a line ends or this much is pending.
STREAM_CHUNK_CHARS = 8192


# Strings that cannot be encoded must never crash the report.
def _json_encode_errors(exc):
    """For the report: lone surrogates in any string become U+FFFD, so every line is UTF-8."""
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    # Bytes: the UTF-8 encoder only accepts ASCII text from an error handler.
    return "\ufffd".encode() * (exc.end - exc.start), exc.end


codecs.register_error("execbox.json", _json_encode_errors)


def write_all(fd, data):
    written = os.write(fd, data)
    if written < len(data):  # a pipe may take less (e.g. after a signal)
        view = memoryview(data)[written:]
        while view:
            view = view[os.write(fd, view):]



_json_string = wire_json.string


def event_line(event):
    """One report line: the event as compact JSON, UTF-8, newline-terminated. Raises TypeError
    or ValueError for a value that is not plain JSON."""
    return _line(wire_json.dumps(event))


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
        # Before the exit event, what the code tried to reach without network (netwatch.py),
        # and what the guard refused (guard.py).
        ending = event.get("type") == "exit"
        attempts = netwatch.take_event() if ending else None
        guarded = guard.take_event() if ending else None
        with self._lock:
            self._flush_stream_locked()
            for before in (attempts, guarded):
                if before is not None:
                    self._write_locked(before)
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
