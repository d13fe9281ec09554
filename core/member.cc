#include "core/member.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace granary {

std::string MemberId(const v1::Member& m) {
  return absl::StrCat(m.address(), "@", m.generation());
}

bool IsLive(const v1::Member& m) {
  return m.status() == v1::MEMBER_JOINING || m.status() == v1::MEMBER_ACTIVE ||
         m.status() == v1::MEMBER_SHUTTING_DOWN;
}

std::string HostedTypesText(const v1::Member& m, bool fingerprints) {
  std::vector<std::string> out;
  if (m.hosted_types_size() == m.grain_types_size()) {
    for (const v1::HostedType& h : m.hosted_types()) {
      out.push_back(fingerprints
                        ? absl::StrFormat("%s v%d (%08x)", h.type(),
                                          h.version(), h.fingerprint() >> 32)
                        : absl::StrCat(h.type(), " v", h.version()));
    }
  } else {
    for (const std::string& t : m.grain_types()) {
      out.push_back(absl::StrCat(t, " v1"));
    }
  }
  return absl::StrJoin(out, ", ");
}

std::string LabelsText(const v1::Member& m) {
  std::vector<std::string> out;
  for (const v1::Label& l : m.labels()) {
    out.push_back(absl::StrCat(l.key(), "=", l.value()));
  }
  return absl::StrJoin(out, ",");
}

namespace {

std::string Bytes(int64_t b) {
  const double d = static_cast<double>(b);
  if (b >= (int64_t{1} << 30))
    return absl::StrFormat("%.1f GiB", d / (1 << 30));
  return absl::StrFormat("%.1f MiB", d / (1 << 20));
}

}  // namespace

std::string LoadText(const v1::Member& m) {
  if (!m.has_load() || m.load().memory_bytes() <= 0) return "";
  const v1::SiloLoad& l = m.load();
  std::string out =
      absl::StrFormat("cpu %.1f%%, memory %s", l.cpu_permille() / 10.0,
                      Bytes(l.memory_bytes()));
  if (l.memory_limit_bytes() > 0) {
    absl::StrAppend(&out, " of ", Bytes(l.memory_limit_bytes()));
  }
  return out;
}

}  // namespace granary
