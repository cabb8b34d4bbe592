# The guard (guard = "audit", docs/security.md "The guard"): audit hooks (PEP 578) that refuse,
# inside the interpreter that runs the code, what the sandbox's policy forbids: writing outside
# the writable directories, the network where no policy allows it, running programs unless
# allowed, loading native libraries from outside the interpreter's, and the ways of reaching
# the hook itself (another hook, the collector's object lists). A refused event raises
# PermissionError naming it, and is listed in the report's "guard" event.
#
# It is installed just before the code runs and lasts for the rest of the process's life: a
# one-shot child ends with its execution, and a session's kernel keeps it (the agent's own later
# programs in that session, an analyzer or a package install, are refused like the code's:
# whatever the agent could still do, the code in the same interpreter could do too). Nothing
# turns it off: its policy is frozen in the hook's closure, and no reference to the hook is
# kept anywhere the code can reach without the collector's lists, which it refuses.
#
# A layer, not a boundary: audit events do not cover everything (a library already loaded
# through ctypes can write the interpreter's memory; _posixsubprocess.fork_exec raises no event;
# os.open with dir_fd= names its path relative to a directory the event does not carry).
# Under a jail they are caught again by the kernel; docs/security.md lists them.
import os
import sys

MAX_LISTED = 64
_MAX_DETAIL = 300

# What the hook refused since the last take_event(): (event, detail) once each, and how many
# more. Informational only: the code can reach this list (the audit log is the host's).
_refused = []
_omitted = [0]
_mode = [None]
# The sandbox's loopback is its own (a session's: its servers listen there), set by warm.py.
local_loopback = [False]

_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
# Devices anything may write to: nothing is stored there.
_WRITABLE_DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/stdout", "/dev/stderr", "/dev/tty")
_PROGRAM_EVENTS = ("subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.startfile")
_LOOKUP_EVENTS = ("socket.getaddrinfo", "socket.gethostbyname", "socket.gethostbyname_ex",
                  "socket.gethostbyaddr", "socket.getnameinfo")
_ADDRESS_EVENTS = ("socket.connect", "socket.bind", "socket.sendto", "socket.sendmsg")
# Path events: the indexes of their paths and of the directory fd each is relative to.
_PATH_EVENTS = {
    "os.remove": ((0, 1),), "os.rmdir": ((0, 1),), "os.mkdir": ((0, 2),),
    "os.rename": ((0, 2), (1, 3)), "os.link": ((1, 3),), "os.symlink": ((1, 2),),
    "os.chmod": ((0, 2),), "os.chown": ((0, 3),), "os.truncate": ((0, None),),
    "os.utime": ((0, 3),), "os.mkfifo": ((0, 2),), "os.mknod": ((0, 3),),
    "os.setxattr": ((0, None),), "os.removexattr": ((0, None),),
}
_INTROSPECTION_EVENTS = ("gc.get_objects", "gc.get_referrers", "gc.get_referents")
# The C library's doors to what the events above guard, looked up by name through ctypes (each
# lookup is a ctypes.dlsym event; a call through a found pointer is none): a program, a socket
# or a file changed by a path no event sees, a library loaded without ctypes.dlopen, any system
# call at all, the interpreter's hooks. Refused by name whatever the library, the interpreter's
# own included; programs and the network only where the policy refuses them.
_PROGRAM_SYMBOLS = frozenset((
    "system", "popen", "execv", "execve", "execvp", "execvpe", "execl", "execle", "execlp", "fexecve",
    "execveat", "posix_spawn", "posix_spawnp", "vfork"))
_DOOR_SYMBOLS = frozenset((
    "syscall", "open", "open64", "openat", "openat64", "creat", "creat64", "fopen", "fopen64", "freopen",
    "freopen64", "rename", "renameat", "renameat2", "unlink", "unlinkat", "mkdir", "mkdirat", "rmdir",
    "symlink", "symlinkat", "link", "linkat", "chmod", "fchmodat", "chown", "lchown", "fchownat",
    "truncate", "truncate64", "mknod", "mknodat", "mkfifo", "dlopen", "dlmopen", "__libc_dlopen_mode",
    "mprotect", "pkey_mprotect", "ptrace", "process_vm_writev", "PySys_AddAuditHook", "_PySys_ClearAuditHooks"))
_NETWORK_SYMBOLS = frozenset((
    "socket", "connect", "bind", "sendto", "sendmsg", "getaddrinfo", "gethostbyname", "gethostbyname2",
    "gethostbyaddr"))


def _text(value):
    if isinstance(value, (bytes, bytearray)):
        value = os.fsdecode(bytes(value))
    return str(value)[:_MAX_DETAIL]


def _under(path, dirs):
    return any(path == d or path.startswith(d.rstrip("/") + "/") for d in dirs)


def _resolve(path, dir_fd=None):
    """The absolute path with its symbolic links resolved (what the kernel would reach), or None
    for a descriptor (an open file: its opening was checked)."""
    if isinstance(path, int) or path is None:
        return None
    path = os.fsdecode(os.fspath(path))
    if not os.path.isabs(path):
        base = os.getcwd()
        if isinstance(dir_fd, int) and dir_fd >= 0:
            try:
                base = os.readlink("/proc/self/fd/%d" % dir_fd)
            except OSError:
                return "<a path relative to descriptor %d>" % dir_fd
        path = os.path.join(base, path)
    # The last component need not exist (a file being created); its directory's links count.
    head, tail = os.path.split(os.path.normpath(path))
    return os.path.join(os.path.realpath(head), tail)


def _mapped_libraries():
    """The file names of the shared objects this process has mapped."""
    names = set()
    try:
        with open("/proc/self/maps", "rb") as f:
            for line in f.read().decode("utf-8", "replace").splitlines():
                fields = line.split(None, 5)
                if len(fields) == 6 and fields[5].startswith("/"):
                    names.add(fields[5])
    except OSError:
        pass
    return names


def _make_hook(writable, libraries, network, loopback, programs):
    """The hook, its policy frozen in its closure (tuples and booleans)."""
    import socket
    unix = socket.AF_UNIX
    record = _record

    def loopback_host(host):
        host = _text(host)
        return host in ("localhost", "::1", "ip6-localhost") or host.startswith("127.")

    def check_open(args):
        path, _mode_text, flags = args
        if not isinstance(flags, int) or not flags & _WRITE_FLAGS:
            return None
        if isinstance(path, (str, bytes)) and os.fsdecode(path) in _WRITABLE_DEVICES:
            return None
        return check_path(path, None, "writing")

    def check_path(path, dir_fd, doing):
        where = _resolve(path, dir_fd)
        if where is None or _under(where, writable):
            return None
        return "%s %s: only %s are writable" % (doing, where, ", ".join(writable))

    def check_paths(event, args):
        for at, fd_at in _PATH_EVENTS[event]:
            dir_fd = args[fd_at] if fd_at is not None and fd_at < len(args) else None
            why = check_path(args[at], dir_fd, "changing")
            if why:
                return why
        return None

    def check_socket(event, args):
        if event == "socket.__new__":
            family = args[1]
            if family == unix or loopback and family in (socket.AF_INET, socket.AF_INET6):
                return None
            return "a socket of family %s: the sandbox has no network" % _text(family)
        if event in _LOOKUP_EVENTS:
            if loopback and (args[0] is None or loopback_host(args[0])):
                return None
            return "looking up %s: the sandbox has no network" % _text(args[0])
        address = args[1] if len(args) > 1 else None
        if isinstance(address, (str, bytes)) or address is None:
            return None  # a unix socket's path
        if loopback and isinstance(address, tuple) and address and loopback_host(address[0]):
            return None
        return "%s: the sandbox has no network" % _text(address)

    lib_dirs, lib_files = libraries

    def library(where):
        return where in lib_files or _under(where, lib_dirs)

    def check_library(name):
        if name is None:
            return None  # the interpreter itself
        text = os.fsdecode(name) if isinstance(name, bytes) else str(name)
        mapped = _mapped_libraries()
        if "/" in text:
            where = os.path.realpath(text)
            if where in mapped or library(where):
                return None
        elif any(os.path.basename(m) == text for m in mapped):
            return None
        return "loading %s: only the interpreter's libraries and those already loaded" % _text(text)

    def hook(event, args):
        why = None
        if event == "open":
            why = check_open(args)
        elif event in _PATH_EVENTS:
            why = check_paths(event, args)
        elif event in _PROGRAM_EVENTS:
            if not programs:
                why = "running programs is not allowed"
        elif event.startswith("socket."):
            if not network and (event == "socket.__new__" or event in _LOOKUP_EVENTS or event in _ADDRESS_EVENTS):
                why = check_socket(event, args)
        elif event == "ctypes.dlopen":
            why = check_library(args[0])
        elif event in ("ctypes.dlsym", "ctypes.dlsym/handle"):
            name = args[1] if isinstance(args[1], str) else None
            if (name in _DOOR_SYMBOLS or name in _PROGRAM_SYMBOLS and not programs
                    or name in _NETWORK_SYMBOLS and not network):
                why = "looking up %s in a library: it would do what the guard refuses, unseen" % name
        elif event == "import":
            if args[0] in ("_cffi_backend",):
                why = "cffi loads libraries no audit event sees"
            elif args[1] is not None and not str(args[1]).endswith((".py", ".pyc")):
                where = os.path.realpath(os.fsdecode(args[1]))
                if not library(where):
                    why = "loading the extension module %s from outside the interpreter's libraries" % where
        elif event == "sys.addaudithook":
            why = "adding an audit hook"
        elif event in _INTROSPECTION_EVENTS:
            why = "listing the collector's objects"
        if why:
            record(event, why)
            raise PermissionError("execbox guard: %s refused (%s)" % (event, why))

    return hook


def _record(event, why):
    entry = (event, why[:_MAX_DETAIL])
    if entry in _refused:
        return
    if len(_refused) >= MAX_LISTED:
        _omitted[0] += 1
        return
    _refused.append(entry)


def install(policy):
    """Installs the hook for the rest of this process's life (once: a session's later requests
    find it there). `policy`: the request's "guard" object (request.py)."""
    if _mode[0] is not None or not policy:
        return
    writable = tuple(os.path.realpath(d) for d in policy["writable"])
    # A library directory in a writable one (the packages a session installed in its work dir)
    # counts for the extensions it holds now, not for what the code may write there later; a
    # writable directory on sys.path (the work dir) does not count at all.
    named = [os.path.realpath(d) for d in policy["libraries"]]
    files = frozenset(_extensions_in([d for d in named if _under(d, writable)]))
    dirs = tuple(d for d in named + _interpreter_dirs() if not _under(d, writable))
    hook = _make_hook(writable, (dirs, files), policy["network"], local_loopback[0],
                      policy["programs"])
    _mode[0] = "audit"
    sys.addaudithook(hook)


def _extensions_in(dirs):
    for top in dirs:
        for parent, _subdirs, names in os.walk(top):
            for name in names:
                if name.endswith(".so") or ".so." in name:
                    yield os.path.realpath(os.path.join(parent, name))


def _interpreter_dirs():
    """Where the interpreter's own modules and extensions are: the standard library's directory
    and sys.path's entries as they are before the code runs."""
    dirs = {os.path.dirname(os.__file__)}
    dirs.update(p for p in sys.path if p and os.path.isabs(p))
    return sorted(os.path.realpath(d) for d in dirs)


def take_event():
    """The report event of the guard (its mode, what it refused since the last call), or None
    when it is not installed; starts afresh."""
    if _mode[0] is None:
        return None
    event = {"type": "guard", "mode": _mode[0],
             "refused": [{"event": e, "detail": d} for e, d in _refused], "omitted": _omitted[0]}
    _refused.clear()
    _omitted[0] = 0
    return event
