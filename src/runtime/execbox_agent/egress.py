# Network through the host (docs/security.md, "Network"): a relay on the sandbox's loopback
# that hands each accepted connection, as it is, to the host's proxy. The host reads the proxy
# request (HTTP or SOCKS5), decides, connects and relays; nothing here parses or decides, so
# code that takes this thread over gains nothing it did not have: it can only send the host
# sockets, and the host treats whatever comes from here as hostile.
import os
import socket
import threading


def start(connector_fd, port):
    """Listens on 127.0.0.1:port and passes each connection over the connector (SCM_RIGHTS)."""
    os.set_inheritable(connector_fd, False)
    connector = socket.socket(fileno=connector_fd)
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(64)
    listener.set_inheritable(False)

    def relay():
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            try:
                socket.send_fds(connector, [b"c"], [conn.fileno()])
            except OSError:
                pass  # the host is gone or refuses more: the client sees the connection close
            finally:
                conn.close()

    threading.Thread(target=relay, name="execbox-egress", daemon=True).start()
