// The silo-to-silo port: mutual TLS against the cluster CA only, a dev
// cluster on mutual TLS that forwards the caller's identity and errors
// quoting non-UTF-8 keys, and authorization between silos: an
// authenticated silo writes only its own membership row and votes, and
// touches only its own directory entries; forged requests change nothing;
// a compromised member can neither kill nor flood the others.
#include <algorithm>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/client.h"
#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "granary/v1/cluster.grpc.pb.h"
#include "granary/v1/reminders.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "rpc/credentials.h"
#include "silo/cluster/membership_service.h"
#include "silo/silo_host.h"
#include "storage/membership_table.h"
#include "tests/test_grains.granary.h"
#include "tests/tls_fixture.h"

namespace granary::testing {
namespace {

using ::granary::matchers::IsOk;
using ::granary::matchers::StatusIs;
using ::testing::HasSubstr;

TEST(ClusterTlsTest, TheSiloPortAcceptsOnlyTheClusterCa) {
  const Certs& c = Certs::Get();
  std::unique_ptr<Host> h = StartHost(WithClusterTls(AnyPorts()));
  ASSERT_NE(h, nullptr);
  const std::string silo = h->host->silo_address();
  // Every silo port answers probes.
  auto status_of = [&silo](const rpc::ClientSecurity& s) {
    return UnaryBytes(silo, s, "/granary.v1.SiloControl/Probe", "")
        .status()
        .code();
  };
  auto silo_client = [&c](const std::string& prefix, const std::string& ca) {
    rpc::ClientSecurity s = ClientCert(prefix, ca);
    s.check_hostname = false;
    return s;
  };
  EXPECT_EQ(status_of(rpc::ClientSecurity()), absl::StatusCode::kUnavailable);
  EXPECT_EQ(status_of(silo_client(c.a("client"), c.a("cluster-ca.pem"))),
            absl::StatusCode::kUnavailable);  // the gateway CA's client cert
  EXPECT_EQ(status_of(silo_client(c.b("silo"), c.a("cluster-ca.pem"))),
            absl::StatusCode::kUnavailable);  // another cluster's
  EXPECT_EQ(status_of(silo_client(c.a("expired-silo"), c.a("cluster-ca.pem"))),
            absl::StatusCode::kUnavailable);
  rpc::ClientSecurity no_cert;
  no_cert.ca_file = c.a("cluster-ca.pem");
  no_cert.check_hostname = false;
  EXPECT_EQ(status_of(no_cert), absl::StatusCode::kUnavailable);
  EXPECT_EQ(status_of(silo_client(c.a("silo"), c.a("cluster-ca.pem"))),
            absl::StatusCode::kOk);
}

TEST(ClusterTlsTest, ADevClusterRunsOnMutualTlsAndForwardsTheIdentity) {
  const Certs& c = Certs::Get();
  silo::SiloHostOptions primary_options = WithClusterTls(AnyPorts());
  primary_options.cluster = "dev";
  primary_options.auth_tokens = c.a("tokens");
  std::unique_ptr<Host> primary = StartHost(primary_options);
  ASSERT_NE(primary, nullptr);
  silo::SiloHostOptions second_options = primary_options;
  second_options.primary = primary->host->silo_address();
  std::unique_ptr<Host> second = StartHost(second_options);
  ASSERT_NE(second, nullptr);
  ClientOptions options;
  options.gateways = {primary->host->gateway_address()};
  options.gateway_refresh_period = absl::ZeroDuration();  // this one only
  options.location_cache_size = 0;                        // always forwarded
  options.security.token = FirstToken(c.a("tokens"));
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(options);
  ASSERT_THAT(client.status(), IsOk());
  // Grains land on both silos; every one sees the caller, directly or
  // through a chain that crosses silos.
  auto every_grain_sees_the_caller = [&client](int grains) {
    for (int i = 0; i < grains; ++i) {
      Text ask;
      ask.set_text(absl::StrCat("far-", i));
      absl::StatusOr<Text> who =
          (*client)->Get<ProbeRef>(absl::StrCat("near-", i)).Whoami(ask).Get();
      ASSERT_THAT(who.status(), IsOk());
      EXPECT_EQ(who->text(), "dev-client");
    }
  };
  every_grain_sees_the_caller(40);
  EXPECT_GT(second->host->silo()->ActivationCount(), 0u);
  EXPECT_GT(primary->host->silo()->ActivationCount(), 0u);
  // Errors quoting non-UTF-8 keys cross the silo-to-silo stream cleanly,
  // and it goes on carrying calls.
  for (int i = 0; i < 20; ++i) {
    const std::string key = absl::StrCat("bad\xff\xfe", i);
    absl::StatusOr<Text> r = (*client)->Get<FaultyRef>(key).Echo(Text()).Get();
    EXPECT_FALSE(r.ok());
    EXPECT_THAT(std::string(r.status().message()), HasSubstr(key));
  }
  every_grain_sees_the_caller(10);
}

// A client of `gateway` alone that sends every call there (no discovery,
// no location cache): calls for grains of other silos are forwarded.
absl::StatusOr<std::unique_ptr<Client>> ConnectOnlyTo(
    const std::string& gateway) {
  ClientOptions options;
  options.gateways = {gateway};
  options.gateway_refresh_period = absl::ZeroDuration();
  options.location_cache_size = 0;
  return Client::Connect(options);
}

// A dev-cluster silo on `host` (a loopback address) with the certificate of
// that host alone.
silo::SiloHostOptions On(const std::string& host) {
  const Certs& c = Certs::Get();
  silo::SiloHostOptions o = WithClusterTls(AnyPorts());
  o.cluster = "dev";
  o.silo = host + ":0";
  o.cluster_tls_cert = c.a("silo-" + host + ".pem");
  o.cluster_tls_key = c.a("silo-" + host + ".key");
  return o;
}

// A dev cluster of two: the primary on 127.0.0.2 and a silo on 127.0.0.3,
// each with the certificate of its own host. `*second` stays null when
// either fails to start.
void StartPair(std::unique_ptr<Host>* primary, std::unique_ptr<Host>* second) {
  *primary = StartHost(On("127.0.0.2"));
  if (*primary == nullptr) return;
  silo::SiloHostOptions options = On("127.0.0.3");
  options.primary = (*primary)->host->silo_address();
  *second = StartHost(options);
}

TEST(ClusterTlsTest, SilosOnHostsOfTheirOwnCheckEachOthersCertificates) {
  // Two silos on 127.0.0.2 and 127.0.0.3, each with a certificate for its
  // own host only: each dials the other and checks the name.
  std::unique_ptr<Host> primary, second;
  StartPair(&primary, &second);
  ASSERT_NE(second, nullptr);
  absl::StatusOr<std::unique_ptr<Client>> client =
      ConnectOnlyTo(primary->host->gateway_address());
  ASSERT_THAT(client.status(), IsOk());
  for (int i = 0; i < 30; ++i) {
    Text ask;
    ask.set_text(absl::StrCat("far-", i));
    EXPECT_THAT(
        (*client)->Get<ProbeRef>(absl::StrCat("near-", i)).Whoami(ask).Get(),
        IsOk());
  }
  EXPECT_GT(second->host->silo()->ActivationCount(), 0u);
  EXPECT_GT(primary->host->silo()->ActivationCount(), 0u);
}

TEST(SiloAuthorizationTest, AMemberWritesItsOwnRowAndItsOwnVotesOnly) {
  rpc::PeerAuthority me;
  me.hosts = {"10.0.0.1"};
  v1::MembershipView view;
  view.set_version(7);
  v1::Member* mine = view.add_members();
  mine->set_address("10.0.0.1:11111");
  mine->set_generation(1);
  mine->set_status(v1::MEMBER_ACTIVE);
  v1::Member* other = view.add_members();
  other->set_address("10.0.0.2:11111");
  other->set_generation(2);
  other->set_status(v1::MEMBER_ACTIVE);
  v1::Suspicion* old_vote = other->add_suspicions();
  old_vote->set_by("10.0.0.3:11111@3");
  old_vote->set_at_unix_ms(1000);

  // Its own row: any change; a new row only as Joining.
  v1::Member next = *mine;
  next.set_status(v1::MEMBER_SHUTTING_DOWN);
  EXPECT_THAT(silo::AuthorizeMemberWrite(me, view, next), IsOk());
  next.set_generation(9);
  EXPECT_THAT(silo::AuthorizeMemberWrite(me, view, next),
              StatusIs(absl::StatusCode::kPermissionDenied,
                       HasSubstr("starts as Joining")));
  next.set_status(v1::MEMBER_JOINING);
  EXPECT_THAT(silo::AuthorizeMemberWrite(me, view, next), IsOk());
  // Another's row: its vote, and with it Dead.
  next = *other;
  v1::Suspicion* vote = next.add_suspicions();
  vote->set_by("10.0.0.1:11111@1");
  vote->set_at_unix_ms(2000);
  EXPECT_THAT(silo::AuthorizeMemberWrite(me, view, next), IsOk());
  next.set_status(v1::MEMBER_DEAD);
  EXPECT_THAT(silo::AuthorizeMemberWrite(me, view, next), IsOk());
  // Expired votes may go.
  next.mutable_suspicions()->DeleteSubrange(0, 1);
  EXPECT_THAT(silo::AuthorizeMemberWrite(me, view, next), IsOk());
  // But not Dead without a vote, nor a vote in another's name, nor any
  // other change, nor a new row for another host.
  next = *other;
  next.set_status(v1::MEMBER_DEAD);
  EXPECT_THAT(silo::AuthorizeMemberWrite(me, view, next),
              StatusIs(absl::StatusCode::kPermissionDenied));
  next = *other;
  v1::Suspicion* forged = next.add_suspicions();
  forged->set_by("10.0.0.4:11111@4");
  forged->set_at_unix_ms(2000);
  EXPECT_THAT(
      silo::AuthorizeMemberWrite(me, view, next),
      StatusIs(absl::StatusCode::kPermissionDenied, HasSubstr("own name")));
  next = *other;
  next.set_gateway("10.0.0.1:30000");  // calls to the attacker
  EXPECT_THAT(silo::AuthorizeMemberWrite(me, view, next),
              StatusIs(absl::StatusCode::kPermissionDenied));
  next = *other;
  next.set_status(v1::MEMBER_SHUTTING_DOWN);
  vote = next.add_suspicions();
  vote->set_by("10.0.0.1:11111@1");
  EXPECT_THAT(silo::AuthorizeMemberWrite(me, view, next),
              StatusIs(absl::StatusCode::kPermissionDenied));
  next = *other;
  next.set_generation(5);
  next.set_status(v1::MEMBER_JOINING);
  EXPECT_THAT(
      silo::AuthorizeMemberWrite(me, view, next),
      StatusIs(absl::StatusCode::kPermissionDenied, HasSubstr("only its own")));
  // The votes on its own row are not its to change.
  v1::Member suspected = *other;
  rpc::PeerAuthority them;
  them.hosts = {"10.0.0.2"};
  suspected.clear_suspicions();
  EXPECT_THAT(
      silo::AuthorizeMemberWrite(them, view, suspected),
      StatusIs(absl::StatusCode::kPermissionDenied, HasSubstr("its own row")));
  suspected = *other;
  suspected.mutable_suspicions(0)->set_at_unix_ms(1);
  EXPECT_THAT(silo::AuthorizeMemberWrite(them, view, suspected),
              StatusIs(absl::StatusCode::kPermissionDenied));
  suspected = *other;
  suspected.set_heartbeat_unix_ms(5000);  // a heartbeat keeps them
  EXPECT_THAT(silo::AuthorizeMemberWrite(them, view, suspected), IsOk());
  // Addresses compare in canonical form; names by case-insensitive text.
  rpc::PeerAuthority certified;
  certified.hosts = {rpc::CanonicalHost("::1"), rpc::CanonicalHost("Silo-1")};
  EXPECT_TRUE(certified.Covers("[0:0::1]:5@1"));
  EXPECT_TRUE(certified.Covers("silo-1:11111"));
  EXPECT_FALSE(certified.Covers("silo-2:11111"));
  EXPECT_FALSE(certified.Covers("not an address"));
  // A certificate naming silo endpoints (URI SANs) speaks for those alone,
  // not for the other silos on their hosts.
  rpc::PeerAuthority endpoint;
  endpoint.hosts = {"10.0.0.1"};
  endpoint.silos = {rpc::SiloOfUri("granary-silo://10.0.0.1:11111"),
                    rpc::SiloOfUri("GRANARY-SILO://[0::1]:7/")};
  EXPECT_TRUE(endpoint.Covers("10.0.0.1:11111@4"));
  EXPECT_TRUE(endpoint.Covers("[::1]:7"));
  EXPECT_FALSE(endpoint.Covers("10.0.0.1:11112"));
  EXPECT_FALSE(endpoint.Covers("[::1]:8"));
  for (const char* bad :
       {"granary-silo://10.0.0.1", "granary-silo://10.0.0.1:0",
        "granary-silo://:5", "spiffe://10.0.0.1:5", "granary-silo://a:b",
        "granary-silo://10.0.0.1:70000", ""}) {
    EXPECT_EQ(rpc::SiloOfUri(bad), "") << bad;
  }
  // A certificate without names speaks for nothing; a plaintext peer, with
  // no identity to hold it to, for everything.
  EXPECT_FALSE(rpc::PeerAuthority().Covers("127.0.0.1:5"));
  rpc::PeerAuthority plaintext;
  plaintext.any = true;
  EXPECT_TRUE(plaintext.Covers("10.0.0.1:5@1"));
}

TEST(SiloAuthorizationTest, ForgedRequestsOfAnAuthenticatedSiloChangeNothing) {
  const Certs& c = Certs::Get();
  // The primary on 127.0.0.2 with a certificate for that host alone, which
  // the certificate of the forger (a genuine silo certificate of the
  // cluster CA, for 127.0.0.1) does not name.
  silo::SiloHostOptions o = WithClusterTls(AnyPorts());
  o.cluster = "dev";
  o.silo = "127.0.0.2:0";
  o.cluster_tls_cert = c.a("silo-127.0.0.2.pem");
  o.cluster_tls_key = c.a("silo-127.0.0.2.key");
  std::unique_ptr<Host> h = StartHost(o);
  ASSERT_NE(h, nullptr);
  rpc::ClientSecurity forger = ClientCert(c.a("silo"), c.a("cluster-ca.pem"));
  forger.check_hostname = false;
  auto channel = grpc::CreateChannel(h->host->silo_address(),
                                     rpc::MakeChannelCredentials(forger));
  auto membership = v1::Membership::NewStub(channel);
  auto directory = v1::Directory::NewStub(channel);
  auto read = [&membership] {
    grpc::ClientContext context;
    v1::MembershipView view;
    EXPECT_TRUE(
        membership->Read(&context, v1::ReadMembershipRequest(), &view).ok());
    return view;
  };
  auto write = [&membership](const v1::Member& m, int64_t version) {
    grpc::ClientContext context;
    v1::WriteMemberRequest request;
    *request.mutable_member() = m;
    request.set_expected_version(version);
    v1::WriteMemberReply reply;
    return membership->Write(&context, request, &reply).error_code();
  };
  const v1::MembershipView before = read();
  ASSERT_EQ(before.members_size(), 1);
  const v1::Member& primary = before.members(0);
  // Declare the primary dead.
  v1::Member dead = primary;
  dead.set_status(v1::MEMBER_DEAD);
  EXPECT_EQ(write(dead, before.version()), grpc::StatusCode::PERMISSION_DENIED);
  // The same with a vote in the primary's own name.
  v1::Suspicion* vote = dead.add_suspicions();
  vote->set_by(h->host->id());
  vote->set_at_unix_ms(absl::ToUnixMillis(absl::Now()));
  EXPECT_EQ(write(dead, before.version()), grpc::StatusCode::PERMISSION_DENIED);
  // Point its gateway elsewhere.
  v1::Member moved = primary;
  moved.set_gateway("127.0.0.1:1");
  EXPECT_EQ(write(moved, before.version()),
            grpc::StatusCode::PERMISSION_DENIED);
  // Add an Active member of its own host without joining.
  v1::Member fake;
  fake.set_address("127.0.0.1:1");
  fake.set_generation(1);
  fake.set_status(v1::MEMBER_ACTIVE);
  EXPECT_EQ(write(fake, before.version()), grpc::StatusCode::PERMISSION_DENIED);
  // Directory: unregister the primary's entry; an unhosted type.
  v1::DirectoryRequest request;
  request.mutable_entry()->set_type("granary.testing.Probe");
  request.mutable_entry()->set_key("p");
  request.mutable_entry()->set_silo(h->host->id());
  request.mutable_entry()->set_activation_id(1);
  v1::DirectoryReply reply;
  {
    grpc::ClientContext context;
    EXPECT_EQ(directory->Unregister(&context, request, &reply).error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
  }
  {
    grpc::ClientContext context;
    EXPECT_EQ(directory->Register(&context, request, &reply).error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
  }
  request.mutable_entry()->set_type("no.such.Type");
  request.mutable_entry()->set_silo("127.0.0.1:1@1");
  {
    grpc::ClientContext context;
    grpc::Status s = directory->Lookup(&context, request, &reply);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED);
    EXPECT_THAT(s.error_message(), HasSubstr("no.such.Type"));
  }
  v1::RebuildRequest rebuild;
  rebuild.set_from(h->host->id());
  {
    grpc::ClientContext context;
    v1::RebuildReply rebuilt;
    EXPECT_EQ(directory->Rebuild(&context, rebuild, &rebuilt).error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
  }
  // A write that expects another version than the table's is not checked
  // against that version's table: it is ABORTED, whatever the table
  // reaches meanwhile.
  EXPECT_EQ(write(moved, before.version() + 1), grpc::StatusCode::ABORTED);
  // Nothing changed.
  const v1::MembershipView after = read();
  EXPECT_EQ(after.version(), before.version());
  EXPECT_EQ(after.SerializeAsString(), before.SerializeAsString());
}

// Three members of a dev cluster on mutual TLS, each with a certificate of
// its own: the primary (127.0.0.2), a silo (127.0.0.3) and a compromised
// member, whose genuine certificate names the one endpoint 127.0.0.1:1 and
// which speaks the membership protocol by hand. Its forged votes and its
// row flood are refused, and the two honest silos go on serving.
TEST(ClusterTrustTest, ACompromisedMemberCannotKillFloodOrStopTheOthers) {
  const Certs& c = Certs::Get();
  std::unique_ptr<Host> primary, victim;
  StartPair(&primary, &victim);
  ASSERT_NE(victim, nullptr);

  rpc::ClientSecurity member =
      ClientCert(c.a("silo-127.0.0.1-1"), c.a("cluster-ca.pem"));
  member.check_hostname = false;
  auto membership = v1::Membership::NewStub(grpc::CreateChannel(
      primary->host->silo_address(), rpc::MakeChannelCredentials(member)));
  auto read = [&membership] {
    grpc::ClientContext context;
    v1::MembershipView view;
    EXPECT_TRUE(
        membership->Read(&context, v1::ReadMembershipRequest(), &view).ok());
    return view;
  };
  // Writes at the table's current version (read again while the honest
  // silos' heartbeats move it).
  auto write = [&](const v1::Member& m) {
    grpc::Status status;
    for (int attempt = 0; attempt < 50; ++attempt) {
      grpc::ClientContext context;
      v1::WriteMemberRequest request;
      *request.mutable_member() = m;
      request.set_expected_version(read().version());
      v1::WriteMemberReply reply;
      status = membership->Write(&context, request, &reply);
      if (status.error_code() != grpc::StatusCode::ABORTED) break;
    }
    return status;
  };
  auto row_of = [&read](const std::string& id) {
    const v1::MembershipView view = read();
    for (const v1::Member& m : view.members()) {
      if (storage::MemberId(m) == id) return m;
    }
    ADD_FAILURE() << "no row " << id;
    return v1::Member();
  };
  const int64_t now = absl::ToUnixMillis(absl::Now());

  // It joins as a member: its own endpoint's row, Joining, then Active.
  v1::Member me;
  me.set_address("127.0.0.1:1");
  me.set_generation(1);
  me.set_status(v1::MEMBER_JOINING);
  me.set_heartbeat_unix_ms(now);
  ASSERT_TRUE(write(me).ok());
  me.set_status(v1::MEMBER_ACTIVE);
  ASSERT_TRUE(write(me).ok());
  const std::string my_id = storage::MemberId(me);
  // Its certificate names 127.0.0.1:1, not the other silos of that host.
  v1::Member neighbour = me;
  neighbour.set_address("127.0.0.1:2");
  neighbour.set_status(v1::MEMBER_JOINING);
  EXPECT_EQ(write(neighbour).error_code(), grpc::StatusCode::PERMISSION_DENIED);

  // Its one vote does not declare the silo dead: the primary could vote
  // too, so two are needed.
  auto vote = [&](const std::string& target, const std::string& by, int64_t at,
                  bool dead) {
    v1::Member row = row_of(target);
    v1::Suspicion* v = row.add_suspicions();
    v->set_by(by);
    v->set_at_unix_ms(at);
    if (dead) row.set_status(v1::MEMBER_DEAD);
    return write(row);
  };
  grpc::Status s = vote(victim->host->id(), my_id, now, /*dead=*/true);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(s.error_message(), HasSubstr("with 2 votes"));
  // Nor do votes in the primary's name, or dated an hour ahead.
  EXPECT_EQ(
      vote(victim->host->id(), primary->host->id(), now, true).error_code(),
      grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(
      vote(victim->host->id(), my_id, now + 3'600'000, false).error_code(),
      grpc::StatusCode::FAILED_PRECONDITION);
  // Suspecting the primary first does not make its own vote enough.
  ASSERT_TRUE(vote(primary->host->id(), my_id, now, false).ok());
  EXPECT_EQ(vote(victim->host->id(), my_id, now, true).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
  // The vote on the primary stays: the suspect cannot wipe it either.
  EXPECT_EQ(row_of(primary->host->id()).suspicions_size(), 1);

  // A row flood: new rows of its endpoint, each padded to just under the
  // row cap, until the view's cap refuses them. The view never passes its
  // cap; the rows never answer a probe, so the honest silos declare them
  // dead, and a Dead row makes room for a new one: a flood slower than
  // that (a loaded machine, ThreadSanitizer) may go on to the end.
  int added = 0;
  size_t largest = 0;
  grpc::Status refused;
  for (int64_t generation = 2; generation < 200; ++generation) {
    v1::Member row;
    row.set_address("127.0.0.1:1");
    row.set_generation(generation);
    row.set_status(v1::MEMBER_JOINING);
    for (int i = 0; i < 240; ++i) {
      row.add_grain_types(absl::StrCat("flood.T", i, std::string(240, 'x')));
    }
    refused = write(row);
    largest = std::max(largest, read().ByteSizeLong());
    if (!refused.ok()) break;
    ++added;
  }
  EXPECT_LE(largest, storage::kMaxViewBytes);
  if (added >= 40) {
    int dead = 0;
    const v1::MembershipView after_flood = read();
    for (const v1::Member& m : after_flood.members()) {
      dead += m.address() == "127.0.0.1:1" && m.status() == v1::MEMBER_DEAD;
    }
    EXPECT_GT(dead, 0) << added << " rows added, none declared dead";
  } else {
    EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
        << refused.error_message();
  }

  // The honest silos: alive in the table, answering membership reads, and
  // serving grains on both.
  EXPECT_EQ(row_of(victim->host->id()).status(), v1::MEMBER_ACTIVE);
  EXPECT_EQ(row_of(primary->host->id()).status(), v1::MEMBER_ACTIVE);
  for (Host* h : {primary.get(), victim.get()}) {
    absl::StatusOr<std::unique_ptr<Client>> client =
        ConnectOnlyTo(h->host->gateway_address());
    ASSERT_THAT(client.status(), IsOk());
    for (int i = 0; i < 20; ++i) {
      Text ask;
      ask.set_text("still there");
      EXPECT_THAT(
          (*client)->Get<ProbeRef>(absl::StrCat("after-", i)).Echo(ask).Get(),
          IsOk());
    }
  }
  EXPECT_GT(primary->host->silo()->ActivationCount(), 0u);
  EXPECT_GT(victim->host->silo()->ActivationCount(), 0u);

  // Grains of both silos keep their reminders at the primary, each silo
  // for its own grains; the compromised member can change neither the
  // state nor the reminders of a grain it does not host, active or not.
  {
    ClientOptions options;
    options.gateways = {victim->host->gateway_address()};
    absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(options);
    ASSERT_THAT(client.status(), IsOk());
    ReminderRequest every_minute;
    every_minute.set_name("tick");
    every_minute.set_due_ms(60'000);
    every_minute.set_period_ms(60'000);
    for (int i = 0; i < 10; ++i) {
      EXPECT_THAT((*client)
                      ->Get<RemindRef>(absl::StrCat("r-", i))
                      .Register(every_minute)
                      .Get(),
                  IsOk());
    }
  }
  auto channel = grpc::CreateChannel(primary->host->silo_address(),
                                     rpc::MakeChannelCredentials(member));
  auto state = v1::GrainState::NewStub(channel);
  auto reminders = v1::Reminders::NewStub(channel);
  for (const char* key : {"after-0", "after-1", "never-active"}) {
    v1::WriteStateRequest overwrite;
    overwrite.mutable_grain()->set_type("granary.testing.Probe");
    overwrite.mutable_grain()->set_key(key);
    overwrite.set_bytes("stolen");
    grpc::ClientContext context;
    v1::WriteStateReply written;
    grpc::Status refused = state->Write(&context, overwrite, &written);
    EXPECT_EQ(refused.error_code(), grpc::StatusCode::PERMISSION_DENIED)
        << key << ": " << refused.error_message();
    EXPECT_THAT(refused.error_message(), HasSubstr("its own grains only"));
  }
  for (int i = 0; i < 10; ++i) {
    v1::RegisterReminderRequest hijack;
    hijack.set_type("granary.testing.Remind");
    hijack.set_key(absl::StrCat("r-", i));
    hijack.set_name("tick");
    hijack.set_due_us(1'000'000);
    hijack.set_period_us(1'000'000);
    grpc::ClientContext context;
    v1::RegisterReminderReply registered;
    EXPECT_EQ(reminders->Register(&context, hijack, &registered).error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
  }
}

}  // namespace
}  // namespace granary::testing
