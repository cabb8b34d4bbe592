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

// Mounts everything, pivots into the new root and makes it read-only.
StepError BuildFilesystem(const ChildPlan& plan) noexcept;

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

}  // namespace execbox::jail
