#include "silo/systemd_notify.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace granary::silo {

absl::Status NotifySystemd(const std::string& state) {
  const char* path = std::getenv("NOTIFY_SOCKET");
  if (path == nullptr || path[0] == '\0') return absl::OkStatus();
  const size_t len = std::strlen(path);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if ((path[0] != '/' && path[0] != '@') || len >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(
        absl::StrCat("NOTIFY_SOCKET='", path,
                     "' is neither a socket path nor an abstract name"));
  }
  std::memcpy(addr.sun_path, path, len);
  if (path[0] == '@') addr.sun_path[0] = '\0';  // the abstract namespace
  const int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    return absl::UnavailableError(
        absl::StrCat("socket for NOTIFY_SOCKET: ", std::strerror(errno)));
  }
  const auto addr_len =
      static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + len);
  const ssize_t sent =
      sendto(fd, state.data(), state.size(), MSG_NOSIGNAL,
             reinterpret_cast<const sockaddr*>(&addr), addr_len);
  const int error = errno;
  close(fd);
  if (sent < 0) {
    return absl::UnavailableError(
        absl::StrCat("notifying systemd at NOTIFY_SOCKET=", path, ": ",
                     std::strerror(error)));
  }
  return absl::OkStatus();
}

}  // namespace granary::silo
