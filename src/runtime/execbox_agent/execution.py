# One execution, cold or warm: the interpreter prepared as `site` and a notebook would have it,
# the checks (syntax, policy), the run with its result, displays and error, and the end.
# The end of a run does what interpreter shutdown would -- join non-daemon threads, run atexit
# handlers (the user's and libraries'), flush sys.stdout/stderr and files left open for
# writing -- then sends the exit event and leaves with os._exit(), skipping teardown (about
# 250 ms with numpy, pandas and matplotlib loaded).
import _signal
import builtins
import os
import sys

from . import guard
from .analyzers import analyze, analyzers_for
from .cell import (CompileFailure, compile_cell, execute, format_exception, new_main_module, run_error_event,
                   syntax_error_event)
from .display import Formatter, make_display
from .figures import Figures, PyplotHook, patch_pyplot, seed_matplotlib_cache
from .lint import lint, policy_error_event, public_finding
from .report import event_line
from .streams import flush_std_streams
from .text import safe_str, split_lines
from .wheelhouse import PackageInstallError
from .wheelhouse import activate as activate_packages
from .wheelhouse import install as install_packages
from .wheelhouse import use_set as use_package_set

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


def prepare_interpreter(state):
    """What `site` would do, without its cost, and the notebook's extras."""
    add_dist_packages()
    # `-I` puts no script directory on the path; the work dir is where the user's modules are.
    sys.path.insert(0, os.getcwd())
    install_builtins(lambda: state)
    sys.argv = [state.request["filename"]]
    seed_matplotlib_cache()


def add_dist_packages():
    version = "python%d.%d" % sys.version_info[:2]
    for path in ("/usr/local/lib/%s/dist-packages" % version, "/usr/lib/python3/dist-packages",
                 "/usr/lib/%s/dist-packages" % version):
        if os.path.isdir(path) and path not in sys.path:
            sys.path.append(path)


def install_builtins(current_state):
    """exit, quit and help as `site` makes them, and display(); current_state() is the State
    that display() reports to."""
    import _sitebuiltins
    builtins.exit = _sitebuiltins.Quitter("exit", "Ctrl-D (i.e. EOF)")
    builtins.quit = _sitebuiltins.Quitter("quit", "Ctrl-D (i.e. EOF)")
    builtins.help = _sitebuiltins._Helper()
    builtins.display = make_display(current_state)


def _system_exit_code(state, exc):
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF  # what the process exit status would be
    state.warn(safe_str(code) + "\n")  # Python prints a non-int exit value
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
# A MemoryError comes from address space refused (RLIMIT_DATA, or an allocation past what the
# kernel will map); a cgroup's memory limit kills instead. So the reserve is address space:
# bytes(n) is calloc'd, which maps it without touching a page; a bytearray(n) would zero-fill
# its 256 pages, a page fault each in every execution.
_RESERVE = None
_MEMORY_ERROR_LINE = event_line({"type": "error", "phase": "run", "ename": "MemoryError", "evalue": "",
                                 "traceback": ["MemoryError"]})


def _clear_frames(tb):
    """traceback.clear_frames(), without importing traceback where memory is exhausted."""
    while tb is not None:
        try:
            tb.tb_frame.clear()
        except RuntimeError:
            pass  # a frame still executing
        tb = tb.tb_next


def _report_run_error(state, exc):
    global _RESERVE
    filename, limit = state.request["filename"], state.request["max_repr_bytes"]
    if isinstance(exc, MemoryError):
        _RESERVE = None
        _clear_frames(exc.__traceback__)  # the frames' locals hold the big objects
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
        state.main = new_main_module(filename)
    else:  # a warm session: the globals of its earlier executions
        sys.modules["__main__"] = state.main
    activate_packages()  # what an earlier execution or a shell's pip installed
    if request["packages"]:
        try:
            installed = use_package_set(request["package_set"]) if request.get("package_set") else None
            if installed is None:
                installed = install_packages(request["packages"])
        except PackageInstallError as exc:
            _report_run_error(state, exc)
            return 1
        state.reporter.emit({"type": "installed", "packages": installed})
    hook = PyplotHook(state.figures)
    if "matplotlib.pyplot" in sys.modules:  # preloaded (a zygote)
        patch_pyplot(sys.modules["matplotlib.pyplot"], state.figures)
    # One hook at a time: a warm session's earlier executions installed theirs.
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, PyplotHook)]
    sys.meta_path.insert(0, hook)
    state.tracker.install()
    _RESERVE = bytes(1 << 20)
    guard.install(request["guard"])  # last: what the agent did before is not the code's

    exit_code, error, value = 0, None, None
    try:
        value = execute(body_code, last_code, state.main.__dict__)
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


def _flush_files(state):
    """Flushes what teardown would have: the current sys.stdout/stderr (the code may have
    replaced them with buffered wrappers) and files the code opened for writing and never
    closed. Clearing the user's globals and collecting closes them the way teardown does; that
    costs a collection, so only when such a file exists."""
    flush_std_streams()
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
    if request["analyzers"] or request["lint_block"]:
        findings.extend(analyze(source, analyzers_for(request["analyzers"], request["lint_block"]),
                                request["lint_block"]))
    for w in compile_warnings:
        findings.append({"rule": w.category.__name__, "severity": "warning",
                         "line": w.lineno or 1, "column": 1, "message": safe_str(w.message),
                         "suggestion": ""})
    findings.sort(key=lambda f: (f["line"], f["column"]))
    state.compiled, state.findings = compiled, findings
    refusals = [f for f in findings if f["severity"] == "error"]
    if findings:
        state.reporter.emit({"type": "findings", "findings": [public_finding(f) for f in findings]})
    if refusals:
        blocked = all("tool" in f for f in refusals)  # only lint_block's
        event = policy_error_event("lint.block" if blocked else request["policy_name"], refusals, filename,
                                   source_lines)
        if request["mode"] == "run":
            state.warn("\n".join(event["traceback"]) + "\n")
        state.reporter.emit(event)
        return 1
    return None


def reseed_randomness():
    """Every child of a zygote starts with the zygote's PRNG states: the loaded generators are
    reseeded from os.urandom (a module imported later seeds itself)."""
    random = sys.modules.get("random")
    if random is not None:
        random.seed()
    numpy_random = getattr(sys.modules.get("numpy"), "random", None)
    if numpy_random is not None:
        numpy_random.seed()  # the legacy global RandomState behind np.random.*
