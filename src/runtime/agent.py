# execbox agent: runs inside the jail, stdlib only. It compiles and runs the user's code as
# __main__ and writes a JSON report (the error, if any) to fd 3 for the host to read.
# Frames of this file never appear in the user's traceback.
import json
import linecache
import os
import sys
import traceback

AGENT_FILE = __file__


def _user_frames(tb):
    """Skips the agent's own frames at the top of a traceback."""
    while tb is not None and tb.tb_frame.f_code.co_filename == AGENT_FILE:
        tb = tb.tb_next
    return tb


def _error(exc, tb):
    lines = traceback.format_exception(type(exc), exc, tb)
    text = "".join(lines)
    return {
        "ename": type(exc).__name__,
        "evalue": str(exc),
        "traceback": text.rstrip("\n").split("\n"),
    }


def _report(payload):
    try:
        with os.fdopen(3, "w", encoding="utf-8", errors="replace") as out:
            json.dump(payload, out)
    except OSError:
        pass


def _prepare_interpreter():
    """What `site` would do, without its cost: the package dirs, and exit()/quit()."""
    version = "python%d.%d" % sys.version_info[:2]
    for path in ("/usr/local/lib/%s/dist-packages" % version, "/usr/lib/python3/dist-packages",
                 "/usr/lib/%s/dist-packages" % version):
        if os.path.isdir(path) and path not in sys.path:
            sys.path.append(path)
    import builtins

    def _exit(code=None):
        raise SystemExit(code)

    builtins.exit = builtins.quit = _exit


def main():
    _prepare_interpreter()
    code_path, display_name = sys.argv[1], sys.argv[2]
    with open(code_path, "rb") as f:
        source = f.read()
    text = source.decode("utf-8", errors="replace")
    # Tracebacks show the user's source lines even for inline code.
    linecache.cache[display_name] = (len(text), None, text.splitlines(True), display_name)
    sys.argv = [display_name]
    sys.path[0] = os.getcwd()
    try:
        code = compile(source, display_name, "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as exc:
        exc.__traceback__ = None
        err = _error(exc, None)
        sys.stderr.write("\n".join(err["traceback"]) + "\n")
        _report({"error": err, "phase": "compile"})
        return 1
    main_module = type(sys)("__main__")
    main_module.__file__ = display_name
    main_module.__builtins__ = __builtins__
    sys.modules["__main__"] = main_module
    try:
        exec(code, main_module.__dict__)
    except SystemExit as exc:
        if exc.code is None or exc.code == 0:
            code_value = 0
        elif isinstance(exc.code, int):
            code_value = exc.code & 0xFF
        else:
            sys.stderr.write(str(exc.code) + "\n")
            code_value = 1
        _report({"exit": code_value})
        return code_value
    except BaseException as exc:  # noqa: BLE001 - everything the user raised is reported
        tb = _user_frames(exc.__traceback__)
        err = _error(exc, tb)
        sys.stderr.write("\n".join(err["traceback"]) + "\n")
        _report({"error": err, "phase": "run"})
        return 1
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except Exception:  # noqa: BLE001
            pass
    _report({})
    return 0


if __name__ == "__main__":
    os._exit(main())
