#include "tests/loopback_cluster.h"

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "granary/v1/cluster.pb.h"

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

LoopbackCluster::LoopbackCluster(int silos, silo::RouterOptions router)
    : net_(&clock_) {
  router.clock = &clock_;
  for (int i = 0; i < silos; ++i) {
    auto node = std::make_unique<Node>();
    node->address = absl::StrCat("10.0.0.", i + 1, ":11111");
    node->id = absl::StrCat(node->address, "@1");
    silo::SiloOptions options;
    options.name = node->id;
    options.workers = 2;
    options.idle_spin = 0;
    options.clock = &clock_;
    node->silo = std::make_unique<silo::Silo>(options);
    (void)node->silo->AddGrain<LocatedGrain>();
    (void)node->silo->AddGrain<HashedGrain>();
    node->partition.set_self_id(node->id);
    node->transport =
        std::make_unique<silo::LoopbackTransport>(&net_, node->id);
    node->directory = std::make_unique<directory::DirectoryClient>(
        &node->partition, node->transport.get());
    node->router = std::make_unique<silo::ClusterRouter>(
        node->silo.get(), &node->partition, node->directory.get(),
        node->transport.get(), router);
    node->silo->SetRouter(node->router.get());
    nodes_.push_back(std::move(node));
  }
}

LoopbackCluster::~LoopbackCluster() { Stop(); }

absl::Status LoopbackCluster::Start() {
  GRANARY_RETURN_IF_ERROR(net_.Start());
  for (auto& node : nodes_) {
    GRANARY_RETURN_IF_ERROR(node->router->Start());
    GRANARY_RETURN_IF_ERROR(node->silo->Start());
    net_.Attach(node->id, node->address, node->silo.get(), &node->partition);
    node->running = true;
  }
  PublishView();
  return absl::OkStatus();
}

void LoopbackCluster::Stop() {
  for (auto& node : nodes_) {
    if (!node->running) continue;
    node->running = false;
    net_.Detach(node->id);
    node->silo->Stop();
  }
  net_.Stop();
  for (auto& node : nodes_) {
    node->router->Stop();
    node->transport->Stop();
  }
}

int LoopbackCluster::IndexOf(const std::string& id) const {
  for (int i = 0; i < size(); ++i) {
    if (nodes_[i]->id == id) return i;
  }
  return -1;
}

void LoopbackCluster::PublishView() {
  v1::MembershipView view;
  view.set_version(++version_);
  for (const auto& node : nodes_) {
    v1::Member* m = view.add_members();
    m->set_address(node->address);
    m->set_generation(1);
    m->set_status(node->status);
    m->set_gateway(node->address);
  }
  // Partitions first: a rebuild report sent on a router's view change then
  // finds every owner on the same view (else it waits for a retry, which
  // only an advance of the fake clock runs).
  for (auto& node : nodes_) {
    if (node->running) node->partition.OnView(view);
  }
  for (auto& node : nodes_) {
    if (node->running) node->transport->OnView(view);
  }
  for (auto& node : nodes_) {
    if (node->running) node->router->OnView(view);
  }
}

void LoopbackCluster::Kill(int i) {
  Node& node = *nodes_[i];
  node.running = false;
  net_.Detach(node.id);
  node.router->Stop();
  node.silo->Stop();
  node.status = v1::MEMBER_DEAD;
  PublishView();
}

void LoopbackCluster::BeginLeave(int i) {
  nodes_[i]->status = v1::MEMBER_SHUTTING_DOWN;
  PublishView();
}

bool WaitUntil(const std::function<bool()>& pred, absl::Duration limit) {
  const absl::Time give_up = absl::Now() + limit;
  while (!pred()) {
    if (absl::Now() > give_up) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return true;
}

}  // namespace granary::testing
