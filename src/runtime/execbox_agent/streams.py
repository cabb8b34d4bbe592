# stdout / stderr: every byte goes straight to fd 1/2 (live output for the host) and into the
# ordered stream record (report.Reporter); stdin for a warm execution; and the files the code
# opened for writing, which must not lose buffered data to os._exit.
import builtins
import codecs
import io
import os
import sys

from .report import write_all


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


codecs.register_error("execbox.stream", _stream_encode_errors)


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
            write_all(self._fd, data)
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


def install_streams(state):
    """sys.stdout and sys.stderr for the execution in state, reporting to its reporter."""
    tracker = state.tracker

    def on_buffer_use():
        tracker.buffer_used = True

    state.stdout = OutStream("stdout", 1, state.reporter, on_buffer_use)
    state.stderr = OutStream("stderr", 2, state.reporter, on_buffer_use)
    sys.stdout = sys.__stdout__ = state.stdout
    sys.stderr = sys.__stderr__ = state.stderr


def new_stdin():
    """sys.stdin on fd 0 as python3 makes it, with nothing buffered from an earlier execution."""
    raw = io.FileIO(0, "r", closefd=False)
    raw.name = "<stdin>"
    stream = io.TextIOWrapper(io.BufferedReader(raw), encoding="utf-8", errors="surrogateescape")
    stream.mode = "r"
    return stream


def flush_std_streams():
    """The current sys.stdout/stderr: the code may have replaced them with buffered wrappers."""
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except Exception:  # noqa: BLE001
            pass


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


def fd_above_stdio(fd):
    """fd itself if above 2, else a close-on-exec copy above 2 (fd is closed)."""
    if fd > 2:
        return fd
    import fcntl
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    os.close(fd)
    return moved


def null_fds():
    """(read fd, write fd) that stand in for stdin and stdout/stderr between executions: EOF
    and a sink. /dev/null, or where the jail has none, pipes whose other end is closed."""
    try:
        fd = fd_above_stdio(os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC))
        return fd, fd
    except OSError:
        read_end, write_end = os.pipe()
        os.close(write_end)
        other_read, other_write = os.pipe()
        os.close(other_read)
        return fd_above_stdio(read_end), fd_above_stdio(other_write)
