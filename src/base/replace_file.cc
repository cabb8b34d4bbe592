#include "base/replace_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "base/io.h"
#include "base/unique_fd.h"

namespace execbox {

Status ReplaceFile(const std::string& path, std::string_view data, unsigned mode) {
  const std::string temp = path + ".new";
  UniqueFd fd(::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, mode));
  if (!fd.Valid()) return FailErrno("write " + temp);
  if (auto w = WriteAll(fd.Get(), data); !w) {
    ::unlink(temp.c_str());
    return std::unexpected(w.error());
  }
  fd.Reset();
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(temp.c_str());
    return FailErrno("replace " + path, err);
  }
  return {};
}

}  // namespace execbox
