// File: core/member.h
// -----------------------------------------------------------------------------
// How a member of the membership table (granary.v1.Member) is named and
// whether it is live: shared by the directory, the cluster and the stores.
//
//   std::string id = MemberId(m);   // "10.0.0.2:11111@1700000000000"
//   if (IsLive(m)) ...              // Joining, Active or ShuttingDown
#pragma once

#include <string>

#include "granary/v1/cluster.pb.h"

namespace granary {

// "HOST:PORT@generation": how silos name each other.
std::string MemberId(const v1::Member& m);
// Joining, Active or ShuttingDown: a member that is (still) there.
bool IsLive(const v1::Member& m);
// The grain types `m` hosts with their interface versions ("a.Counter v2,
// a.Invoice v1"; a row without hosted_types hosts each in version 1), with
// the first 32 bits of each fingerprint when `fingerprints` ("a.Counter v2
// (1f2e3d4c)").
std::string HostedTypesText(const v1::Member& m, bool fingerprints = false);
// Its labels, "role=billing,zone=a".
std::string LabelsText(const v1::Member& m);
// Its load as of its heartbeat, "cpu 15.2%, memory 48.0 MiB of 4.0 GiB";
// empty when it reported none.
std::string LoadText(const v1::Member& m);

}  // namespace granary
