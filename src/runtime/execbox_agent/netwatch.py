# What the code tried to reach where the sandbox has no network (docs/security.md, "Network"):
# without a policy nothing leaves (the namespace has only lo, seccomp refuses AF_INET sockets),
# and this notes the destinations Python code asked for, from the interpreter's audit events
# (a name looked up, an address connected to), so that the Result can say what was refused.
# Best effort, and said by the sandbox itself: urllib, requests, http.client, socket; a program
# that a command runs is not seen. With a policy the host's proxy lists every attempt instead,
# and this stays quiet. Bounded: at most MAX_LISTED destinations per execution, each once.
# In a session the sandbox's own loopback is not the network (its servers listen there, and its
# code reaches them): those destinations are not noted there.
import sys

MAX_LISTED = 64
_MAX_HOST = 260

_watching = False
_local_loopback = False
_seen = []
_omitted = 0


def _hook(event, args):
    global _omitted
    if not _watching:
        return
    if event == "socket.getaddrinfo":
        host, port = args[0], args[1]
    elif event == "socket.connect":
        address = args[1]
        if not isinstance(address, tuple) or len(address) < 2:
            return  # a unix socket's path: not the network
        host, port = address[0], address[1]
    else:
        return
    try:
        if isinstance(host, (bytes, bytearray)):
            host = bytes(host).decode("utf-8", "replace")
        host = str(host)[:_MAX_HOST] if host is not None else ""
        try:
            port = int(port) if port is not None else 0
        except (TypeError, ValueError):
            port = 0
        if not 0 <= port <= 65535:
            port = 0
        if _local_loopback and _loopback(host):
            return
        entry = (host, port)
        if entry in _seen:
            return
        if len(_seen) >= MAX_LISTED:
            _omitted += 1
            return
        _seen.append(entry)
    except Exception:  # noqa: BLE001 - never the code's problem
        pass


def _loopback(host):
    return host in ("localhost", "::1", "ip6-localhost") or host.startswith("127.")


def install(local_loopback=False):
    """Adds the audit hook (once per interpreter; forked children inherit it) and watches.
    `local_loopback`: the loopback is the sandbox's own and usable (a session's)."""
    global _watching, _local_loopback
    _local_loopback = local_loopback
    if not getattr(install, "done", False):
        sys.addaudithook(_hook)
        install.done = True
    _watching = True


def stop():
    """The sandbox has network through the host: its proxy lists the attempts."""
    global _watching
    _watching = False
    _seen.clear()


def take_event():
    """The report event of what was noted since the last call, or None; starts afresh."""
    global _omitted
    if not _watching or (not _seen and not _omitted):
        return None
    event = {"type": "network_attempts",
             "attempts": [{"host": h, "port": p} for h, p in _seen],
             "omitted": _omitted}
    _seen.clear()
    _omitted = 0
    return event
