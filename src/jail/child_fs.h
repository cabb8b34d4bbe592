// Child side of the jail's filesystem: builds the root from the plan, places the input files,
// and walks the work dir afterwards. Allocation-free and async-signal-safe: runs after clone.
#pragma once

#include <sys/stat.h>

#include "jail/child_plan.h"

namespace execbox::jail {

// A failed step: a fixed description and the errno.
struct StepError {
  const char* step = nullptr;
  int err = 0;
  explicit operator bool() const { return step != nullptr; }
};

// A fresh procfs for the caller's pid namespace at `target`, with only the pid entries where the
// kernel allows it. 0, or -1 with errno set.
int MountProc(const char* target) noexcept;
// The flags a remount of the mount at `path` must keep inside a user namespace (read-only,
// nosuid, nodev, noexec, atime), as the kernel locked them.
unsigned long LockedFlags(const char* path) noexcept;
// MountProc, or nothing when the kernel refuses a procfs here with EPERM (a container masked
// parts of its own /proc): 1 mounted, 0 going without, -1 with errno for any other failure.
int MountProcIfAllowed(const char* target) noexcept;

// Mounts everything, pivots into the new root and makes it read-only. Adds wire::kWithoutProc
// to `without` when the kernel refused the procfs (MountProcIfAllowed).
StepError BuildFilesystem(const ChildPlan& plan, int64_t& without) noexcept;

// Reads kInputFile messages from the control socket into the work dir until kInputsDone.
StepError ReceiveInputs(const ChildPlan& plan) noexcept;

// Sends every regular file under the work dir as kOutputFile (never following a symlink or
// opening a special file), and a kSkippedFile for each one passed over.
void SendOutputs(const ChildPlan& plan) noexcept;
// The same, for the files `filter` wants (a session's execution: those it changed). The
// session's processes live on meanwhile: sizes are taken once, so a file changing under the
// walk cannot break the framing.
struct FileFilter {
  void* context;
  bool (*wanted)(void* context, const char* path, const struct stat& st);
};
void SendOutputsFiltered(const ChildPlan& plan, const FileFilter* filter) noexcept;
// The same, beneath `workfd` (the work dir, held by descriptor; plan.work_dir is not used):
// for the zygote, which holds each child's work dir from outside its mount namespace.
void SendOutputsBeneath(const ChildPlan& plan, int workfd, const FileFilter* filter) noexcept;

// A session's files between executions: the zygote's side of kReadFile and kWriteFile. `workfd`
// is the work dir; `path` a plain relative path (PlainRelativePath). Neither call follows a
// symbolic link at any component, leaves the work dir or crosses a mount, opens anything but a
// regular file or a directory, or blocks on what the code planted (a FIFO, a lease). The code's
// processes may live on meanwhile and change the tree under the call: each step holds the
// directory it reached by descriptor, so a swap can make the call fail, never go elsewhere.

// True for "a/b/c": no empty, "." or ".." component, no NUL, not absolute, shorter than 4096.
bool PlainRelativePath(const char* path, size_t len) noexcept;
// kFileData with the regular file's content (when it holds at most max_bytes), then kFileResult;
// or kFileResult alone with why not: ENOENT for a missing path, a directory, a FIFO or anything
// else that is not a regular file; ELOOP when a component is a symbolic link; EFBIG when larger.
void SendOneFile(int control, int workfd, const char* path, uint64_t max_bytes) noexcept;
// Reads `size` bytes from `control` into `path`, creating missing parent directories (0755).
// The content goes to a new file beside the target that is renamed over it: whatever was there
// (a file, a symbolic link, a FIFO) is replaced, never opened or followed; a directory there, or
// a parent that is not a directory (a symbolic link included), fails. Ends with kFileResult,
// unless `control` broke off mid-content.
enum class Received {
  kWritten,    // `*written` is the new file's stat
  kRefused,    // the reason was sent
  kBrokenOff,  // the content did not all arrive: nothing was sent
};
Received ReceiveOneFile(int control, int workfd, const char* path, int64_t size,
                        struct stat* written) noexcept;

}  // namespace execbox::jail
