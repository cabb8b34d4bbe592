# Session snapshots: a session's state copied as data, not as a process. Made inside the
# session's own sandbox (the "snapshot" request) and restored inside a fresh one of the same
# owner (the "restore" request); the host only carries the bytes and never unpickles them.
#
# What is kept: the user's globals (the session's one __main__ module), serialized with
# cloudpickle -- values, functions, classes and lambdas defined in cells, imported modules by
# name -- and the work dir's files (regular files, directories, symbolic links). A global that
# cannot be serialized (an open file, a socket, a generator, a thread, a C handle) is left out
# and listed by name with its type and the reason; so is a work-dir entry that is not a file,
# a directory or a link. The source of every earlier cell goes along, so that a traceback
# through a restored function still shows its lines. A session's root is an overlay whose upper
# layer holds what the code changed outside the home (jail/session_root.h: /opt, /etc, a new
# /data): that layer goes along too, read through a read-only descriptor of it, after the work
# dir's files in the same tar (the manifest's "root_from" is the index of its first member; a
# deleted file of the system is a character device 0/0 there, an overlay's whiteout, and a
# directory that hides the system's is marked opaque), and is put back through the new
# session's own root.
#
# The snapshot file, written in the work dir under SNAPSHOT_NAME (the host reads it there; it is
# deleted when the next request arrives), and read back from RESTORE_NAME (deleted at once):
#     MAGIC | pickle records | tar of the work dir | manifest JSON | tar offset | manifest offset | MAGIC
# (offsets 8-byte little-endian). The pickle records come from one pickler, so an object that two
# names share stays shared: (name, value) each, then None. A record that fails is cut off the
# file, the pickler's memo cleared and a _MEMO_RESET record written, at which the loader starts
# a fresh unpickler (an unpickler's memo cannot be reset), so the records before and after it
# still load; only an object shared across such a cut is copied twice.
# Functions and classes from cells keep __main__'s globals: the pickler stands a persistent id
# for __main__'s dict, and the restore gives them the new session's __main__ dict, so they see
# later assignments as before (cloudpickle alone would give them a private copy).
#
# Everything is bounded by the session's own limits: the file is written to the work dir (its
# size limit; ENOSPC is reported as such) by the session's process (its memory and time limits).
import errno
import io
import json
import os
import pickle
import shutil
import stat
import struct
import sys
import tarfile

SNAPSHOT_NAME = ".execbox-snapshot"
RESTORE_NAME = ".execbox-restore"
PREWARM_NAME = ".execbox-prewarm"  # a child's own warm-up (warm.py), never the host's
MAGIC = b"EXBSNAP1"
_TRAILER = struct.Struct("<QQ8s")
_MAIN_GLOBALS = "execbox:__main__"
_COPY_CHUNK = 1 << 20
_FULL = (errno.ENOSPC, errno.EFBIG, errno.EDQUOT)  # the work dir's size (EFBIG: its RLIMIT_FSIZE)
_MEMO_RESET = 0  # a record that is an int: never memoized, so it reads the same either side
_OPAQUE = "EXECBOX.opaque"  # a pax header: the directory hides the system's one of that name


class SnapshotError(Exception):
    """The snapshot could not be made or read; the message is for the user."""


def discard(work_dir, name=SNAPSHOT_NAME):
    """Removes a snapshot file (the host has read it, or it is about to be made again)."""
    try:
        os.unlink(name, dir_fd=work_dir)
    except OSError:
        pass


def _type_name(value):
    kind = type(value)
    module = getattr(kind, "__module__", "") or ""
    name = getattr(kind, "__qualname__", None) or kind.__name__
    return name if module == "builtins" else "%s.%s" % (module, name)


def _reason(exc):
    text = "%s: %s" % (type(exc).__name__, exc)
    return text if len(text) <= 300 else text[:297] + "..."


def _is_dunder(name):
    return name.startswith("__") and name.endswith("__")


def _pickler_class():
    import cloudpickle

    class Pickler(cloudpickle.CloudPickler):
        """cloudpickle, with __main__'s globals written as a reference (see the header)."""

        def __init__(self, file, main_dict):
            super().__init__(file, protocol=5)
            self._main_marker = {}
            self.globals_ref[id(main_dict)] = self._main_marker

        def persistent_id(self, obj):
            return _MAIN_GLOBALS if obj is self._main_marker else None

    return Pickler


class _Unpickler(pickle.Unpickler):
    def __init__(self, file, main_dict):
        super().__init__(file)
        self._main_dict = main_dict

    def persistent_load(self, pid):
        if pid == _MAIN_GLOBALS:
            return self._main_dict
        raise pickle.UnpicklingError("unknown persistent id")


class _Exactly(io.RawIOBase):
    """`size` bytes of a file that the code (a thread of the session) may be changing: cut or
    padded with zeros, so that a member of the tar is never shorter than its header says."""

    def __init__(self, fd, size):
        self._fd, self._left = fd, size

    def readable(self):
        return True

    def readinto(self, buffer):
        want = min(len(buffer), self._left)
        if want == 0:
            return 0
        data = os.read(self._fd, want) or b"\0" * want
        buffer[:len(data)] = data
        self._left -= len(data)
        return len(data)


def _is_opaque(name, dirfd):
    """Whether an overlay marked this directory of its upper layer opaque (it hides the lower
    one's entries): user.overlay.* in a user namespace, trusted.overlay.* outside one."""
    path = "/proc/self/fd/%d/%s" % (dirfd, name)
    for attr in ("user.overlay.opaque", "trusted.overlay.opaque"):
        try:
            if os.getxattr(path, attr, follow_symlinks=False) == b"y":
                return True
        except OSError:
            pass
    return False


def _add_files(tar, work_dir, skipped, layer=False):
    """The work dir (or with `layer` a root's upper layer) into `tar`, following no link;
    returns how many files went in."""
    count = 0
    shown = "/%s" if layer else "%s"
    for dirpath, dirnames, filenames, dirfd in os.fwalk(".", dir_fd=work_dir, follow_symlinks=False):
        for name in sorted(dirnames + filenames):
            rel = os.path.normpath(os.path.join(dirpath, name))
            if not layer and rel in (SNAPSHOT_NAME, RESTORE_NAME, PREWARM_NAME):
                continue
            try:
                st = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
                info = tarfile.TarInfo(rel)
                info.mode, info.mtime = stat.S_IMODE(st.st_mode), int(st.st_mtime)
                if stat.S_ISDIR(st.st_mode):
                    info.type = tarfile.DIRTYPE
                    if layer and _is_opaque(name, dirfd):
                        info.pax_headers = {_OPAQUE: "y"}
                    tar.addfile(info)
                elif layer and stat.S_ISCHR(st.st_mode) and st.st_rdev == 0:
                    info.type = tarfile.CHRTYPE  # a whiteout: the system's file was removed
                    tar.addfile(info)
                elif stat.S_ISLNK(st.st_mode):
                    info.type, info.linkname = tarfile.SYMTYPE, os.readlink(name, dir_fd=dirfd)
                    tar.addfile(info)
                elif stat.S_ISREG(st.st_mode):
                    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dirfd)
                    try:
                        info.size = os.fstat(fd).st_size
                        tar.addfile(info, io.BufferedReader(_Exactly(fd, info.size), _COPY_CHUNK))
                    finally:
                        os.close(fd)
                    count += 1
                else:
                    skipped.append({"name": shown % rel, "type": "special file",
                                    "reason": "not a file, directory or link"})
            except OSError as exc:
                if exc.errno in _FULL:  # the snapshot itself filled the work dir
                    raise
                skipped.append({"name": shown % rel, "type": "file", "reason": _reason(exc)})
    return count


def take(main, work_dir, sources, name=SNAPSHOT_NAME, files=True, layer=None):
    """Writes the snapshot file (`name`; with the work dir's files unless `files` is false, and
    then the root's upper layer `layer`, a descriptor, when there is one); returns its summary
    (names kept, not_copied, files, bytes)."""
    discard(work_dir, name)
    namespace = main.__dict__ if main is not None else {}
    kept, not_copied, skipped_files = [], [], []
    fd = os.open(name, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600,
                 dir_fd=work_dir)
    try:
        with os.fdopen(fd, "w+b") as f:
            f.write(MAGIC)
            pickler = _pickler_class()(f, namespace)
            for name, value in list(namespace.items()):
                if _is_dunder(name):
                    continue
                at = f.tell()
                try:
                    pickler.dump((name, value))
                    kept.append(name)
                except OSError:
                    raise
                except (Exception, SystemExit) as exc:  # noqa: BLE001 - any user __reduce__
                    f.seek(at)
                    f.truncate()
                    pickler.clear_memo()
                    pickler.dump(_MEMO_RESET)
                    not_copied.append({"name": name, "type": _type_name(value), "reason": _reason(exc)})
            pickler.dump(None)
            del pickler
            tar_at = f.tell()
            root_from = None
            with tarfile.open(fileobj=f, mode="w", format=tarfile.PAX_FORMAT) as tar:
                count = _add_files(tar, work_dir, skipped_files) if files else 0
                if files and layer is not None:
                    root_from = len(tar.members)
                    count += _add_files(tar, layer, skipped_files, layer=True)
                files = count
            manifest_at = f.tell()
            manifest = {"version": 1, "python": "%d.%d" % sys.version_info[:2], "names": kept,
                        "not_copied": not_copied + skipped_files, "sources": sources}
            if root_from is not None:
                manifest["root_from"] = root_from
            f.write(json.dumps(manifest, ensure_ascii=False).encode("utf-8", "surrogatepass"))
            f.write(_TRAILER.pack(tar_at, manifest_at, MAGIC))
            size = f.tell()
    except OSError as exc:
        discard(work_dir, name)
        if exc.errno in _FULL:
            raise SnapshotError("the snapshot does not fit in the session's work dir (its disk_mb limit); "
                                "delete files or large variables, or create the session with more "
                                "disk_mb") from None
        raise SnapshotError("the snapshot could not be written: %s" % (exc.strerror or exc)) from None
    return {"names": kept, "not_copied": not_copied + skipped_files, "files": files, "bytes": size}


def _read_manifest(f):
    f.seek(0, os.SEEK_END)
    size = f.tell()
    if size < len(MAGIC) + _TRAILER.size:
        raise SnapshotError("the snapshot is truncated")
    f.seek(size - _TRAILER.size)
    tar_at, manifest_at, magic = _TRAILER.unpack(f.read(_TRAILER.size))
    f.seek(0)
    in_order = len(MAGIC) <= tar_at <= manifest_at <= size - _TRAILER.size
    if f.read(len(MAGIC)) != MAGIC or magic != MAGIC or not in_order:
        raise SnapshotError("the file is not a snapshot")
    f.seek(manifest_at)
    try:
        manifest = json.loads(f.read(size - _TRAILER.size - manifest_at).decode("utf-8", "surrogatepass"))
    except ValueError:
        raise SnapshotError("the snapshot's manifest is damaged") from None
    if not isinstance(manifest, dict) or manifest.get("version") != 1:
        raise SnapshotError("the snapshot's version is not one this agent reads")
    return tar_at, manifest


def _open_beneath(top, parts):
    """The directory parts[:-1] beneath `top` (made as needed, no link followed)."""
    directory = top
    for part in parts[:-1]:
        try:
            os.mkdir(part, 0o755, dir_fd=directory)
        except FileExistsError:
            pass
        child = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=directory)
        if directory != top:
            os.close(directory)
        directory = child
    return directory


def _remove(directory, leaf):
    """Whatever is at `leaf` in `directory` (a file, a link, a whole directory); nothing there
    is not an error."""
    try:
        os.unlink(leaf, dir_fd=directory)
    except FileNotFoundError:
        pass
    except (IsADirectoryError, PermissionError):
        shutil.rmtree(leaf, dir_fd=directory)


def _empty(directory, leaf):
    """The entries of the directory `leaf`, removed (an opaque directory of the layer)."""
    fd = os.open(leaf, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=directory)
    try:
        for entry in os.listdir(fd):
            _remove(fd, entry)
    finally:
        os.close(fd)


def _extract(f, work_dir, not_restored, root=None, root_from=None):
    """The tar's files into the work dir, and from member `root_from` on into the root `root`
    (replacing what the system has there): nothing absolute, no '..', no link followed."""
    count = 0
    with tarfile.open(fileobj=f, mode="r:") as tar:
        for index, member in enumerate(tar):
            in_root = root_from is not None and index >= root_from
            shown = "/" + member.name if in_root else member.name
            parts = [p for p in member.name.split("/") if p not in ("", ".")]
            if not parts or member.name.startswith("/") or ".." in parts or any("\0" in p for p in parts):
                not_restored.append({"name": shown, "type": "file",
                                     "reason": "not a path beneath the work dir"})
                continue
            if in_root and root is None:
                not_restored.append({"name": shown, "type": "file",
                                     "reason": "this session's root is not writable"})
                continue
            top = root if in_root else work_dir
            directory = top
            try:
                directory = _open_beneath(top, parts)
                leaf = parts[-1]
                if in_root and member.ischr():
                    _remove(directory, leaf)  # removed from the system
                    continue
                if in_root and not member.isdir():
                    _remove(directory, leaf)
                if member.isdir():
                    try:
                        os.mkdir(leaf, member.mode & 0o777 or 0o755, dir_fd=directory)
                    except FileExistsError:
                        if in_root and member.pax_headers.get(_OPAQUE) == "y":
                            _empty(directory, leaf)
                elif member.issym():
                    os.symlink(member.linkname, leaf, dir_fd=directory)
                elif member.isreg():
                    source = tar.extractfile(member)
                    fd = os.open(leaf, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                                 member.mode & 0o777 or 0o644, dir_fd=directory)
                    try:
                        while True:
                            chunk = source.read(_COPY_CHUNK)
                            if not chunk:
                                break
                            view = memoryview(chunk)
                            while view:
                                view = view[os.write(fd, view):]
                        os.utime(fd, (member.mtime, member.mtime))
                    finally:
                        os.close(fd)
                    count += 1
                else:
                    not_restored.append({"name": shown, "type": "special file",
                                         "reason": "not restored"})
            except OSError as exc:
                if exc.errno in _FULL:
                    raise SnapshotError("the snapshot's files do not fit in this session's work dir "
                                        "or root (its disk_mb limit)") from None
                not_restored.append({"name": shown, "type": "file", "reason": _reason(exc)})
            finally:
                if directory != top:
                    os.close(directory)
    return count


def restore(work_dir, main, name=RESTORE_NAME, root=None):
    """Reads the snapshot file `name` (deleted at once) into the work dir (and its root layer's
    part into the root `root`, a descriptor, when there is one) and main's globals; returns the
    summary (names restored, not_restored, files, sources)."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=work_dir)
    except OSError as exc:
        raise SnapshotError("no snapshot to restore: %s" % (exc.strerror or exc)) from None
    discard(work_dir, name)
    not_restored, restored = [], []
    with os.fdopen(fd, "rb") as f:
        tar_at, manifest = _read_manifest(f)
        f.seek(tar_at)
        root_from = manifest.get("root_from")
        root_from = root_from if isinstance(root_from, int) and not isinstance(root_from, bool) else None
        files = _extract(f, work_dir, not_restored, root, root_from)
        f.seek(len(MAGIC))
        unpickler = _Unpickler(f, main.__dict__)
        names = [n for n in manifest.get("names", []) if isinstance(n, str)]
        failure = None
        while True:
            try:
                record = unpickler.load()
            except (Exception, SystemExit) as exc:  # noqa: BLE001 - a user __setstate__, a missing module
                failure = exc
                break
            if record is None:
                break
            if record == _MEMO_RESET and type(record) is int:
                unpickler = _Unpickler(f, main.__dict__)
                continue
            if not (isinstance(record, tuple) and len(record) == 2 and isinstance(record[0], str)):
                failure = SnapshotError("a record of the snapshot is damaged")
                break
            main.__dict__[record[0]] = record[1]
            restored.append(record[0])
        if failure is not None:
            done = set(restored)
            for name in names:
                if name not in done:
                    not_restored.append({"name": name, "type": "unknown",
                                         "reason": "could not be restored: %s" % _reason(failure)})
    for entry in manifest.get("not_copied", []):
        if isinstance(entry, dict):
            not_restored.append(entry)
    sources = manifest.get("sources")
    sources = {k: v for k, v in sources.items() if isinstance(k, str) and isinstance(v, str)} \
        if isinstance(sources, dict) else {}
    return {"names": restored, "not_restored": not_restored, "files": files, "sources": sources}
