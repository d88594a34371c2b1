#include "gateway/settings/bounded_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace inspection::settings {

std::string ByteBound(std::size_t bytes) {
  return bytes >= (std::size_t{1} << 20) ? absl::StrCat(bytes, " bytes (", bytes >> 20, " MiB)")
                                         : absl::StrCat(bytes, " bytes (", bytes >> 10, " KiB)");
}

namespace {

absl::Status OsError(int error) {
  return absl::InvalidArgumentError(std::generic_category().message(error));
}

// Reads `fd` to its end or to max_bytes + 1 bytes, whichever comes first.
absl::StatusOr<std::string> ReadUpTo(int fd, std::size_t max_bytes) {
  std::string contents;
  char buffer[4096];
  while (contents.size() <= max_bytes) {
    const std::size_t want = std::min(sizeof(buffer), max_bytes + 1 - contents.size());
    const ssize_t n = ::read(fd, buffer, want);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return OsError(errno);
    if (n == 0) break;
    contents.append(buffer, static_cast<std::size_t>(n));
  }
  if (contents.size() > max_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat("larger than ", ByteBound(max_bytes)));
  }
  return contents;
}

}  // namespace

absl::StatusOr<std::string> ReadBoundedFile(const std::string& path, std::size_t max_bytes) {
  // O_NONBLOCK: opening a FIFO for reading otherwise waits for a writer, forever.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return OsError(errno);
  struct stat info;
  absl::StatusOr<std::string> contents;
  if (::fstat(fd, &info) != 0) {
    contents = OsError(errno);
  } else if (!S_ISREG(info.st_mode)) {
    contents = absl::InvalidArgumentError(
        S_ISDIR(info.st_mode) ? "is a directory, not a regular file"
                              : "not a regular file (a FIFO, device or socket is not read)");
  } else if (static_cast<std::uint64_t>(info.st_size) > max_bytes) {
    contents = absl::ResourceExhaustedError(absl::StrCat("larger than ", ByteBound(max_bytes)));
  } else {
    // A regular file never blocks; clearing O_NONBLOCK anyway keeps read()'s plain meaning.
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    contents = ReadUpTo(fd, max_bytes);
  }
  ::close(fd);
  return contents;
}

bool IsTooLarge(const absl::Status& status) {
  return status.code() == absl::StatusCode::kResourceExhausted;
}

}  // namespace inspection::settings
