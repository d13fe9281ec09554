// Fuzzes membership rows and their validation: the input is a
// granary.v1.MembershipView, whose members are rows as a membership table
// stores them (PostgreSQL keeps each as the bytes of a granary.v1.Member).
// Each row is decoded as PostgresMembershipTable decodes a stored one,
// checked by ValidateMember (storage/membership_table.h) and
// AuthorizeMemberWrite (silo/cluster/membership_service.h) for three
// peers, and written through MembershipService::Write, called directly
// (gRPC's test reactor, no server) on an InMemoryMembershipTable.
//
// The view's version is the version every write expects; 0 stands for
// "the table's current one", so most writes reach the table. The table
// judges votes at a fixed time (kNowMs) by the default VoteRules.
//
// Oversized rows and views without oversized inputs: a member whose
// `activations` is negative is padded with -activations grain types (up
// to 1,100 of about 250 bytes: past kMaxGrainTypes and kMaxMemberBytes), and
// one whose `start_unix_ms` is negative is written -start_unix_ms times (up to
// 300; 400 rows in all), each time with the next generation (a row flood
// from one host).
//
// Checked:
//   - a stored row decodes to the same member;
//   - a peer that speaks for no host is never allowed to add a row;
//   - the service refuses a row as INVALID_ARGUMENT exactly when
//     ValidateMember does (once the write is authorized and expected);
//   - a successful write advances the version by one and stores the row as
//     NormalizeMember leaves it; a refused one changes nothing, or only
//     purges Dead rows in a version of its own;
//   - a successful write that declares a row Dead with a new vote carries
//     VotesNeeded counted votes;
//   - the view never takes more than kMaxViewBytes, nor one host more than
//     kMaxLiveRowsPerHost rows that are not Dead;
//   - the table holds only valid rows, at most kMaxMembers, one per
//     address and generation.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "core/address.h"
#include "core/clock.h"
#include "core/member.h"
#include "fuzz/fuzz_support.h"
#include "google/protobuf/util/message_differencer.h"
#include "granary/v1/cluster.pb.h"
#include "grpcpp/server_context.h"
#include "grpcpp/test/default_reactor_test_peer.h"
#include "rpc/credentials.h"
#include "silo/cluster/membership_service.h"
#include "storage/membership_table.h"
#include "storage/postgres/postgres_membership_table.h"

namespace granary::fuzz {
namespace {

using google::protobuf::util::MessageDifferencer;

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "membership: %s\n", what.c_str());
  std::abort();
}

const v1::Member* FindRow(const v1::MembershipView& view, const v1::Member& m) {
  const v1::Member* found = nullptr;
  for (const v1::Member& row : view.members()) {
    if (row.address() == m.address() && row.generation() == m.generation()) {
      found = &row;
    }
  }
  return found;
}

// A TLS peer whose certificate names the host of `address` (when it has
// one).
rpc::PeerAuthority PeerFor(const std::string& address) {
  rpc::PeerAuthority peer;
  std::string host;
  int port = 0;
  if (SplitHostPort(address, &host, &port)) {
    peer.hosts.push_back(rpc::CanonicalHost(host));
  }
  return peer;
}

grpc::Status Write(silo::MembershipService& service,
                   const v1::WriteMemberRequest& request,
                   v1::WriteMemberReply* reply) {
  grpc::CallbackServerContext context;
  grpc::testing::DefaultReactorTestPeer peer(&context);
  service.Write(&context, &request, reply);
  if (!peer.test_status_set()) Fail("Write returned without finishing");
  return peer.test_status();
}

constexpr int64_t kNowMs = 1'700'000'000'000;

// The rows `input` stands for, amplified as the header says.
std::vector<v1::Member> Rows(const v1::MembershipView& input) {
  std::vector<v1::Member> rows;
  for (const v1::Member& given : input.members()) {
    v1::Member m = given;
    if (m.activations() < 0) {
      const int64_t pad = std::min<int64_t>(-(m.activations() + 1), 1099) + 1;
      for (int64_t i = 0; i < pad; ++i) {
        m.add_grain_types(absl::StrCat("pad.", i, ".", std::string(240, 'x')));
      }
    }
    const int64_t copies =
        m.start_unix_ms() < 0
            ? std::min<int64_t>(-(m.start_unix_ms() + 1), 299) + 1
            : 1;
    for (int64_t i = 0; i < copies && rows.size() < 400; ++i) {
      rows.push_back(m);
      if (m.generation() < INT64_MAX) m.set_generation(m.generation() + 1);
    }
  }
  return rows;
}

void CheckCaps(const v1::MembershipView& view) {
  if (view.ByteSizeLong() > storage::kMaxViewBytes) {
    Fail(absl::StrCat("the view takes ", view.ByteSizeLong(), " bytes"));
  }
  absl::flat_hash_map<std::string, int> per_host;
  for (const v1::Member& row : view.members()) {
    std::string host;
    int port = 0;
    if (row.status() == v1::MEMBER_DEAD ||
        !SplitHostPort(row.address(), &host, &port)) {
      continue;
    }
    if (++per_host[host] > storage::kMaxLiveRowsPerHost) {
      Fail(absl::StrCat("host ", host, " holds more than ",
                        storage::kMaxLiveRowsPerHost, " live rows"));
    }
  }
}

void Run(const v1::MembershipView& input) {
  FakeClock clock(absl::FromUnixMillis(kNowMs));
  storage::VoteRules rules;
  rules.clock = &clock;
  storage::InMemoryMembershipTable table(rules);
  silo::MembershipService service(&table);
  const rpc::PeerAuthority nobody;
  const rpc::PeerAuthority first =
      PeerFor(input.members_size() > 0 ? input.members(0).address() : "");
  int64_t writes = 0;

  for (const v1::Member& m : Rows(input)) {
    // As PostgresMembershipTable reads a row back.
    v1::Member stored;
    if (!stored.ParseFromString(m.SerializeAsString()) ||
        !MessageDifferencer::Equals(stored, m)) {
      Fail("a stored member row does not decode to the same member");
    }
    (void)storage::ValidateClusterId(m.address());
    (void)MemberId(m);
    (void)IsLive(m);

    const v1::MembershipView before = table.Snapshot();
    const v1::Member* previous = FindRow(before, m);
    const absl::Status valid = storage::ValidateMember(m, previous);
    (void)storage::ValidateMember(m, nullptr);
    if (silo::AuthorizeMemberWrite(nobody, before, m).ok() &&
        previous == nullptr) {
      Fail(absl::StrCat("a peer with no authority may add row ", MemberId(m)));
    }
    (void)silo::AuthorizeMemberWrite(first, before, m);

    v1::WriteMemberRequest request;
    request.set_expected_version(input.version() != 0 ? input.version()
                                                      : before.version());
    *request.mutable_member() = m;
    v1::WriteMemberReply reply;
    const grpc::Status status = Write(service, request, &reply);
    const bool reached =
        request.expected_version() == before.version() &&
        status.error_code() != grpc::StatusCode::PERMISSION_DENIED;
    if (reached && (status.error_code() ==
                    grpc::StatusCode::INVALID_ARGUMENT) != !valid.ok()) {
      Fail(absl::StrCat("Write answered ", status.error_code(), " ",
                        status.error_message(), " but ValidateMember says ",
                        valid.ToString()));
    }
    if (!status.ok()) {
      // A refused write changes nothing, but for Dead rows it purged to
      // make room: then the table moved one version, and lost rows.
      const v1::MembershipView after = table.Snapshot();
      if (after.version() != before.version()) {
        if (after.version() != before.version() + 1 ||
            after.members_size() >= before.members_size()) {
          Fail(absl::StrCat("a refused write of ", MemberId(m),
                            " moved the table from ", before.version(), " to ",
                            after.version()));
        }
        ++writes;
      }
      CheckCaps(after);
    }
    if (status.ok()) {
      ++writes;
      const v1::MembershipView after = table.Snapshot();
      const v1::Member* row = FindRow(after, m);
      v1::Member stored = m;
      storage::NormalizeMember(stored);
      if (reply.version() != before.version() + 1 ||
          after.version() != reply.version() || row == nullptr ||
          !MessageDifferencer::Equals(*row, stored)) {
        Fail(absl::StrCat("write of ", MemberId(m), " answered version ",
                          reply.version(), " after ", before.version(),
                          " and left the table at ", after.version()));
      }
      bool added = false;
      for (const v1::Suspicion& v : m.suspicions()) {
        bool kept = false;
        if (previous != nullptr) {
          for (const v1::Suspicion& p : previous->suspicions()) {
            kept =
                kept || (p.by() == v.by() && p.at_unix_ms() == v.at_unix_ms());
          }
        }
        added = added || !kept;
      }
      if (added && m.status() == v1::MEMBER_DEAD && previous != nullptr &&
          previous->status() != v1::MEMBER_DEAD &&
          storage::CountVotes(before, m, rules, kNowMs) <
              storage::VotesNeeded(before, m, rules, kNowMs)) {
        Fail(
            absl::StrCat(MemberId(m), " was declared dead with too few votes"));
      }
      CheckCaps(after);
    }
  }

  const v1::MembershipView end = table.Snapshot();
  if (end.version() != writes || end.members_size() > storage::kMaxMembers) {
    Fail(absl::StrCat("table at version ", end.version(), " with ",
                      end.members_size(), " rows after ", writes, " changes"));
  }
  absl::flat_hash_set<std::pair<std::string, int64_t>> ids;
  for (const v1::Member& row : end.members()) {
    if (!storage::ValidateMember(row, nullptr).ok()) {
      Fail(absl::StrCat("the table holds an invalid row ", MemberId(row)));
    }
    if (!ids.emplace(row.address(), row.generation()).second) {
      Fail(absl::StrCat("the table holds two rows of ", MemberId(row)));
    }
  }
}

}  // namespace
}  // namespace granary::fuzz

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  granary::fuzz::QuietLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > granary::fuzz::kMaxInputBytes) return -1;
  granary::v1::MembershipView view;
  if (!view.ParseFromArray(data, static_cast<int>(size))) return 0;
  granary::fuzz::Run(view);
  return 0;
}
