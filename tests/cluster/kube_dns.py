"""A stand-in for kube-dns, so that the Kubernetes router's nginx configuration
(deploy/kubernetes/router-nginx.conf) routes real requests on loopback: it answers A queries
for a headless Service as CoreDNS does, the Service's name with every pod's address and
<pod>.<service>.<namespace>.svc.cluster.local with that pod's; any other name is NXDOMAIN."""
import socket
import struct
import threading


class KubeDns:
    def __init__(self, service, namespace, pods):
        """pods: {pod name: IPv4 address}; the set can change while it runs (remove)."""
        self.suffix = f"{service}.{namespace}.svc.cluster.local"
        self.pods = dict(pods)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(0.5)
        self.port = self.sock.getsockname()[1]
        self.stopped = False
        self.asked = []  # every name looked up
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def remove(self, pod):
        """The pod leaves the Service's endpoints (not ready, or gone)."""
        self.pods.pop(pod, None)

    def lookup(self, name):
        if name == self.suffix:
            return list(self.pods.values())
        pod, _, rest = name.partition(".")
        if rest == self.suffix and pod in self.pods:
            return [self.pods[pod]]
        return None

    def _serve(self):
        while not self.stopped:
            try:
                query, peer = self.sock.recvfrom(512)
                self.sock.sendto(self.answer(query), peer)
            except socket.timeout:
                continue
            except (IndexError, struct.error, UnicodeDecodeError):
                continue  # not a query we understand: no answer

    def answer(self, query):
        labels, i = [], 12
        while query[i]:
            labels.append(query[i + 1:i + 1 + query[i]].decode("ascii").lower())
            i += 1 + query[i]
        qtype, = struct.unpack("!H", query[i + 1:i + 3])
        question = query[12:i + 5]
        self.asked.append(".".join(labels))
        ips = self.lookup(".".join(labels))
        records = ips if ips and qtype == 1 else []  # A only; a known name asked for AAAA: no data
        flags = 0x8180 | (3 if ips is None else 0)   # response, recursion desired+available; NXDOMAIN
        out = query[:2] + struct.pack("!HHHHH", flags, 1, len(records), 0, 0) + question
        for ip in records:  # the name is a pointer to the question's; TTL 1 s
            out += b"\xc0\x0c" + struct.pack("!HHIH", 1, 1, 1, 4) + socket.inet_aton(ip)
        return out

    def close(self):
        self.stopped = True
        self.thread.join(timeout=5)
        self.sock.close()
