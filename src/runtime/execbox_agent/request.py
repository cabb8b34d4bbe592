# The request the agent runs (the C++ side writes it: runtime/python_program.cc for the cold
# agent, jail/zygote_loop.cc over the warm channel; invocation in __main__.py).
#
# Request (argv[1], JSON):
#     {"mode": "run" | "check" | "snapshot" | "restore" (the last two: a warm session's, see
#      snapshot.py; they ignore code and answer with one result event) | "command" | "listdir" |
#      "drop_context" (a warm session's too, see sandbox_ops.py), "code": str,
#      "filename": "<cell>", "policy": profile | null,
#      "figures": {"max_width_px", "max_height_px", "max_bytes", "dpi"},
#      "max_repr_bytes": int, "max_stream_event_bytes": int,
#      optional, a session's only: "context": str ("" the default one; child.py),
#      "env": {str: str} and "cwd": str (for this execution only; run, command, listdir),
#      "depth": int >= 1 (listdir),
#      optional: "extra_mimes": [str] (representations beyond IPython's, from EXTRA_MIMES: what
#      E2B's code interpreter adds, asked for by the E2B front end; see e2b_formats.py),
#      "analyzers": [str] (from ANALYZERS: the seed's linters on the code, run or check mode),
#      "lint_block": [str] (codes of letters and digits: an analyzer's finding whose code starts
#      with one refuses the run; its analyzer runs whether named or not; analyzers.py),
#      "guard": {"writable": [path], "libraries": [path], "network": bool, "programs": bool}
#      (the audit hooks installed before the code runs, and what they allow; guard.py)}
from . import wire_json
from .analyzers import ANALYZERS
from .errors import RequestError
from .lint import compile_policy

DEFAULTS = {
    "max_repr_bytes": 1 << 20,
    "max_stream_event_bytes": 1 << 20,
    "figures": {"max_width_px": 2000, "max_height_px": 2000, "max_bytes": 4 << 20, "dpi": None},
}


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
        request = wire_json.loads(f.read().decode("utf-8", "replace"))
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


# What "extra_mimes" may ask for (e2b_formats.py): a DataFrame's columns, a figure's chart, and
# application/json for a list or dict.
EXTRA_MIMES = ("application/vnd.e2b.data+json", "application/vnd.e2b.chart+json", "application/json")


def _choices_field(request, key, choices):
    """A list of some of `choices` (extra_mimes, analyzers), as a tuple; () when absent."""
    picked = request.get(key)
    if picked is None:
        return ()
    if not isinstance(picked, list) or not all(p in choices for p in picked):
        raise RequestError("%s must be a list of %s" % (key, ", ".join(choices)))
    return tuple(picked)


def _lint_block_field(request):
    codes = request.get("lint_block")
    if codes is None:
        return ()
    if (not isinstance(codes, list) or len(codes) > 200
            or not all(isinstance(c, str) and 0 < len(c) <= 16 and c.isascii() and c.isalnum() for c in codes)):
        raise RequestError("lint_block must be a list of at most 200 codes of letters and digits")
    return tuple(codes)


def _guard_field(request):
    """The "guard" object, or None when the request has none."""
    guard = request.get("guard")
    if guard is None:
        return None
    if not isinstance(guard, dict):
        raise RequestError("guard must be an object")
    for key in ("writable", "libraries"):
        paths = guard.get(key)
        if not isinstance(paths, list) or not all(isinstance(p, str) and p.startswith("/") for p in paths):
            raise RequestError("guard.%s must be a list of absolute paths" % key)
    for key in ("network", "programs"):
        if not isinstance(guard.get(key), bool):
            raise RequestError("guard.%s must be true or false" % key)
    return {key: guard[key] for key in ("writable", "libraries", "network", "programs")}


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
        "extra_mimes": _choices_field(request, "extra_mimes", EXTRA_MIMES),
        "analyzers": _choices_field(request, "analyzers", ANALYZERS),
        "lint_block": _lint_block_field(request),
        "guard": _guard_field(request),
        "package_set": _string_field(request, "package_set"),  # the host's: wheelhouse.use_set
        # Network through the host (egress.py): the connector's descriptor and the relay's port.
        "egress_fd": _int_field(request, "egress_fd", None),
        "egress_port": _int_field(request, "egress_port", None),
    }
