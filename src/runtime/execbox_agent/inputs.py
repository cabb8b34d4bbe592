# A request's input files ("inputs": [{"name", "content_base64"}]), checked and written into the
# work dir of a warm child (the cold agent's inputs are written by the host before it starts).
import binascii
import os

from .errors import RequestError
from .report import write_all


def parse_inputs(request):
    """The request's "inputs", checked: [(name, path parts, base64 text)]. The host validated
    the names; they are checked again: relative, no '..', no NUL."""
    inputs = request.get("inputs") or []
    if not isinstance(inputs, list):
        raise RequestError("inputs must be a list")
    checked = []
    for item in inputs:
        if not (isinstance(item, dict) and isinstance(item.get("name"), str)
                and isinstance(item.get("content_base64"), str)):
            raise RequestError("each input must be an object with a string name and content_base64")
        name = item["name"]
        parts = [part for part in name.split("/") if part not in ("", ".")]
        if name.startswith("/") or "\0" in name or not parts or ".." in parts:
            raise RequestError("input file name %r is not a relative path inside the work dir" % name)
        checked.append((name, parts, item["content_base64"]))
    return checked


def write_inputs(work_dir, inputs):
    """Creates each input file under the work dir (an fd: the code may have changed directory),
    with its parent directories, following no symbolic link (a session's code may have planted
    one) and replacing no file."""
    for name, parts, content in inputs:
        try:
            data = binascii.a2b_base64(content)
        except (binascii.Error, ValueError) as exc:
            raise RequestError("input %r is not valid base64: %s" % (name, exc)) from None
        directory = work_dir
        try:
            for part in parts[:-1]:
                try:
                    os.mkdir(part, 0o755, dir_fd=directory)
                except FileExistsError:
                    pass
                child = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                                dir_fd=directory)
                if directory != work_dir:
                    os.close(directory)
                directory = child
            fd = os.open(parts[-1], os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                         0o644, dir_fd=directory)
            try:
                write_all(fd, data)
            finally:
                os.close(fd)
        except OSError as exc:
            raise RequestError("input %r could not be written: %s" % (name, exc.strerror or exc)) from None
        finally:
            if directory != work_dir:
                os.close(directory)
