// A rolling upgrade under load on a PostgreSQL cluster (docs/upgrades.md).
// Release N is three granary-silo processes loading
// tests/upgrade/v1 (Counter in version 1); release N+1 loads tests/upgrade/v2
// (Counter in version 2, with a new method Describe, and a new grain type
// Invoice). The silos are replaced one by one, gracefully, while clients of
// both releases keep calling: release N's clients Add to counters, release
// N+1's (from the moment the first upgraded silo is up) Add, Describe and
// Bill. Every call must succeed: a call that reaches a silo of release N for
// a type or method it lacks is passed on to a silo that has it, and a
// counter whose activation lives on an old silo moves to a new one when a
// call needs Describe. The counters and invoices end exact.
#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/client.h"
#include "core/grain_interface.h"
#include "core/testing/status_matchers.h"
#include "granary/v1/gateway.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "tests/cluster_load.h"
#include "tests/postgres_cluster_fixture.h"
#include "tests/upgrade/v2/upgrade_counter.granary.h"

namespace granary::testing {
namespace {

using ::granary::matchers::IsOk;
using upgradetest::AddRequest;
using upgradetest::BillRequest;
using upgradetest::CounterValue;
using upgradetest::DescribeRequest;
using upgradetest::GetRequest;
using upgradetest::InvoiceTotal;

// Counter as release N's clients know it: version 1, without Describe (its
// messages are the same on the wire as release N+1's).
const MethodInfo kCounterV1Methods[] = {
    {0, "Add", "/granary.upgradetest.Counter/Add", false, false, false, nullptr,
     false},
    {1, "Get", "/granary.upgradetest.Counter/Get", false, true, false, nullptr,
     false},
};
const InterfaceInfo kCounterV1{"granary.upgradetest.Counter",
                               false,
                               0,
                               0,
                               kCounterV1Methods,
                               2,
                               nullptr,
                               false,
                               0,
                               /*version=*/1,
                               0,
                               ""};

std::string Library(const char* name) {
  return absl::StrCat("--grain_library=", GRANARY_UPGRADE_LIBRARY_DIR, "/lib",
                      name, ".so");
}

class RollingUpgradeTest : public PostgresClusterTest {
 protected:
  void SetUp() override {
    extra_args_ = {Library("upgrade_v1")};
    PostgresClusterTest::SetUp();
  }
};

// Calls of one release's clients, counted per grain.
struct Load {
  std::atomic<bool> stop{false};
  std::atomic<int64_t> calls{0};
  std::mutex mu;
  std::map<std::string, int64_t> added;   // by counter key
  std::map<std::string, int64_t> billed;  // by invoice key
  std::vector<std::string> errors;
  std::vector<std::thread> threads;

  void Fail(const std::string& what) {
    std::lock_guard<std::mutex> lock(mu);
    if (errors.size() < 20) errors.push_back(what);
  }
  void Join() {
    stop = true;
    for (std::thread& t : threads) t.join();
    threads.clear();
  }
};

constexpr int kCounters = 64;

// Release N's client: Add 1 to counters "c<i>" in turn.
void RunV1(Client* client, int thread, Load* load) {
  client->Register(kCounterV1);
  for (int i = thread; !load->stop; i += 3) {
    const std::string key = absl::StrCat("c", i % kCounters);
    AddRequest add;
    add.set_amount(1);
    absl::StatusOr<CounterValue> v =
        internal::Ask<AddRequest, CounterValue>(
            client, GrainId(kCounterV1.type_name, key), 0, add, {})
            .Get();
    if (!v.ok()) {
      load->Fail(absl::StrCat("v1 Add ", key, ": ", v.status().ToString()));
      continue;
    }
    ++load->calls;
    std::lock_guard<std::mutex> lock(load->mu);
    ++load->added[key];
  }
}

// Release N+1's client: Add 10, Describe, and Bill 5 to invoice "i<i>".
void RunV2(Client* client, int thread, Load* load) {
  for (int i = thread; !load->stop; i += 3) {
    const std::string key = absl::StrCat("c", (i * 7) % kCounters);
    auto counter = client->Get<upgradetest::CounterRef>(key);
    AddRequest add;
    add.set_amount(10);
    absl::StatusOr<CounterValue> v = counter.Add(add).Get();
    if (!v.ok()) {
      load->Fail(absl::StrCat("v2 Add ", key, ": ", v.status().ToString()));
      continue;
    }
    {
      std::lock_guard<std::mutex> lock(load->mu);
      load->added[key] += 10;
    }
    absl::StatusOr<CounterValue> d = counter.Describe(DescribeRequest()).Get();
    if (!d.ok()) {
      load->Fail(
          absl::StrCat("v2 Describe ", key, ": ", d.status().ToString()));
    } else if (d->version() != 2) {
      load->Fail(absl::StrCat("Describe of ", key, " answered by version ",
                              d->version()));
    }
    const std::string invoice = absl::StrCat("i", i % 16);
    BillRequest bill;
    bill.set_cents(5);
    absl::StatusOr<InvoiceTotal> t =
        client->Get<upgradetest::InvoiceRef>(invoice).Bill(bill).Get();
    if (!t.ok()) {
      load->Fail(absl::StrCat("Bill ", invoice, ": ", t.status().ToString()));
      continue;
    }
    load->calls += 3;
    std::lock_guard<std::mutex> lock(load->mu);
    load->billed[invoice] += 5;
  }
}

TEST_F(RollingUpgradeTest, SilosUpgradedOneByOneUnderLoadFailNoCall) {
  std::unique_ptr<Client> v1_client = ConnectAll();
  ASSERT_NE(v1_client, nullptr);
  Load v1;
  for (int t = 0; t < 3; ++t) {
    v1.threads.emplace_back(RunV1, v1_client.get(), t, &v1);
  }
  ASSERT_TRUE(Eventually([&] { return v1.calls >= 300; }));

  std::unique_ptr<Client> v2_client;
  Load v2;
  for (size_t i = 0; i < silos_.size(); ++i) {
    for (std::string& arg : silo_args_[i]) {
      if (arg == Library("upgrade_v1")) arg = Library("upgrade_v2");
    }
    ASSERT_NO_FATAL_FAILURE(Restart(i, 3));
    if (v2_client == nullptr) {
      // Release N+1's clients start once a silo of theirs is up, and may
      // reach it through any gateway.
      v2_client = ConnectAll();
      ASSERT_NE(v2_client, nullptr);
      for (int t = 0; t < 3; ++t) {
        v2.threads.emplace_back(RunV2, v2_client.get(), t, &v2);
      }
    }
    const int64_t v1_before = v1.calls;
    const int64_t v2_before = v2.calls;
    ASSERT_TRUE(Eventually([&] {
      return v1.calls >= v1_before + 300 && v2.calls >= v2_before + 300;
    })) << "silo "
        << i << " upgraded: v1 calls " << v1.calls - v1_before << ", v2 calls "
        << v2.calls - v2_before;
  }
  v1.Join();
  v2.Join();
  std::cout << "calls: release N clients " << v1.calls
            << ", release N+1 clients " << v2.calls << "\n";
  EXPECT_TRUE(v1.errors.empty()) << absl::StrJoin(v1.errors, "\n");
  EXPECT_TRUE(v2.errors.empty()) << absl::StrJoin(v2.errors, "\n");

  // Every counter and invoice holds exactly what was added, and answers
  // from version 2 now that every silo runs it.
  std::map<std::string, int64_t> added = v1.added;
  for (const auto& [key, n] : v2.added) added[key] += n;
  for (const auto& [key, n] : added) {
    absl::StatusOr<CounterValue> v =
        v2_client->Get<upgradetest::CounterRef>(key).Get(GetRequest()).Get();
    ASSERT_TRUE(v.ok()) << key << ": " << v.status();
    EXPECT_EQ(v->value(), n) << key;
    EXPECT_EQ(v->version(), 2u) << key;
  }
  for (const auto& [key, n] : v2.billed) {
    BillRequest none;
    absl::StatusOr<InvoiceTotal> t =
        v2_client->Get<upgradetest::InvoiceRef>(key).Bill(none).Get();
    ASSERT_TRUE(t.ok()) << key << ": " << t.status();
    EXPECT_EQ(t->cents(), n) << key;
  }
  v1_client->Close();
  v2_client->Close();
}

// What a silo does with requests whose type or method it lacks, spoken
// in the gateway protocol as a client in another language would: passed on
// when a silo hosts the type (here Counter.Describe, which only release N+1
// has, once one silo runs it), refused at once otherwise, and bad method
// paths refused as such.
// Reminders of a type only the new release has tick while old silos,
// which do not know the type, own their range of the ring: the grains
// register them with the old silos, and the old silos pass each tick on to
// the grain's silo.
TEST_F(RollingUpgradeTest, RemindersOfANewTypeTickFromOldSilos) {
  for (std::string& arg : silo_args_[0]) {
    if (arg == Library("upgrade_v1")) arg = Library("upgrade_v2");
  }
  ASSERT_NO_FATAL_FAILURE(Restart(0, 3));
  std::unique_ptr<Client> client = ConnectAll();
  ASSERT_NE(client, nullptr);
  constexpr int kInvoices = 24;
  for (int i = 0; i < kInvoices; ++i) {
    absl::StatusOr<InvoiceTotal> t =
        client->Get<upgradetest::InvoiceRef>(absl::StrCat("r", i))
            .Remind(upgradetest::RemindRequest())
            .Get();
    ASSERT_THAT(t.status(), IsOk()) << "invoice r" << i;
  }
  // Each bills itself a cent a second: every one of them gets 2 ticks.
  int behind = kInvoices;
  EXPECT_TRUE(Eventually(
      [&] {
        behind = 0;
        for (int i = 0; i < kInvoices; ++i) {
          absl::StatusOr<InvoiceTotal> t =
              client->Get<upgradetest::InvoiceRef>(absl::StrCat("r", i))
                  .Bill(BillRequest())
                  .Get();
          if (!t.ok() || t->cents() < 2) ++behind;
        }
        return behind == 0;
      },
      absl::Seconds(60)))
      << behind << " invoices had fewer than 2 ticks";
  // Some of their reminders are scheduled by the old silos.
  int64_t old_ticks = 0;
  for (size_t s = 1; s < 3; ++s) {
    old_ticks += std::max<int64_t>(
        0, Metric(https_[s], "granary_reminder_ticks_total{result=\"ok\"}"));
  }
  EXPECT_GT(old_ticks, 0) << "no tick came from a release N silo";
  client->Close();
}

TEST_F(RollingUpgradeTest, UnknownTypesAndMethodsThroughAnOldGateway) {
  for (std::string& arg : silo_args_[0]) {
    if (arg == Library("upgrade_v1")) arg = Library("upgrade_v2");
  }
  ASSERT_NO_FATAL_FAILURE(Restart(0, 3));
  // Silo 1 still runs release N.
  auto channel =
      grpc::CreateChannel(gateways_[1], grpc::InsecureChannelCredentials());
  auto stub = v1::Gateway::NewStub(channel);
  grpc::ClientContext ctx;
  auto stream = stub->Connect(&ctx);
  auto request = [](uint64_t id, const std::string& method,
                    const std::string& key) {
    v1::Request r;
    r.set_id(id);
    r.set_method(method);
    r.set_key(key);
    return r;
  };
  v1::RequestBatch batch;
  *batch.add_requests() =
      request(1, "/granary.upgradetest.Counter/Describe", "d1");
  *batch.add_requests() = request(2, "/granary.upgradetest.Invoice/Bill", "b1");
  *batch.add_requests() = request(3, "/granary.nowhere.Thing/Get", "x");
  *batch.add_requests() = request(4, "/granary.upgradetest.Counter/", "x");
  *batch.add_requests() = request(5, "/a/b/c", "x");
  *batch.add_requests() = request(6, "no-slash", "x");
  v1::Request streaming = request(7, "/granary.upgradetest.Invoice/Watch", "x");
  streaming.set_stream_window(8);
  *batch.add_requests() = streaming;
  v1::Request garbage = request(8, "/granary.upgradetest.Invoice/Bill", "b2");
  garbage.set_payload("\xff\xff\xff\xff");
  *batch.add_requests() = garbage;
  // A version no silo hosts: refused alone, naming it.
  v1::Request future = request(9, "/granary.upgradetest.Counter/Get", "d1");
  future.set_min_version(99);
  *batch.add_requests() = future;
  ASSERT_TRUE(stream->Write(batch));
  std::map<uint64_t, v1::Reply> replies;
  v1::ReplyBatch got;
  while (replies.size() < 9 && stream->Read(&got)) {
    for (const v1::Reply& r : got.replies()) replies[r.id()] = r;
  }
  ASSERT_EQ(replies.size(), 9u);
  EXPECT_EQ(replies[9].code(), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_THAT(replies[9].message(), ::testing::HasSubstr("version 99"));
  EXPECT_EQ(replies[1].code(), 0) << replies[1].message();
  CounterValue described;
  ASSERT_TRUE(described.ParseFromString(replies[1].payload()));
  EXPECT_EQ(described.version(), 2u);
  EXPECT_EQ(replies[2].code(), 0) << replies[2].message();
  EXPECT_EQ(replies[3].code(), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_THAT(replies[3].message(),
              ::testing::HasSubstr("granary.nowhere.Thing"));
  for (uint64_t id : {4, 5}) {
    EXPECT_EQ(replies[id].code(), grpc::StatusCode::INVALID_ARGUMENT)
        << id << ": " << replies[id].message();
  }
  EXPECT_EQ(replies[6].code(), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_EQ(replies[7].code(), grpc::StatusCode::UNIMPLEMENTED)
      << replies[7].message();
  EXPECT_EQ(replies[8].code(), grpc::StatusCode::INVALID_ARGUMENT)
      << replies[8].message();
  stream->WritesDone();
  ctx.TryCancel();
}

}  // namespace
}  // namespace granary::testing
