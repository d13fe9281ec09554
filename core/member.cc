#include "core/member.h"

#include "absl/strings/str_cat.h"

namespace granary {

std::string MemberId(const v1::Member& m) {
  return absl::StrCat(m.address(), "@", m.generation());
}

bool IsLive(const v1::Member& m) {
  return m.status() == v1::MEMBER_JOINING || m.status() == v1::MEMBER_ACTIVE ||
         m.status() == v1::MEMBER_SHUTTING_DOWN;
}

}  // namespace granary
