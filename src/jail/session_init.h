// A session child's pid 1: a small init that owns the session's process table.
//
// A session child is forked by the zygote as pid 1 of its own pid namespace and isolates itself
// (zygote_loop.h). Once it is locked down (no capabilities, no_new_privs, Landlock, seccomp) it
// forks: the child becomes the Python kernel (it writes the ready byte and serves the agent on
// its channel); pid 1 stays as this init. The init is not dumpable (inherited from the zygote,
// and never raised), so code in the sandbox can neither read its descriptors through /proc nor
// trace it, and as pid 1 of the namespace it ignores every signal sent from inside it.
//
// The kernel's channel (the host's requests, its 'D' back) goes through the init too
// (KernelChannel): nothing the code holds reaches the host.
//
// The init talks to the host over a SOCK_SEQPACKET socket of its own (one message per frame,
// with its descriptors): the host asks it to start a process (argv, env, cwd, pipes or a
// pseudo-terminal) or to signal one; the init answers with the process's pid (and, for a pty,
// the master by SCM_RIGHTS) or why it could not start it, reports every exit of a process it
// started, and reaps every other process (orphans too). When the kernel ends the init reports
// the kernel's wait status first, then kills what the kernel left: every process outside the
// sessions of the table's processes (what the code started, setsid or not; a process the host
// started, and its children that stay in its session, live on, those children even after the
// process itself exited). It then waits: the host may ask for a new kernel (forked from the
// init, which is still the warm interpreter the first one was), so that a session whose
// execution was stopped keeps its files and processes; or the host closes its end, and
// everything goes. The host trusts none of it (init_link.h): the init runs inside the sandbox.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

namespace execbox::jail {

namespace init_wire {

inline constexpr uint32_t kMagic = 0x65784931;  // "exI1"
// A start request's strings (argv, env, cwd), at most; the whole message is smaller than a
// socket's default buffer, so a send never waits for the init to read.
inline constexpr size_t kMaxPayload = 60 * 1024;
inline constexpr uint32_t kMaxStrings = 2048;  // argv and env entries of one request, together
inline constexpr uint32_t kMaxProcesses = 64;  // alive at once in the init's table (the engine caps lower)

enum class Op : uint32_t {
  // host -> init
  kStart = 1,      // id, flags, rows/cols, argc/envc; payload: argv, env, cwd (each NUL-terminated);
                   // pipes: fds stdout, stderr and (with kStdinPipe) stdin, in that order
  kSignal = 2,     // pid, value = the signal: sent to the process group the process leads
  kNewKernel = 3,  // fd: the new kernel's channel; only once the last kernel has ended
  // init -> host
  kStarted = 10,      // id, pid; with kPty the master comes by SCM_RIGHTS
  kStartFailed = 11,  // id, value = errno, step = what failed
  kExited = 12,       // pid, value = its wait status (a process the host started)
  kKernelEnded = 13,  // value = the kernel's wait status; the init kills what the kernel left
};

inline constexpr uint32_t kPty = 1;        // a pseudo-terminal is stdin, stdout and stderr
inline constexpr uint32_t kStdinPipe = 2;  // pipes: a pipe is stdin (else /dev/null)

struct Header {
  uint32_t magic = kMagic;
  Op op = Op::kStart;
  uint32_t id = 0;
  int32_t pid = 0;
  int32_t value = 0;
  uint32_t flags = 0;
  uint16_t rows = 0, cols = 0;
  uint32_t argc = 0, envc = 0;
  uint32_t payload = 0;  // bytes after the header
  char step[48] = {};
};

}  // namespace init_wire

// A kernel's descriptors (PlaceKernelDescriptors): its channel, a socket to the init, which
// relays the host's requests to it; and, until it is ready, the host's socket, on which it
// writes its ready byte (the host reads the kernel's pid from its credentials) and no more.
inline constexpr int kKernelChannelFd = 3;
inline constexpr int kKernelReadyFd = 4;

// How the init starts a new kernel: in a fork of itself, with its descriptors placed and the
// root's layer (a session's, else -1) as it is, `run` becomes the kernel (it does not return);
// `ready` is kKernelReadyFd.
struct KernelStart {
  void (*run)(const void* context, int ready, int layer) noexcept = nullptr;
  const void* context = nullptr;
  int layer = -1;
};

// The kernel's channel as the init holds it: `host`, the host's socket (the requests come on
// it; only a 'D' goes back), and `kernel`, the init's end of the pair whose other end is the
// kernel's kKernelChannelFd. The code can write to its channel, and it reaches the init only:
// the init passes the host's bytes and descriptors down, takes nothing up but the marker (any
// other byte is dropped, any descriptor closed), and the host still checks that marker
// (done_check.h). Both close-on-exec; the init closes them when the kernel ends, so the host
// sees its socket hang up.
struct KernelChannel {
  int host = -1;
  int kernel = -1;
};

// In a process about to become a kernel (the init's fork): `kernel_end` at kKernelChannelFd,
// `host` at kKernelReadyFd (close-on-exec), and every other descriptor but 0-2 and `layer`
// closed (the init's socket to the host, the relay's, /proc, the signalfd). False if a dup
// failed. Allocation-free.
bool PlaceKernelDescriptors(int host, int kernel_end, int layer) noexcept;

// A session with network (jail/loopback.h): the relay's listener on the sandbox's loopback and
// the connector to the host's proxy. The init passes each connection on as it is; both
// descriptors are close-on-exec, and the kernels it forks close them.
struct SessionRelay {
  int listener = -1;
  int connector = -1;
};

// The session's init, in the locked-down process right after it forked `kernel`: serves the
// host on `host_fd` until the host closes it, then ends everything else and exits; with
// `relay`, relays the sandbox's connections to the host meanwhile. Single-threaded; between each
// of its own clones and the exec no allocation happens (see session_init.cc).
[[noreturn]] void RunSessionInit(int host_fd, pid_t kernel, const KernelChannel& channel,
                                 const KernelStart& start, const SessionRelay& relay = {}) noexcept;

}  // namespace execbox::jail
