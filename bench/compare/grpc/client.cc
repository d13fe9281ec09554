#include "bench/compare/grpc/client.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "bench/compare/grpc/server.h"
#include "bench/compare/runner.h"
#include "core/status.h"
#include "grpcpp/grpcpp.h"

namespace granary::bench::compare {
namespace {

constexpr int kBatch = 100;  // Tells per Write in oneway_batched

// The Echo of call `seq`: its seq, and a serialized Ping as the payload.
Echo MakeEcho(int64_t seq) {
  Echo echo;
  echo.set_seq(seq);
  Ping ping;
  ping.set_seq(seq);
  ping.SerializeToString(echo.mutable_payload());
  return echo;
}

// A Tell of 1; every 16th (by index in the round) carries its send time, as
// granary-bench's Tells do.
void FillTell(int64_t index, Tell* tell) {
  tell->set_amount(1);
  tell->set_sent_ns(index % 16 == 0 ? absl::GetCurrentTimeNanos() : 0);
}

// Checks a stream's tally against what was sent.
void CheckTally(const grpc::Status& status, const Tally& tally, int64_t sent,
                int64_t writes, int64_t writes_ok, ScenarioResult& r) {
  r.verified = true;
  r.p50_ns = tally.p50_ns();
  r.p99_ns = tally.p99_ns();
  if (writes_ok < writes) {
    r.errors = writes - writes_ok;
    Fail(r, absl::StrCat("the stream broke after ", writes_ok, " of ", writes,
                         " writes: ", status.error_message()));
    return;
  }
  if (!status.ok()) {
    Fail(r, absl::StrCat("the stream ended with ", status.error_message()));
    return;
  }
  if (tally.count() != sent || tally.tells() != sent ||
      tally.writes() != writes) {
    Fail(r, absl::StrCat("server counted ", tally.count(), " in ",
                         tally.tells(), " tells and ", tally.writes(),
                         " writes, expected ", sent, " in ", writes));
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<GrpcScenarios>> GrpcScenarios::Start(
    double scale, absl::Duration timeout) {
  GRANARY_ASSIGN_OR_RETURN(
      GrpcHelper helper,
      StartGrpcHelper(absl::StrCat(kServeFlag, "127.0.0.1:0"),
                      "CompareEcho server", timeout));
  return std::unique_ptr<GrpcScenarios>(
      new GrpcScenarios(scale, std::move(helper.process),
                        std::move(helper.address), std::move(helper.channel)));
}

GrpcScenarios::GrpcScenarios(double scale, std::unique_ptr<ChildProcess> server,
                             std::string address,
                             std::shared_ptr<grpc::Channel> channel)
    : scale_(scale),
      server_(std::move(server)),
      address_(std::move(address)),
      channel_(std::move(channel)),
      stub_(CompareEcho::NewStub(channel_)) {}

GrpcScenarios::~GrpcScenarios() { Stop().IgnoreError(); }

absl::Status GrpcScenarios::Stop() {
  stub_.reset();
  channel_.reset();
  return server_->Stop();
}

const std::vector<std::string>& GrpcScenarios::Names() {
  static const auto* names = new std::vector<std::string>{
      "ask", "raw_grpc", "oneway", "oneway_batched"};
  return *names;
}

std::string GrpcScenarios::Unit(const std::string& scenario) {
  if (scenario == "oneway" || scenario == "oneway_batched") return "message";
  return "call";
}

void GrpcScenarios::Run(const std::string& scenario, ScenarioResult& r) {
  if (stub_ == nullptr) {
    Fail(r, "the arm was stopped");
  } else if (scenario == "ask") {
    Unary(r);
  } else if (scenario == "raw_grpc") {
    BidiPingPong(r);
  } else if (scenario == "oneway") {
    StreamOnePerWrite(r);
  } else if (scenario == "oneway_batched") {
    StreamBatched(r);
  } else {
    Fail(r, absl::StrCat("unknown scenario '", scenario, "'"));
  }
}

// Sequential unary echo calls, one latency sample per call.
void GrpcScenarios::Unary(ScenarioResult& r) {
  r.ops = Scaled(5000, scale_, 100);
  r.concurrency = 1;
  r.latencies_ns.reserve(r.ops);
  std::string first_error;
  const absl::Time t0 = absl::Now();
  for (int64_t i = 0; i < r.ops; ++i) {
    const int64_t start = absl::GetCurrentTimeNanos();
    const Echo request = MakeEcho(i);
    Echo reply;
    grpc::ClientContext context;
    const grpc::Status status = stub_->Unary(&context, request, &reply);
    r.latencies_ns.push_back(absl::GetCurrentTimeNanos() - start);
    if (!status.ok() || reply.seq() != i ||
        reply.payload() != request.payload()) {
      ++r.errors;
      if (first_error.empty() && !status.ok()) {
        first_error = status.error_message();
      }
    }
  }
  r.seconds = absl::ToDoubleSeconds(absl::Now() - t0);
  r.verified = r.errors == 0;
  if (r.errors > 0) {
    Fail(r, absl::StrCat(r.errors, " calls failed or mismatched",
                         first_error.empty() ? "" : ", first: ", first_error));
  }
}

// Sequential round trips on one bidi stream: write one message, read its
// echo, repeat.
void GrpcScenarios::BidiPingPong(ScenarioResult& r) {
  r.ops = Scaled(5000, scale_, 100);
  r.concurrency = 1;
  r.latencies_ns.reserve(r.ops);
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReaderWriter<Echo, Echo>> stream =
      stub_->Bidi(&context);
  Echo reply;
  int64_t done = 0, mismatched = 0;
  const absl::Time t0 = absl::Now();
  for (; done < r.ops; ++done) {
    const int64_t start = absl::GetCurrentTimeNanos();
    const Echo request = MakeEcho(done);
    if (!stream->Write(request) || !stream->Read(&reply)) break;
    r.latencies_ns.push_back(absl::GetCurrentTimeNanos() - start);
    if (reply.seq() != done || reply.payload() != request.payload()) {
      ++mismatched;
    }
  }
  r.seconds = absl::ToDoubleSeconds(absl::Now() - t0);
  stream->WritesDone();
  const grpc::Status status = stream->Finish();
  r.errors = mismatched + (r.ops - done);
  r.verified = r.errors == 0 && status.ok();
  if (done < r.ops) {
    Fail(r, absl::StrCat("the stream broke after ", done,
                         " round trips: ", status.error_message()));
  } else if (mismatched > 0) {
    Fail(r, absl::StrCat(mismatched, " echoes did not match their message"));
  } else if (!status.ok()) {
    Fail(r, absl::StrCat("the stream ended with ", status.error_message()));
  }
}

// One client stream, one Tell per Write; the round ends when the server's
// tally (sent once the client half-closes) has arrived.
void GrpcScenarios::StreamOnePerWrite(ScenarioResult& r) {
  r.ops = Scaled(10000, scale_, 100);
  grpc::ClientContext context;
  Tally tally;
  const absl::Time t0 = absl::Now();
  std::unique_ptr<grpc::ClientWriter<Tell>> writer =
      stub_->Collect(&context, &tally);
  int64_t written = 0;
  Tell tell;
  for (; written < r.ops; ++written) {
    FillTell(written, &tell);
    if (!writer->Write(tell)) break;
  }
  writer->WritesDone();
  const grpc::Status status = writer->Finish();
  r.seconds = absl::ToDoubleSeconds(absl::Now() - t0);
  CheckTally(status, tally, r.ops, r.ops, written, r);
}

// One client stream, 100 Tells per Write (a repeated field), then the tally.
void GrpcScenarios::StreamBatched(ScenarioResult& r) {
  const int64_t batches = Scaled(10000.0 / kBatch, scale_, 1);
  r.ops = batches * kBatch;
  grpc::ClientContext context;
  Tally tally;
  TellBatch batch;
  for (int i = 0; i < kBatch; ++i) batch.add_tells();
  const absl::Time t0 = absl::Now();
  std::unique_ptr<grpc::ClientWriter<TellBatch>> writer =
      stub_->CollectBatched(&context, &tally);
  int64_t written = 0;
  for (; written < batches; ++written) {
    for (int i = 0; i < kBatch; ++i) {
      FillTell(written * kBatch + i, batch.mutable_tells(i));
    }
    if (!writer->Write(batch)) break;
  }
  writer->WritesDone();
  const grpc::Status status = writer->Finish();
  r.seconds = absl::ToDoubleSeconds(absl::Now() - t0);
  CheckTally(status, tally, r.ops, batches, written, r);
}

}  // namespace granary::bench::compare
