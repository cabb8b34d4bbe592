# Text helpers every module uses: an object whose __str__ raises never crashes anything, long
# text is cut in the middle, and source is split into lines as CPython counts them.
# A leaf module: it imports nothing of the agent's own.
import io


def utf8_len(text):
    return len(text.encode("utf-8", "surrogatepass"))


def cap_text(text, limit):
    """Keeps the head and the tail of text within limit UTF-8 bytes (the end of a long output
    matters as much as its start), with a marker saying how much was dropped."""
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= limit:
        return text, False
    marker_room = 64
    keep = max(limit - marker_room, 0)
    head, tail = data[: keep * 2 // 3], data[len(data) - (keep - keep * 2 // 3):] if keep else b""
    dropped = len(data) - len(head) - len(tail)
    marker = "\n... [%d bytes truncated] ...\n" % dropped
    return (head.decode("utf-8", "ignore") + marker + tail.decode("utf-8", "ignore")), True


def safe_str(obj):
    try:
        return str(obj)
    except BaseException:  # noqa: BLE001 - a user __str__ may raise anything
        return "<unprintable %s object>" % type(obj).__name__


def describe(exc):
    return "%s: %s" % (type(exc).__name__, safe_str(exc))


def split_lines(source):
    """Lines as Python counts them (\n, \r\n, \r), endings kept. str.splitlines() would also
    split at form feeds and U+2028, and shift every line number after one."""
    return io.StringIO(source, newline="").readlines()
