#include "tests/cluster_grains.h"

#include <atomic>
#include <string>

namespace granary::testing {
namespace {

std::atomic<uint64_t> next_activation{1};

clustertest::Location Here(const std::string& silo, uint64_t activation) {
  clustertest::Location l;
  l.set_silo(silo);
  l.set_activation(activation);
  return l;
}

}  // namespace

LocatedGrain::LocatedGrain() : activation_(next_activation.fetch_add(1)) {}

Task<clustertest::Location> LocatedGrain::Where(
    const clustertest::WhereRequest&) {
  co_return Here(SiloName(), activation_);
}

Task<clustertest::Location> LocatedGrain::Chain(
    const clustertest::HopRequest& r) {
  clustertest::Location last = Here(SiloName(), activation_);
  for (const std::string& key : r.keys()) {
    last = co_await GetGrain<clustertest::LocatedRef>(key).Where(
        clustertest::WhereRequest());
  }
  co_return last;
}

HashedGrain::HashedGrain() : activation_(next_activation.fetch_add(1)) {}

Task<clustertest::Location> HashedGrain::Where(
    const clustertest::WhereRequest&) {
  co_return Here(SiloName(), activation_);
}

BilledGrain::BilledGrain() : activation_(next_activation.fetch_add(1)) {}

Task<clustertest::Location> BilledGrain::Where(
    const clustertest::WhereRequest&) {
  co_return Here(SiloName(), activation_);
}

PooledGrain::PooledGrain() : activation_(next_activation.fetch_add(1)) {}

Task<clustertest::Location> PooledGrain::Where(
    const clustertest::WhereRequest&) {
  co_return Here(SiloName(), activation_);
}

MoverGrain::MoverGrain() : activation_(next_activation.fetch_add(1)) {
  PersistState(&tally_);
}

clustertest::CountReply MoverGrain::Reply() const {
  clustertest::CountReply reply;
  *reply.mutable_at() = Here(SiloName(), activation_);
  reply.set_total(tally_.total());
  reply.set_unsaved(unsaved_);
  return reply;
}

Task<clustertest::CountReply> MoverGrain::Count(
    const clustertest::CountRequest& r) {
  clustertest::CountReply reply = Reply();
  auto last = tally_.last().find(r.caller());
  reply.set_previous(last == tally_.last().end() ? 0 : last->second);
  (*tally_.mutable_last())[r.caller()] = r.seq();
  tally_.set_total(tally_.total() + 1);
  if (r.write()) {
    co_await WriteState();
    unsaved_ = 0;
  } else {
    ++unsaved_;
  }
  reply.set_total(tally_.total());
  reply.set_unsaved(unsaved_);
  co_return reply;
}

Task<clustertest::Location> MoverGrain::Move(const clustertest::MoveRequest&) {
  MigrateOnIdle();
  co_return Here(SiloName(), activation_);
}

Task<clustertest::CountReply> MoverGrain::Where(
    const clustertest::WhereRequest&) {
  co_return Reply();
}

void MoverGrain::OnDehydrate(std::string* extra) {
  *extra = std::to_string(unsaved_);
}

void MoverGrain::OnRehydrate(const std::string& extra) {
  unsaved_ = extra.empty() ? 0 : std::stoll(extra);
}

}  // namespace granary::testing
