// A session child's new kernel (WarmChild::RestartKernel, zygote.h): the init forks it on a
// fresh channel; the host believes its ready byte only from a child of the init, as at spawn.
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>

#include "jail/init_link.h"
#include "jail/warm_host.h"
#include "jail/zygote.h"

namespace execbox::jail {
namespace {

// The init answers at once; a new kernel is a fork of the warm interpreter (no imports).
constexpr auto kKernelEndWait = std::chrono::seconds(5);
constexpr auto kKernelReadyWait = std::chrono::seconds(20);

}  // namespace

Status WarmChild::RestartKernel() {
  if (!options_.session || !init_ || init_->closed()) return Fail("the session's sandbox has ended");
  alive_ = false;
  // A kernel that still runs (its channel broke, say) is ended first; its init reports it.
  if (kernel_pidfd_.Valid()) ::syscall(SYS_pidfd_send_signal, kernel_pidfd_.Get(), SIGKILL, nullptr, 0);
  if (!init_->AwaitKernelStatus(std::chrono::duration_cast<std::chrono::milliseconds>(kKernelEndWait)))
    return Fail("the session's init did not report its kernel's end");

  auto channel = StreamPair();
  if (!channel) return std::unexpected(channel.error());
  int on = 1;
  if (::setsockopt(channel->first.Get(), SOL_SOCKET, SO_PASSCRED, &on, sizeof on) != 0)
    return FailErrno("SO_PASSCRED");
  if (auto sent = init_->NewKernel(channel->second.Get()); !sent) return std::unexpected(sent.error());
  channel->second.Reset();

  const auto deadline = Clock::now() + kKernelReadyWait;
  int chan = channel->first.Get();
  if (!WaitReadable(chan, deadline)) return Fail("the session's new kernel did not become ready in time");
  char buf[256] = {};
  pid_t kernel = -1;
  ssize_t n = RecvWithPid(chan, buf, sizeof buf - 1, kernel);
  if (n > 1 && buf[0] == 'F') return Fail(std::string("the session's new kernel failed at ") + (buf + 1));
  if (n != 1 || buf[0] != 'R') return Fail("the session's new kernel ended before it was ready");
  int off = 0;
  (void)::setsockopt(chan, SOL_SOCKET, SO_PASSCRED, &off, sizeof off);
  auto held = HoldKernel(pid_, kernel);
  if (!held) return std::unexpected(held.error());
  auto code = CodeProcess::Open(kernel, held->Get());
  if (!code) return std::unexpected(Context("the session's new kernel", code.error()));
  channel_ = std::move(channel->first);
  kernel_pidfd_ = std::move(*held);
  kernel_pid_ = kernel;
  code_ = std::move(*code);
  alive_ = true;
  return {};
}

}  // namespace execbox::jail
