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
# turns it off: its policy and all it calls are bound in the hook's closure (_make_hook), and no
# reference to the hook is kept anywhere the code can reach without the collector's lists,
# which it refuses.
#
# A layer, not a boundary: audit events do not cover everything (ctypes writes memory and calls
# a function by its address unseen; _posixsubprocess.fork_exec raises no event; os.open with
# dir_fd= names its path relative to a directory the event does not carry; a link swapped
# between the check and the open leads elsewhere).
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


def _make_hook(writable, libraries, network, loopback, programs, refused, omitted):
    """The hook, with its policy and everything it calls bound in its closure before the code
    runs: the code can rebind any module's names (this one's, os.path's, builtins'), never a
    closure's, and it reaches neither the hook nor these functions without the collector's
    lists. So nothing here looks a name up in a module at call time: no os.path.realpath (whose
    os.lstat the code could replace), no builtins but those bound below."""
    import _stat
    import posix
    import socket
    lstat, readlink, getcwd = posix.lstat, posix.readlink, posix.getcwd
    posix_open, posix_read, posix_close, O_RDONLY = posix.open, posix.read, posix.close, posix.O_RDONLY
    S_ISLNK = _stat.S_ISLNK
    type_, str_, bytes_, int_, tuple_, len_, set_ = type, str, bytes, int, tuple, len, set
    OSError_, PermissionError_, ValueError_ = OSError, PermissionError, ValueError
    AF_UNIX, AF_INET, AF_INET6 = socket.AF_UNIX, socket.AF_INET, socket.AF_INET6
    write_flags, max_detail, max_listed = _WRITE_FLAGS, _MAX_DETAIL, MAX_LISTED
    writable_devices = frozenset(_WRITABLE_DEVICES)
    program_events, lookup_events = frozenset(_PROGRAM_EVENTS), frozenset(_LOOKUP_EVENTS)
    address_events, introspection_events = frozenset(_ADDRESS_EVENTS), frozenset(_INTROSPECTION_EVENTS)
    path_events = {event: tuple_(where) for event, where in _PATH_EVENTS.items()}
    door_symbols, program_symbols, network_symbols = _DOOR_SYMBOLS, _PROGRAM_SYMBOLS, _NETWORK_SYMBOLS
    writable_text = ", ".join(writable)
    lib_dirs, lib_files = libraries
    getframe = sys._getframe
    stdlib = os.path.dirname(os.__file__) + "/"

    def caller():
        """Where the event came from: the innermost frame outside the standard library (a
        library's import that runs `uname`, or the code's own line), as "file line N"."""
        try:
            frame = getframe(2)  # past this and the hook
        except ValueError_:
            return "a thread with no Python frames"  # _thread.start_new_thread(os.system, ...)
        outermost = None
        while frame is not None:
            name = frame.f_code.co_filename
            if not name.startswith(stdlib) and not name.startswith("<frozen "):
                return "%s line %d" % (text(name), frame.f_lineno)
            outermost = frame
            frame = frame.f_back
        return text(outermost.f_code.co_filename) if outermost is not None else "?"

    def text(value):
        if type_(value) is bytes_:
            value = value.decode("utf-8", "replace")
        return str_(value)[:max_detail]

    def decode(path):
        return path.decode("utf-8", "surrogateescape") if type_(path) is bytes_ else path

    def under(path, dirs):
        for d in dirs:
            if path == d or path.startswith(d.rstrip("/") + "/"):
                return True
        return False

    def real(path):
        """The absolute `path` with its symbolic links resolved as the kernel would follow them
        now; a missing component and what follows it are taken as written."""
        pending = [p for p in path.split("/") if p and p != "."]
        done = []
        hops = 0
        while pending:
            name = pending.pop(0)
            if name == "..":
                if done:
                    done.pop()
                continue
            here = "/" + "/".join(done + [name])
            try:
                mode = lstat(here).st_mode
            except OSError_:
                return "/" + "/".join(done + [name] + pending)
            if not S_ISLNK(mode):
                done.append(name)
                continue
            hops += 1
            if hops > 40:
                return here  # a loop: the kernel refuses it too (ELOOP)
            target = readlink(here)
            if target.startswith("/"):
                done = []
            pending = [p for p in target.split("/") if p and p != "."] + pending
        return "/" + "/".join(done)

    def resolve(path, dir_fd):
        """Where `path` leads, or None for a descriptor (an open file: its opening was checked)."""
        if path is None or type_(path) is int_:
            return None
        path = decode(path)
        if type_(path) is not str_:
            return "<a path of type %s>" % text(type_(path).__name__)
        if not path.startswith("/"):
            base = getcwd()
            if type_(dir_fd) is int_ and dir_fd >= 0:
                try:
                    base = readlink("/proc/self/fd/%d" % dir_fd)
                except OSError_:
                    return "<a path relative to descriptor %d>" % dir_fd
            path = base + "/" + path
        return real(path)

    def check_path(path, dir_fd, doing):
        where = resolve(path, dir_fd)
        if where is None or under(where, writable):
            return None
        return "%s %s: only %s are writable" % (doing, text(where), writable_text)

    def check_open(args):
        path, _mode_text, flags = args
        if type_(flags) is not int_ or not flags & write_flags:
            return None
        if type_(path) in (str_, bytes_) and decode(path) in writable_devices:
            return None
        return check_path(path, None, "writing")

    def check_paths(event, args):
        for at, fd_at in path_events[event]:
            dir_fd = args[fd_at] if fd_at is not None and fd_at < len_(args) else None
            why = check_path(args[at], dir_fd, "changing")
            if why:
                return why
        return None

    def loopback_host(host):
        host = text(host)
        return host in ("localhost", "::1", "ip6-localhost") or host.startswith("127.")

    def check_socket(event, args):
        if event == "socket.__new__":
            family = args[1]
            if family == AF_UNIX or loopback and family in (AF_INET, AF_INET6):
                return None
            return "a socket of family %s: the sandbox has no network" % text(family)
        if event in lookup_events:
            if loopback and (args[0] is None or loopback_host(args[0])):
                return None
            return "looking up %s: the sandbox has no network" % text(args[0])
        address = args[1] if len_(args) > 1 else None
        if address is None or type_(address) in (str_, bytes_):
            return None  # a unix socket's path
        if loopback and type_(address) is tuple_ and address and loopback_host(address[0]):
            return None
        return "%s: the sandbox has no network" % text(address)

    def mapped_libraries():
        """The file names of the shared objects this process has mapped."""
        chunks = []
        try:
            fd = posix_open("/proc/self/maps", O_RDONLY)
            try:
                while True:
                    chunk = posix_read(fd, 1 << 16)
                    if not chunk:
                        break
                    chunks.append(chunk)
            finally:
                posix_close(fd)
        except OSError_:
            pass
        names = set_()
        for line in b"".join(chunks).decode("utf-8", "replace").split("\n"):
            fields = line.split(None, 5)
            if len_(fields) == 6 and fields[5].startswith("/"):
                names.add(fields[5])
        return names

    def library(where):
        return where in lib_files or under(where, lib_dirs)

    def check_library(name):
        if name is None:
            return None  # the interpreter itself
        name = decode(name)
        if type_(name) is not str_:
            return "loading a library named by a %s" % text(type_(name).__name__)
        mapped = mapped_libraries()
        if "/" in name:
            where = real(name if name.startswith("/") else getcwd() + "/" + name)
            if where in mapped or library(where):
                return None
        else:
            for m in mapped:
                if m.rsplit("/", 1)[-1] == name:
                    return None
        return "loading %s: only the interpreter's libraries and those already loaded" % text(name)

    def check_symbol(name):
        if type_(name) is not str_:
            return None
        if name in door_symbols or name in program_symbols and not programs or name in network_symbols and not network:
            return "looking up %s in a library: it would do what the guard refuses, unseen" % name
        return None

    def check_import(args):
        if args[0] == "_cffi_backend":
            return "cffi loads libraries no audit event sees"
        filename = args[1]
        if filename is None or type_(filename) not in (str_, bytes_):
            return None
        filename = decode(filename)
        if filename.endswith((".py", ".pyc")):
            return None
        where = real(filename)
        if library(where):
            return None
        return "loading the extension module %s from outside the interpreter's libraries" % text(where)

    def record(event, why):
        entry = (event, why[:max_detail])
        if entry in refused:
            return
        if len_(refused) >= max_listed:
            omitted[0] += 1
            return
        refused.append(entry)

    def hook(event, args):
        why = None
        if event == "open":
            why = check_open(args)
        elif event in path_events:
            why = check_paths(event, args)
        elif event in program_events:
            if not programs:
                why = "running programs is not allowed"
        elif event.startswith("socket."):
            if not network and (event == "socket.__new__" or event in lookup_events or event in address_events):
                why = check_socket(event, args)
        elif event == "ctypes.dlopen":
            why = check_library(args[0])
        elif event == "ctypes.dlsym" or event == "ctypes.dlsym/handle":
            why = check_symbol(args[1])
        elif event == "import":
            why = check_import(args)
        elif event == "sys.addaudithook":
            why = "adding an audit hook"
        elif event in introspection_events:
            why = "listing the collector's objects"
        if why:
            record(event, "%s, by %s" % (why, caller()))
            raise PermissionError_("execbox guard: %s refused (%s)" % (event, why))

    return hook


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
    files = frozenset(_extensions_in([d for d in named if _inside(d, writable)]))
    dirs = tuple(d for d in named + _interpreter_dirs() if not _inside(d, writable))
    hook = _make_hook(writable, (dirs, files), policy["network"], local_loopback[0], policy["programs"],
                      _refused, _omitted)
    _mode[0] = "audit"
    sys.addaudithook(hook)


def _inside(path, dirs):
    return any(path == d or path.startswith(d.rstrip("/") + "/") for d in dirs)


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
