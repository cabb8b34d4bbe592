#!/bin/bash
# container.sh BUILD NAME -- ARGS...: runs `BUILD/execbox ARGS...` (standard input passed on) in
# a runc container shaped like a default Docker or Kubernetes one on this pure cgroup v2 guest:
# its own pid, mount, network, IPC, UTS and cgroup namespaces, the cgroup filesystem mounted
# read-only, /proc partly masked, a read-only root, no_new_privs, root with only the default
# capabilities plus SETUID, SETGID and SETFCAP (which Docker and Kubernetes give), a memory limit on the
# container. CONTAINER_DROP=CAP_X,... leaves those out; EXECBOX_CONTAINER_CGROUPS is passed on.
# NAME names the container; its bundle is /tmp/bundle-NAME. Exits with execbox's
# status. Used by suites.sh ("in a container": execbox takes its own writable view of the
# container's group, jail/container_cgroups.h, and the warm pool runs there).
set -eu
build=$1
name=$2
shift 3
bundle=/tmp/bundle-$name
rm -rf "$bundle"
mkdir -p "$bundle/rootfs"
cd "$bundle"
runc spec
mkdir -p rootfs/{usr,etc,proc,dev,sys,tmp,var/cache/execbox,root} "rootfs$build"
for link in bin lib lib64 sbin; do ln -s "usr/$link" "rootfs/$link"; done
python3 - "$build" "$name" "$@" <<'PY'
import json, os, sys
build, name, args = sys.argv[1], sys.argv[2], sys.argv[3:]
c = json.load(open("config.json"))
p = c["process"]
p["terminal"] = False
p["args"] = [f"{build}/execbox"] + args
p["cwd"] = "/tmp"
p["env"] = ["PATH=/usr/bin:/bin", "HOME=/root", "LANG=C.UTF-8"] + [
    f"{k}={v}" for k, v in os.environ.items() if k == "EXECBOX_CONTAINER_CGROUPS"]
for kind in ("bounding", "effective", "permitted"):
    p["capabilities"][kind] += [c for c in ("CAP_SETUID", "CAP_SETGID", "CAP_SETFCAP")
                                if c not in os.environ.get("CONTAINER_DROP", "").split(",")]
p["noNewPrivileges"] = True
p["rlimits"] = [{"type": "RLIMIT_NOFILE", "hard": 65536, "soft": 65536}]
c["root"]["readonly"] = True
bind = lambda path: {"destination": path, "type": "bind", "source": path, "options": ["rbind", "ro"]}
# /tmp before the build tree: a tree under /tmp (a CI clone) must not be hidden by the tmpfs.
c["mounts"] += [{"destination": "/tmp", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid", "nodev"]},
                {"destination": "/var/cache/execbox", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid", "nodev"]},
                bind("/usr"), bind("/etc"), bind(build)]
# Read-only, as runtimes mount it for an unprivileged container.
assert any(m["destination"] == "/sys/fs/cgroup" and "ro" in m["options"] for m in c["mounts"]), c["mounts"]
if not any(n["type"] == "cgroup" for n in c["linux"]["namespaces"]):
    c["linux"]["namespaces"].append({"type": "cgroup"})
c["linux"]["cgroupsPath"] = "/containers/" + name
c["linux"]["resources"] = {"memory": {"limit": 3 << 30}, "pids": {"limit": 4096}}
json.dump(c, open("config.json", "w"), indent=1)
PY
status=0
runc run --bundle "$bundle" "$name" || status=$?
runc delete --force "$name" >/dev/null 2>&1 || true
exit "$status"
