#include "jail/wire.h"

#include <unistd.h>

#include <cerrno>

namespace execbox::jail::wire {

bool WriteExact(int fd, const void* data, size_t size) noexcept {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = ::write(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

bool ReadExact(int fd, void* data, size_t size) noexcept {
  char* p = static_cast<char*>(data);
  while (size > 0) {
    ssize_t n = ::read(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

void CopyText(char* dest, size_t dest_size, const char* src) noexcept {
  size_t i = 0;
  for (; src != nullptr && src[i] != '\0' && i + 1 < dest_size; ++i) dest[i] = src[i];
  dest[i] = '\0';
}

}  // namespace execbox::jail::wire
