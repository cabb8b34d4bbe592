# A session's operations besides Python (runtime/python_program.h, Mode): a shell command and a
# directory listing, each answered by one result event whose application/json says what
# happened, and the per-execution environment and working directory that every execution of a
# session (Python too) may ask for. Only a session's child runs these (warm.py): a one-shot
# child or the cold agent refuses the modes.
#
#   command: `code` run by /bin/bash -l -c (/bin/sh -c where the sandbox has no bash), in its own
#     process group, stdin the execution's (the request's stdin, then EOF), fds 1 and 2 its own
#     (its output reaches the host live, as print() does); the result is {"exit_code": N}, a
#     signal N counted as 128 + N as a shell does; the execution itself ends with 0.
#   listdir: `code` is a directory; the result is {"path": absolute, "entries": [...],
#     "truncated": bool}, breadth first to `depth` levels, sorted by name within a directory.
#     Entries are lstat'ed: a symbolic link is reported as one (with its target), never
#     followed or descended into. A missing path or one that is not a directory is an error
#     event as an uncaught exception would make it (ename FileNotFoundError, ...).
import os
import stat
import sys

MAX_ENTRIES = 10000  # a listing of "/" to depth 20 must not cost the session its memory
_TYPES = {stat.S_IFREG: "file", stat.S_IFDIR: "dir", stat.S_IFLNK: "symlink"}


def error_event(exc):
    """The error event for an exception raised by the agent on the execution's behalf (a cwd or a
    path that does not exist): as an uncaught exception with no user frame would report it."""
    from .text import safe_str
    ename, evalue = type(exc).__name__, safe_str(exc)
    return {"type": "error", "phase": "run", "ename": ename, "evalue": evalue,
            "traceback": ["%s: %s" % (ename, evalue) if evalue else ename]}


class Place:
    """The request's "env" and "cwd" for the duration of one execution, put back by leave()
    (always called, also after enter() raised): variables as they were (those that did not
    exist removed again), the working directory the process had before. enter() raises OSError
    for a cwd that cannot be entered, before env is touched."""

    def __init__(self, env, cwd, work_dir, default_to_work_dir):
        self.env = env
        self.cwd = cwd
        self.work_dir = work_dir  # an fd
        # A command or a listing runs in the work dir unless told otherwise; Python code where
        # the session's earlier code left it (as a notebook's kernel does).
        self.default_to_work_dir = default_to_work_dir
        self.saved_env = None
        self.saved_cwd = None
        self.moved = False

    def enter(self):
        if self.cwd or self.default_to_work_dir:
            try:
                self.saved_cwd = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            except OSError:  # the code removed its own working directory: back to the work dir
                self.saved_cwd = None
            self.moved = True
            os.fchdir(self.work_dir)  # a relative cwd is relative to the work dir
            if self.cwd:
                os.chdir(self.cwd)
        if self.env:
            self.saved_env = {name: os.environ.get(name) for name in self.env}
            os.environ.update(self.env)

    def leave(self):
        if self.saved_env is not None:
            for name, value in self.saved_env.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
            self.saved_env = None
        if self.moved:
            self.moved = False
            saved, self.saved_cwd = self.saved_cwd, None
            try:
                os.fchdir(saved if saved is not None else self.work_dir)
            except OSError:
                os.fchdir(self.work_dir)
            finally:
                if saved is not None:
                    os.close(saved)


def in_place(state, work_dir, body, default_to_work_dir):
    """body()'s result, run with the request's env and cwd; a cwd that cannot be entered is the
    execution's error (exit code 1, as an uncaught exception), body never runs."""
    request = state.request
    place = Place(request["env"], request["cwd"], work_dir, default_to_work_dir)
    try:
        try:
            place.enter()
        except OSError as exc:
            state.reporter.emit(error_event(exc))
            return 1
        return body()
    finally:
        place.leave()


def run_command(state, stdin_fd):
    """Runs the request's code as a shell command and reports its exit status; returns the
    execution's exit code (0; 1 when the shell could not be started; 130 when interrupted)."""
    import signal
    import subprocess
    command = state.request["code"]
    if os.path.exists("/bin/bash"):
        argv = ["/bin/bash", "-l", "-c", command]
    else:
        argv = ["/bin/sh", "-c", command]
    # Its own process group, so that a cancel takes the command's whole tree (a pipeline, what
    # it started in the background); restore_signals puts back SIGPIPE, which the agent ignores.
    group = {"process_group": 0} if sys.version_info >= (3, 11) else {"start_new_session": True}
    try:
        proc = subprocess.Popen(argv, stdin=stdin_fd, stdout=None, stderr=None, close_fds=True,
                                restore_signals=True, **group)
    except OSError as exc:  # e.g. EAGAIN at the session's process limit: the command's failure
        state.reporter.emit(error_event(exc))
        return 1
    try:
        status = proc.wait()
    except KeyboardInterrupt as exc:  # the execution was interrupted: so is its command
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # as run() does: the report comes next
        proc.wait()
        state.reporter.emit(error_event(exc))
        return 130
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    exit_code = 128 - status if status < 0 else status
    state.reporter.emit({"type": "result", "metadata": {},
                         "data": {"text/plain": "exit %d" % exit_code,
                                  "application/json": {"exit_code": exit_code}}})
    return 0


class _Names:
    """uid and gid to names, as ls shows them: the number itself when there is no name."""

    def __init__(self):
        self.users, self.groups = {}, {}

    def user(self, uid):
        if uid not in self.users:
            import pwd
            try:
                self.users[uid] = pwd.getpwuid(uid).pw_name
            except (KeyError, OverflowError):
                self.users[uid] = str(uid)
        return self.users[uid]

    def group(self, gid):
        if gid not in self.groups:
            import grp
            try:
                self.groups[gid] = grp.getgrgid(gid).gr_name
            except (KeyError, OverflowError):
                self.groups[gid] = str(gid)
        return self.groups[gid]


def _entry(path, name, st, names):
    kind = _TYPES.get(stat.S_IFMT(st.st_mode), "other")
    entry = {"name": name, "path": path, "type": kind, "size": st.st_size,
             "mode": stat.S_IMODE(st.st_mode), "permissions": stat.filemode(st.st_mode),
             "owner": names.user(st.st_uid), "group": names.group(st.st_gid), "modified": st.st_mtime}
    if kind == "symlink":
        try:
            entry["symlink_target"] = os.readlink(path)
        except OSError:
            entry["symlink_target"] = None
    return entry


def list_dir(top, depth, limit=MAX_ENTRIES):
    """The listing of top (relative to the working directory) to depth levels: (absolute path,
    entries, truncated). Raises OSError for a top that is missing or not a directory; a
    subdirectory that cannot be read is listed without its contents."""
    top = os.path.abspath(top or ".")
    names = _Names()
    entries, level, truncated = [], [top], False
    for current_depth in range(1, depth + 1):
        below = []
        for directory in level:
            try:
                with os.scandir(directory) as it:
                    found = sorted(it, key=lambda e: e.name)
            except OSError:
                if current_depth == 1:  # top itself: missing, not a directory, unreadable
                    raise
                continue
            for item in found:
                if len(entries) >= limit:
                    return top, entries, True
                try:
                    st = item.stat(follow_symlinks=False)
                except OSError:  # gone since the directory was read
                    continue
                entries.append(_entry(item.path, item.name, st, names))
                if current_depth < depth and stat.S_ISDIR(st.st_mode):
                    below.append(item.path)
        level = below
        if not level:
            break
    return top, entries, truncated


def run_list_dir(state):
    """The listdir request: a result event, or an error event for a path that is missing or not
    a directory. Returns the execution's exit code."""
    request = state.request
    try:
        top, entries, truncated = list_dir(request["code"], request["depth"])
    except OSError as exc:
        state.reporter.emit(error_event(exc))
        return 1
    text = "%d entries%s" % (len(entries), ", truncated" if truncated else "")
    state.reporter.emit({"type": "result", "metadata": {},
                         "data": {"text/plain": text,
                                  "application/json": {"path": top, "entries": entries,
                                                       "truncated": truncated}}})
    return 0
