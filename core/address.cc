#include "core/address.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include "absl/strings/numbers.h"

namespace granary {

bool SplitHostPort(const std::string& address, std::string* host, int* port) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0) return false;
  if (!absl::SimpleAtoi(address.substr(colon + 1), port)) return false;
  if (*port < 0 || *port > 65535) return false;
  *host = address.substr(0, colon);
  return true;
}

bool IsLoopbackHost(const std::string& host) {
  if (host == "localhost") return true;
  in_addr v4;
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) {
    return (ntohl(v4.s_addr) >> 24) == 127;
  }
  std::string h = host;
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') {
    h = h.substr(1, h.size() - 2);
  }
  in6_addr v6;
  if (inet_pton(AF_INET6, h.c_str(), &v6) == 1) {
    return IN6_IS_ADDR_LOOPBACK(&v6);
  }
  return false;
}

}  // namespace granary
