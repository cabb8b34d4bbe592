# A session's code contexts other than the default one, each in an interpreter process of its
# own (E2B's contexts are separate kernels): its own globals, modules, environment, working
# directory and threads, so that what one context does to its interpreter (monkeypatching a
# module, os.environ, os.chdir, a crash) is not another's. The session's kernel (child.py)
# makes a context's process by fork() at the context's first execution, so it starts as a copy
# of the kernel's interpreter then (the modules it had loaded stay loaded; globals, environment,
# cwd and open-file tracking start afresh: child.py's become_context), and relays each of the
# context's requests to it over a socket pair in the warm channel's framing (channel.py: the
# header with the request's 4 fds, the body) and waits for its b"D". Its report is the
# execution's; if the process dies first, the kernel ends the report saying so, and the next
# execution of that context makes a new process. Its processes are the kernel's children, so
# the kernel's end (a timeout, a kill) takes them with it: the session's init kills what the
# kernel leaves (jail/session_init.cc).
import _signal
import _socket
import os
import sys

from .channel import DONE, HEADER_BYTES


def _status_text(status):
    if os.WIFEXITED(status):
        return "exited with status %d" % os.WEXITSTATUS(status), os.WEXITSTATUS(status)
    if os.WIFSIGNALED(status):
        import signal  # only here: the enum module behind it costs every start otherwise
        number = os.WTERMSIG(status)
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = "signal %d" % number
        return "was killed (%s)" % name, 128 + number
    return "ended", 1


class ContextProcesses:
    def __init__(self):
        self._peers = {}  # context name -> (pid, socket)

    def __contains__(self, context):
        return context in self._peers

    def in_new_process(self):
        """In a context's new process: the other contexts' sockets are not its to hold."""
        for _, sock in self._peers.values():
            sock.close()
        self._peers = {}

    def run(self, context, body, fds, become):
        """Relays one request (its body and fds) to the context's process, made first when it
        has none (become(socket fd) runs in the new process and never returns), and waits for
        the end of its execution. None when the process answered; else (exit code, error
        event) for the kernel to end the report with: the process died, or could not be made."""
        peer = self._live(context)
        if peer is None:
            try:
                peer = self._start(context, become)
            except OSError as exc:
                return 1, _error("the context's Python process could not start: %s" % exc.strerror)
        pid, sock = peer
        header = len(body).to_bytes(HEADER_BYTES, "little")
        rights = b"".join(fd.to_bytes(4, sys.byteorder, signed=True) for fd in fds)
        try:
            sock.sendmsg([header], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, rights)])
            sock.sendall(body)
            done = sock.recv(1)
        except OSError:
            done = b""
        if done == DONE:
            return None
        how, code = _status_text(self._end(context))
        return code, _error("the context's Python process %s during the execution; its state is "
                            "gone, and its next execution starts a new one" % how)

    def drop(self, context):
        """Ends the context's process, if it has one; whether it had."""
        if context not in self._peers:
            return False
        self._end(context)
        return True

    def _live(self, context):
        peer = self._peers.get(context)
        if peer is None:
            return None
        try:
            ended, _ = os.waitpid(peer[0], os.WNOHANG)
        except ChildProcessError:  # reaped by the code (os.wait())
            ended = peer[0]
        if ended == 0:
            return peer
        peer[1].close()
        del self._peers[context]
        return None

    def _start(self, context, become):
        ours, theirs = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_STREAM)
        pid = os.fork()
        if pid == 0:
            try:
                ours.close()
                become(theirs.detach())
            finally:
                os._exit(70)
        theirs.close()
        self._peers[context] = (pid, ours)
        return self._peers[context]

    def _end(self, context):
        """Ends the context's process (SIGKILL: a process that let go of its socket may run on)
        and reaps it; its wait status (0 when the code reaped it itself)."""
        pid, sock = self._peers.pop(context)
        sock.close()
        try:
            os.kill(pid, _signal.SIGKILL)  # a process that has exited is a zombie: not signalled
        except OSError:
            pass
        try:
            return os.waitpid(pid, 0)[1]
        except ChildProcessError:
            return 0


def relay(server, context, body, report_fd, become):
    """A run in a context other than the server's own (child.py's ChildServer, the kernel): in
    that context's process, which writes the execution's output and report; the kernel ends the
    execution for the host once that one has, or says that it died. `become(context, channel
    fd, report_fd)` turns a new process into the context's."""
    _signal.signal(_signal.SIGINT, _signal.SIG_IGN)  # as while idle: the code is not here
    failed = server.context_processes.run(context, body, (0, 1, 2, report_fd),
                                          lambda fd: become(context, fd, report_fd))
    del body
    if failed is not None:
        code, event = failed
        server.reporter.emit(event)
        server.reporter.emit({"type": "exit", "code": code})
    server.hand_back()


def _error(text):
    return {"type": "error", "phase": "run", "ename": "KernelEnded", "evalue": text,
            "traceback": ["KernelEnded: " + text]}
