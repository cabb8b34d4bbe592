// A session's root filesystem: writable like a machine's, and still nothing of the host's.
#pragma once

#include <cstdint>

#include "jail/doctor.h"

namespace execbox::jail {

// In a session child's fresh mount namespace, before its own tmpfs mounts: puts an overlay over
// the zygote's root tmpfs (the jail's /, /etc, /opt, the mount points) whose upper layer is a
// tmpfs of the session's own, `bytes` and `inodes` in size, then binds every other mount of the
// zygote's root (the host's /usr and the files under /etc, read-only as before; /dev; /proc)
// at its place in it and makes it the root. So the code may create and change files anywhere
// its user owns (/opt/x, /etc/x, a new /data), the changes live and die with the session's
// mount namespace, and the host's directories stay read-only mounts. Removing or renaming a
// directory of the zygote's root needs extended attributes on tmpfs (Linux 6.6): before that
// it fails with EIO or EXDEV. `*layer` gets a descriptor (close-on-exec) of the upper layer
// through a read-only mount of its own, outside the new root: a snapshot of the session copies
// what it holds. Where the kernel will not mount an overlay here (before Linux 5.11, or a
// container that refuses it) nothing changes and `*layer` is -1: the root stays read-only, and
// the caller must then keep writes confined to the home, /tmp and /dev/shm. Returns the step
// that failed (errno set), or nullptr. May allocate (a forked copy of the single-threaded
// zygote).
// `execbox doctor`'s proof that a session's root can be an overlay here: a child in a user
// namespace of its own mounts one over a tmpfs, writes and removes through it.
Check SessionRootCheck();

const char* MountSessionRoot(uint64_t bytes, uint64_t inodes, const char* work_dir, int* layer) noexcept;

}  // namespace execbox::jail
