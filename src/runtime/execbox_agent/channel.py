# The warm channel between the zygote's host (jail/zygote_loop.cc) and one forked child (warm.py).
#
# The warm channel (warm.py): a connected AF_UNIX SOCK_STREAM socket between the zygote's
# host and one forked child; per request:
#     header: 8 bytes, the body's length as unsigned 64-bit little-endian, with exactly 4 fds
#             attached by SCM_RIGHTS: [stdin read end, stdout, stderr, report write ends]
#     body:   that many bytes of UTF-8 JSON, the request above plus optional
#             "inputs": [{"name": relative path, "content_base64": str}]
# and from a session's child, one byte b"D" when an execution's report is complete (a session's
# kernel talks to its init, which relays the requests and passes on nothing but that byte). A
# one-shot child closes the channel once its request has arrived, before any code runs: its
# report's end and its exit end the execution. EOF where a header
# would start ends the child. A broken header (wrong fd count, truncated control data, EOF
# inside it or the body) or a body that is not JSON: a message on stderr (the request's too,
# and an internal error and exit event on its report when its fds arrived) and exit 70. A JSON
# request that is invalid (bad mode, policy or inputs) is an internal error of that execution
import os
import sys

from .report import INTERNAL_ERROR_EXIT, event_line, write_all

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

    def close(self):
        """Lets go of the channel: a one-shot child does so before the code runs, so the code
        holds nothing that reaches the host."""
        self._sock.close()

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
