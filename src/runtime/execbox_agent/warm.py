# Warm mode. A zygote (C++ embedding libpython, runtime/worker_main.cc) imports this module as
# execbox_agent.warm and calls warm_up(preload) once: dist-packages on sys.path, the matplotlib
# font cache seeded, the preload modules imported (failures skipped and returned as
# "name: error" strings), matplotlib on Agg with one plot drawn, the agent's lazy imports done,
# no thread left running, gc.collect() + gc.freeze().
# It then forks one child per execution; the C++ side locks the child down, writes one ready
# byte on the channel and calls serve(channel_fd, session), which never returns and writes
# nothing on the channel but the b"D" bytes below. Each child's loop is child.py; the channel's
# framing is channel.py.
import builtins
import linecache
import os
import sys

from .cell import compile_cell, execute, register_source, run_error_event
from . import guard, netwatch
from .child import ChildServer
from .execution import add_dist_packages
from .figures import seed_matplotlib_cache, warm_plot
from .lint import compile_policy, lint
from .report import INTERNAL_ERROR_EXIT
from .request import DEFAULTS
from .text import describe

# What the agent imports lazily while it runs (and serve() needs): imported once in the zygote,
# so that no child pays for them.
_LAZY_IMPORTS = ("__future__", "_sitebuiltins", "_socket", "atexit", "fcntl", "fnmatch", "gc",
                 "re", "resource", "traceback", "warnings", "weakref",
                 # a session's snapshot (snapshot.py): ~15 ms to import in each child otherwise
                 "cloudpickle", "tarfile",
                 # a session's commands and listings (sandbox_ops.py)
                 "grp", "pwd", "subprocess")



def warm_up(preload, plot=True, freeze=True):
    """Prepares the zygote's interpreter so that each forked child starts warm: the library
    path, the matplotlib font cache, the modules in preload (a list of names; one that fails
    to import is skipped), matplotlib on Agg with one plot drawn (fonts and the renderer
    loaded) when plot is true and matplotlib was loaded, and the agent's own lazy imports.
    Starts no thread. Ends with gc.freeze() (unless freeze is false, for measuring), so that
    children do not copy the zygote's objects when the collector walks them. Returns a list
    of "name: error" strings, one per failure (a thread found still running after the imports
    is reported as "threads: ...")."""
    import importlib
    failures = []
    add_dist_packages()
    seed_matplotlib_cache()
    for name in preload:
        try:
            importlib.import_module(name)
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - a broken package is skipped
            failures.append("%s: %s" % (name, describe(exc)))
    matplotlib = sys.modules.get("matplotlib")
    if matplotlib is not None:
        try:
            matplotlib.use("Agg")
            if plot:
                warm_plot(importlib.import_module("matplotlib.pyplot"))
        except Exception as exc:  # noqa: BLE001
            failures.append("matplotlib.pyplot: %s" % describe(exc))
    for name in _LAZY_IMPORTS:
        try:
            importlib.import_module(name)
        except Exception as exc:  # noqa: BLE001
            failures.append("%s: %s" % (name, describe(exc)))
    try:
        _warm_agent()
    except Exception as exc:  # noqa: BLE001
        failures.append("execbox_agent: %s" % describe(exc))
    threads = _thread_count()
    if threads > 1:
        failures.append("threads: %d threads are running after the warm-up; namespaces "
                        "cannot be entered and fork() keeps only the caller" % threads)
    import gc
    gc.collect()
    if freeze:
        gc.freeze()
    return failures


def _warm_agent():
    """Runs the agent's own paths once -- compile, the policy check, a traceback -- so that the
    modules they import lazily (traceback imports ast for its carets) are loaded."""
    filename = "<execbox-warm-up>"
    source = "x = 0\n1 / x\n"
    register_source(filename, source)
    try:
        tree, body_code, last_code, _show, _warnings = compile_cell(source, filename)
        lint(compile_policy({"rules": [{"id": "warm", "imports": ["socket"], "calls": ["os.*"]}]}),
             source, tree)
        try:
            execute(body_code, last_code, {"__builtins__": builtins, "__name__": "__warm_up__"})
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


def serve(channel_fd, session, layer=-1, egress_port=0, prewarm=True):
    """Runs requests received on channel_fd (see the header) in this forked, locked-down
    child: one, or with session true one after another with the globals kept. `layer`: a
    session's root's upper layer, a read-only descriptor its snapshots copy (else -1).
    `egress_port`: a session's network relay (its init listens there), else 0. `prewarm`:
    run ChildServer.prewarm() first (a child prepared ahead of demand; not one a request
    waits for). Never returns."""
    if egress_port:
        _set_proxies(egress_port)
        netwatch.stop()
    else:
        netwatch.install(local_loopback=bool(session))
    guard.local_loopback[0] = bool(session)
    try:
        ChildServer(channel_fd, bool(session), layer).loop(bool(prewarm))
    except BaseException as exc:  # noqa: BLE001 - the agent itself failed
        try:
            os.write(2, ("execbox agent: serve failed: %s\n" % describe(exc)).encode("utf-8", "replace"))
        except OSError:
            pass
    os._exit(INTERNAL_ERROR_EXIT)


def _set_proxies(port):
    """The proxies' addresses in os.environ, and pip no longer kept offline (the process's C
    environment already has them, set before the init forked, so the session's commands get
    them too; os.environ is the zygote's copy from before)."""
    http = "http://127.0.0.1:%d" % port
    socks = "socks5h://127.0.0.1:%d" % port
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
        os.environ[name] = http
    for name in ("ALL_PROXY", "all_proxy"):
        os.environ[name] = socks
    for name in ("NO_PROXY", "no_proxy"):
        os.environ[name] = "localhost,127.0.0.1"
    os.environ.pop("PIP_NO_INDEX", None)  # pip may reach an index the policy allows
