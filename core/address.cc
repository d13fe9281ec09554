#include "core/address.h"

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

}  // namespace granary
