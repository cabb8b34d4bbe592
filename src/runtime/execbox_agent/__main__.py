# The cold agent: one execution in a fresh interpreter, run as a script (request.py has the
# invocation and the request, report.py the report):
#     python3 -I -S -B -u -X utf8 /opt/execbox/execbox_agent/__main__.pyc /opt/execbox/request.json
import os
import sys

# -I puts no script directory on sys.path: the package's parent is there for these imports only.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from execbox_agent.cell import internal_error_event, register_source  # noqa: E402
from execbox_agent.execution import State, check_and_compile, finish, prepare_interpreter, run  # noqa: E402
from execbox_agent.errors import RequestError  # noqa: E402
from execbox_agent import netwatch  # noqa: E402
from execbox_agent.report import INTERNAL_ERROR_EXIT, Reporter, take_report_fd  # noqa: E402
from execbox_agent.request import DEFAULTS, SESSION_MODES, load_request  # noqa: E402
from execbox_agent.streams import OpenTracker, install_streams  # noqa: E402
from execbox_agent.text import safe_str  # noqa: E402

del sys.path[0]


def main():
    reporter = Reporter(take_report_fd(), DEFAULTS["max_stream_event_bytes"])
    os.register_at_fork(after_in_child=reporter.after_fork_in_child)
    state = None
    try:
        request = load_request(sys.argv)
        if request["mode"] in SESSION_MODES:
            raise RequestError("mode %r is for a session only" % request["mode"])
        reporter.set_stream_budget(request["max_stream_event_bytes"])
        if request["egress_port"] and request["egress_fd"]:
            from execbox_agent import egress
            egress.start(request["egress_fd"], request["egress_port"])
        else:
            netwatch.install()
        state = State(request, reporter)
        register_source(request["filename"], request["code"])
        if request["mode"] == "run":
            state.tracker = OpenTracker()
            install_streams(state)
            prepare_interpreter(state)
        exit_code = check_and_compile(state)
        if exit_code is None:
            exit_code = 0 if request["mode"] == "check" else run(state, request)
    except BaseException as exc:  # noqa: BLE001 - the agent's own failure, reported as such
        reporter.emit(internal_error_event(exc))
        try:
            os.write(2, ("execbox agent: internal error: %s\n" % safe_str(exc)).encode("utf-8", "replace"))
        except OSError:
            pass
        exit_code = INTERNAL_ERROR_EXIT
    if state is None:
        reporter.emit({"type": "exit", "code": exit_code})
        os._exit(exit_code)
    finish(state, exit_code)


if __name__ == "__main__":
    main()
