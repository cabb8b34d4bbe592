# A forked child of a zygote (warm.py): its loop over the requests of the warm channel
# (channel.py), one request and exit, or a session's requests one after another.
# The fds become 0, 1, 2 and the report fd (moved to >= 512, close-on-exec); the inputs are
# created in the work dir (parents made, no symlink followed, no file replaced, absolute
# names and '..' refused); the first execution of a child reseeds `random` and numpy's global
# RandomState (every child starts with the zygote's state); then the request runs as a cold
# one does, with SIGINT raising KeyboardInterrupt and SIGPIPE ignored, as in python3.
#   - One-shot (session false): the channel is closed as soon as the request has arrived,
#     before any code runs; the child ends like the cold agent (threads joined, atexit handlers
#     run, exit event, os._exit(code)). The report's end, once the host sees the process
#     exiting, lets it answer before the process has wound down.
#   - Session (session true): the globals (one __main__ module per context, see below), imports,
#     open files and threads persist from one execution to the next; display(), print() and
#     pyplot.show() report to the current execution. An execution ends without joining threads or
#     running atexit handlers: output flushed, exit event sent, report fd closed, /dev/null put on
#     fds 0-2 (the host sees EOF on every pipe of the execution), one byte b"D" written on the
#     channel (the host's sign that the execution is over), and the next header awaited. A
#     SystemExit ends the execution with its code, not the session. Figures left open are shown and
#     closed. Each execution's source stays in linecache under its own name, so a traceback through
#     a function of an earlier execution shows that execution's line: an execution runs under the
#     request's filename unless an earlier execution of the session used that name; then its 1-based
#     number is added ("<cell>" -> "<cell-3>", "job.py" -> "job-3.py"), and its tracebacks, warnings
#     and events use that name.
# A session's contexts: each request names one ("" when it names none). The default context ""
# runs in this process, in its __main__ module (made empty on first use); it is the one a
# snapshot copies and a restore fills. Any other runs in a process of its own, forked from this
# one at the context's first execution, to which its requests are relayed (contexts.py).
# "drop_context" forgets one: the default one's globals, another's process (the next execution
# in it starts empty). A request's
# "env" and "cwd" hold for that execution only; "command" runs a shell command and "listdir" lists
# a directory (sandbox_ops.py). A one-shot child refuses these three modes, as the cold agent does.
# EOF on the channel where a header would start: os._exit(0); a broken request: see
# channel.py.
import _signal
import json
import linecache
import os
import sys

from .cell import internal_error_event, new_main_module, register_source
from .channel import Channel, ChannelError, channel_failure
from .contexts import ContextProcesses, relay
from .errors import RequestError
from .execution import (State, add_dist_packages, check_and_compile, finish, install_builtins, reseed_randomness,
                        run)
from .figures import seed_matplotlib_cache
from .inputs import parse_inputs, write_inputs
from .report import INTERNAL_ERROR_EXIT, Reporter, move_fd_high
from .request import DEFAULTS, SESSION_MODES, parse_request
from .sandbox_ops import in_place, run_command, run_list_dir
from .snapshot import PREWARM_NAME, SnapshotError
from .snapshot import discard as discard_snapshot
from .snapshot import restore as restore_snapshot
from .snapshot import take as take_snapshot
from .streams import OpenTracker, fd_above_stdio, flush_std_streams, install_streams, new_stdin, null_fds
from .text import safe_str

_PREWARM_NAME = "<execbox-prewarm>"


class ChildServer:
    """A forked child's loop: one request and exit, or (a session) one request after another
    with the user's globals kept."""

    def __init__(self, channel_fd, session, layer=-1):
        _signal.signal(_signal.SIGPIPE, _signal.SIG_IGN)  # as python3 does
        _signal.signal(_signal.SIGINT, _signal.SIG_IGN)  # while idle: a late Ctrl-C is for no one
        channel_fd = fd_above_stdio(channel_fd)  # fds 0-2 are replaced per execution
        os.set_inheritable(channel_fd, False)
        self.null_in, self.null_out = null_fds()
        for fd in (0, 1, 2):  # open, so that received fds never land on them
            try:
                os.fstat(fd)
            except OSError:
                os.dup2(self.null_in if fd == 0 else self.null_out, fd)
        self.channel = Channel(channel_fd)
        self.session = session
        self.work_dir = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        # A session's root is its own (an overlay): its upper layer, read-only, goes into its
        # snapshots, and a restore writes that part through the root.
        self.layer = layer if session and layer >= 0 else None
        self.root = os.open("/", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC) if self.layer is not None else None
        self.reporter = Reporter(None, DEFAULTS["max_stream_event_bytes"])
        os.register_at_fork(after_in_child=self.reporter.after_fork_in_child)
        self.executions = 0
        self.reseeded = False
        self.state = None  # the current execution's: display() reports to it
        # A session's, kept across executions:
        self.tracker = None
        self.streams = None
        self.main = None  # the __main__ module of this process's context
        self.own_context = ""  # this process's context: "" in the kernel, else a context's process
        self.context_processes = ContextProcesses()  # the kernel's: the other contexts' processes
        self.initial_env = dict(os.environ)  # what a context's new process starts with
        self.path_entry = None  # the work dir, first on sys.path
        self.sources = {}  # filename -> source of each execution
        self.snapshot_made = False  # a snapshot file waits in the work dir for the host

    def prewarm(self):
        """Before any request: a throwaway execution through the steps a request takes (stdin,
        parsing, the process's first preparation, the checks, run() with its hooks, result and
        exit events), so that the copy-on-write faults of a fresh fork (~15 us each on some
        VMs) and the reseeding happen here, ahead of demand, not in the request. What stays is
        what the first execution would make anyway, the same for every request: the open()
        tracker, sys.stdout/stderr on this child's reporter, sys.path and the builtins. Its
        globals, __main__, linecache entry and report (to /dev/null) are dropped."""
        reseed_randomness()
        self.reseeded = True
        main = sys.modules.get("__main__")
        self.reporter.restart(os.dup(self.null_out), DEFAULTS["max_stream_event_bytes"])
        try:
            new_stdin()
            raw = json.loads(json.dumps({"mode": "run", "code": "x = [1]\nx", "filename": _PREWARM_NAME,
                                         "policy": {"name": "permissive", "rules": []}, "inputs": []}))
            request = parse_request(raw)
            parse_inputs(raw)
            state = State(request, self.reporter)
            register_source(request["filename"], request["code"])
            self._prepare_interpreter(state)
            if check_and_compile(state) is None:
                run(state, request)
            flush_std_streams()
            self.reporter.flush_streams(final=True)
            self.reporter.emit({"type": "exit", "code": 0})
        except Exception:  # noqa: BLE001 - only an optimisation
            pass
        finally:
            linecache.cache.pop(_PREWARM_NAME, None)
            if main is not None:
                sys.modules["__main__"] = main
            self.reporter.close()
        if self.session:
            self._prewarm_state_copy()

    def _prewarm_state_copy(self):
        """A session's child, before any request: a snapshot of a throwaway namespace (a
        function, a class, plain values) and its restore, so that the copy-on-write faults of
        the pickling and tar paths happen here rather than in a fork, an undo or a restore (it
        costs an idle session ~1.7 MB of private memory). The host may already be writing a file
        into the work dir (a prepared child is handed out while this runs): the warm-up uses a
        name of its own, takes no files and restores none, and leaves nothing behind."""
        main = sys.modules.get("__main__")
        try:
            scratch = new_main_module("<execbox-prewarm>")
            exec("def f(x):\n    return x\nclass C:\n    pass\nv = [1, 2.0, 'x', {'k': (1,)}, C()]\n",
                 scratch.__dict__)
            take_snapshot(scratch, self.work_dir, {}, name=PREWARM_NAME, files=False)
            restore_snapshot(self.work_dir, new_main_module("<execbox-prewarm>"), name=PREWARM_NAME)
        except Exception:  # noqa: BLE001 - only an optimisation
            pass
        finally:
            discard_snapshot(self.work_dir, PREWARM_NAME)
            if main is not None:
                sys.modules["__main__"] = main

    def loop(self, prewarm=True):
        if prewarm:  # else the first execution reseeds, and pays its own faults
            self.prewarm()
        while True:
            try:
                received = self.channel.receive()
            except ChannelError as exc:
                channel_failure(str(exc), exc.fds)
            if received is None:
                os._exit(0)  # the host is done with this child
            if not self.session:  # before any code runs: nothing it holds reaches the host
                self.channel.close()
            self.handle(*received)

    def handle(self, fds, body):
        self.executions += 1
        for fd, target in zip(fds, (0, 1, 2)):
            os.dup2(fd, target)  # inheritable, as python3's stdio is
        report_fd = move_fd_high(fds[3])
        for fd in fds[:3]:
            os.close(fd)
        reporter = self.reporter
        reporter.restart(report_fd, DEFAULTS["max_stream_event_bytes"])
        state = None
        try:
            _signal.signal(_signal.SIGPIPE, _signal.SIG_IGN)  # the code may have changed them
            _signal.signal(_signal.SIGINT, _signal.default_int_handler)
            sys.stdin = sys.__stdin__ = new_stdin()
            if self.executions == 1 and not self.reseeded:
                reseed_randomness()
            try:
                raw = json.loads(body.decode("utf-8", "replace"))
            except (ValueError, RecursionError) as exc:
                raise ChannelError("the request body is not JSON: %s" % exc) from None
            request = parse_request(raw)
            inputs = parse_inputs(raw)
            del raw
            if self.session and request["mode"] == "run" and request["context"] != self.own_context:
                return relay(self, request["context"], body, report_fd, self._become_context)
            del body
            if self.snapshot_made:  # read by the host by now
                discard_snapshot(self.work_dir)
                self.snapshot_made = False
            mode = request["mode"]
            if mode in SESSION_MODES and not self.session:
                raise RequestError("mode %r is for a session only" % mode)
            reporter.set_stream_budget(request["max_stream_event_bytes"])
            if mode in ("snapshot", "restore"):
                state = self.state = State(request, reporter)
                exit_code = self._copy_state(state, mode)
            elif mode == "drop_context":
                state = self.state = State(request, reporter)
                exit_code = self._drop_context(state)
            elif mode in ("command", "listdir"):
                state = self.state = State(request, reporter)
                write_inputs(self.work_dir, inputs)
                if mode == "command":
                    # fd 0 is this execution's stdin: the request's stdin, then its end.
                    operation = lambda: run_command(state, 0)  # noqa: E731
                else:
                    operation = lambda: run_list_dir(state)  # noqa: E731
                exit_code = in_place(state, self.work_dir, operation, True)
            else:
                if self.session:
                    self._name_execution(request)
                state = self.state = State(request, reporter)
                write_inputs(self.work_dir, inputs)
                register_source(request["filename"], request["code"])
                if mode == "run":
                    self._prepare_interpreter(state)
                exit_code = check_and_compile(state)
                if exit_code is None:
                    if mode == "check":
                        exit_code = 0
                    else:
                        exit_code = in_place(state, self.work_dir, lambda: run(state, request), False)
                if state.main is not None:  # made by run() on a context's first use
                    self._set_namespace(request["context"], state.main)
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
            message = "execbox agent: internal error: %s\n" % safe_str(exc)
            try:
                os.write(2, message.encode("utf-8", "replace"))
            except OSError:
                pass
            exit_code = INTERNAL_ERROR_EXIT
        if not self.session:
            # The report closed, then os._exit: the host may answer once it sees this process
            # (pid 1 of its namespace) exiting, while the exit tears it down.
            if state is None:
                reporter.emit({"type": "exit", "code": exit_code})
                reporter.close()
                os._exit(exit_code)
            finish(state, exit_code, reporter.close)
        self._end_execution(state, exit_code)

    def _copy_state(self, state, mode):
        """A snapshot of this session, or a restore into it (snapshot.py): the summary as the
        result's application/json, a failure as an error event. Sessions only."""
        try:
            if not self.session:
                raise SnapshotError("snapshots are made of sessions only")
            self._prepare_interpreter(state)
            if mode == "snapshot":
                if self.main is not None:  # the last execution may have been another context's
                    sys.modules["__main__"] = self.main
                self.snapshot_made = True
                summary = take_snapshot(self.main, self.work_dir, self.sources, layer=self.layer)
            else:
                if self.main is None:
                    self.main = new_main_module("<cell>")
                sys.modules["__main__"] = self.main
                summary = restore_snapshot(self.work_dir, self.main, root=self.root)
                for name, source in summary.pop("sources").items():
                    if name not in self.sources:
                        self.sources[name] = source
                        register_source(name, source)
        except SnapshotError as exc:
            text = safe_str(exc)
            state.reporter.emit({"type": "error", "phase": "run", "ename": "SnapshotError", "evalue": text,
                                 "traceback": ["SnapshotError: " + text]})
            return 1
        state.reporter.emit({"type": "result", "metadata": {},
                             "data": {"text/plain": "%s: %d names, %d files" % (mode, len(summary["names"]),
                                                                                summary["files"]),
                                      "application/json": summary}})
        return 0

    def _namespace(self, context):
        """The context's __main__ module, or None before its first execution."""
        return self.main if context == self.own_context else None

    def _set_namespace(self, context, module):
        if context == self.own_context:
            self.main = module

    def _drop_context(self, state):
        """Forgets a context: this process's own namespace (its next execution starts empty;
        what else holds its objects, a thread, keeps them), or another context's process."""
        context = state.request["context"]
        if context != self.own_context:
            existed = self.context_processes.drop(context)
        else:
            module, self.main = self.main, None
            if module is not None and sys.modules.get("__main__") is module:
                sys.modules["__main__"] = type(sys)("__main__")
            existed = module is not None
            del module
            import gc
            gc.collect()  # its objects go now (cycles through functions' globals), files closed
        state.reporter.emit({"type": "result", "metadata": {},
                             "data": {"text/plain": "dropped",
                                      "application/json": {"context": context, "dropped": existed}}})
        return 0

    def _become_context(self, context, channel_fd, report_fd):
        """In a context's new process, just forked from the kernel (contexts.py): the kernel's
        execution, channel and other contexts are not its own; its globals, environment, working
        directory, open-file tracking and randomness start afresh; then it serves its context's
        requests as the kernel serves its own. Never returns."""
        os.close(report_fd)  # the host's EOF on the report must not wait for this process
        self.channel.close()
        self.context_processes.in_new_process()
        self.channel = Channel(channel_fd)
        self.own_context = context
        self.main = self.state = self.layer = self.root = None  # snapshots are the kernel's
        self.sources, self.executions, self.snapshot_made = {}, 0, False
        self.streams = None  # new ones: another thread may have held the old ones' locks
        if self.tracker is not None:
            self.tracker.files.clear()  # the kernel's files: flushed there, not here too
        os.environ.clear()
        os.environ.update(self.initial_env)
        os.fchdir(self.work_dir)
        reseed_randomness()
        self.reseeded = True
        self.loop(prewarm=False)

    def _name_execution(self, request):
        """Each execution of a session keeps its source in linecache under its own name, so
        that a traceback through a function of an earlier execution shows that execution's
        lines. An execution runs under the request's filename unless an earlier one of the
        session used it; then the execution's 1-based number is added: "<cell>" -> "<cell-3>",
        "job.py" -> "job-3.py"."""
        for name, source in self.sources.items():  # the code may have cleared linecache
            if name not in linecache.cache:
                register_source(name, source)
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
        """execution.prepare_interpreter() for a warm child: what lasts once per process, what
        belongs to the execution each time."""
        first = self.tracker is None
        if first:  # one per process: a one-shot child's single execution, or a whole session
            self.tracker = OpenTracker()
        state.tracker = self.tracker
        streams = self.streams
        if streams is None or streams[0].closed or streams[1].closed:
            install_streams(state)
            self.streams = (state.stdout, state.stderr)
        else:  # the same objects, which the code (a logging handler, ...) may hold
            state.stdout, state.stderr = streams
            sys.stdout = sys.__stdout__ = state.stdout
            sys.stderr = sys.__stderr__ = state.stderr
        if first:
            add_dist_packages()
            self.path_entry = os.getcwd()
            sys.path.insert(0, self.path_entry)
            install_builtins(lambda: self.state)
            if "matplotlib" not in sys.modules:
                seed_matplotlib_cache()  # for an import by the code (/tmp may be fresh)
        else:
            finder = sys.path_importer_cache.get(self.path_entry)
            if finder is not None:
                finder.invalidate_caches()  # modules the earlier executions wrote
        sys.argv = [state.request["filename"]]
        state.main = self._namespace(state.request["context"])

    def _end_execution(self, state, exit_code):
        """The end of a session's execution: unlike finish(), no threads joined and no atexit
        handlers (they belong to the session); the output flushed, the exit event sent, and the
        execution's fds closed so that the host sees EOF on each."""
        _signal.signal(_signal.SIGINT, _signal.SIG_IGN)
        flush_std_streams()
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
        self.hand_back()

    def hand_back(self):
        """The execution's fds given up (the report closed, /dev/null on fds 0-2: the host sees
        EOF on each) and b"D" sent, which tells the host the execution is over (EOF on the pipes
        alone cannot: a process the code forked may hold them, and a dying session closes them
        too)."""
        self.reporter.close()
        os.dup2(self.null_in, 0)
        os.dup2(self.null_out, 1)
        os.dup2(self.null_out, 2)
        self.channel.send_done()
