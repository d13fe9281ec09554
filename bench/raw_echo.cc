#include "bench/raw_echo.h"

#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/address.h"
#include "core/status.h"
#include "examples/bench.pb.h"
#include "grpcpp/grpcpp.h"

namespace granary::bench {
namespace {

// One stream: read a message, write it back, read the next.
class EchoReactor final
    : public grpc::ServerBidiReactor<EchoMessage, EchoMessage> {
 public:
  EchoReactor() { StartRead(&message_); }

  void OnReadDone(bool ok) override {
    if (!ok) {  // the client is done writing (or gone)
      Finish(grpc::Status::OK);
      return;
    }
    StartWrite(&message_);
  }

  void OnWriteDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "write failed"));
      return;
    }
    StartRead(&message_);
  }

  void OnDone() override { delete this; }

 private:
  EchoMessage message_;  // read into, then written from
};

class EchoService final : public RawEcho::CallbackService {
  grpc::ServerBidiReactor<EchoMessage, EchoMessage>* Echo(
      grpc::CallbackServerContext*) override {
    return new EchoReactor();
  }
};

// Blocks until stdin reaches end-of-file or a signal in `signals` arrives.
void WaitForStdinEndOrSignal(int signal_fd) {
  while (true) {
    pollfd fds[2] = {{STDIN_FILENO, POLLIN, 0}, {signal_fd, POLLIN, 0}};
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents != 0) return;
    if (fds[0].revents != 0) {
      char chunk[256];
      const ssize_t n = read(STDIN_FILENO, chunk, sizeof(chunk));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return;  // anything written to stdin is ignored
    }
  }
}

}  // namespace

int ServeRawEcho(const std::string& address) {
  std::string host;
  int port = 0;
  if (!SplitHostPort(address, &host, &port)) {
    std::fprintf(stderr,
                 "granary-bench: --serve_raw_echo='%s' is not HOST:PORT\n",
                 address.c_str());
    return 2;
  }
  // Signals are read from a signalfd, so every thread (gRPC's included,
  // started below) must have them blocked.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  const int signal_fd = signalfd(-1, &signals, SFD_CLOEXEC);
  if (signal_fd < 0) {
    std::perror("granary-bench: signalfd");
    return 2;
  }

  EchoService service;
  int bound = 0;
  grpc::ServerBuilder builder;
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &bound);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || bound == 0) {
    std::fprintf(stderr, "granary-bench: cannot listen on %s\n",
                 address.c_str());
    close(signal_fd);
    return 2;
  }
  const std::string listening = absl::StrContains(host, ':')
                                    ? absl::StrCat("[", host, "]:", bound)
                                    : absl::StrCat(host, ":", bound);
  std::printf("READY address=%s\n", listening.c_str());
  std::fflush(stdout);

  WaitForStdinEndOrSignal(signal_fd);
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  server->Wait();
  close(signal_fd);
  return 0;
}

// --- RawEchoArm --------------------------------------------------------------

absl::StatusOr<std::unique_ptr<RawEchoArm>> RawEchoArm::Start(
    absl::Duration timeout) {
  GRANARY_ASSIGN_OR_RETURN(GrpcHelper helper,
                           StartGrpcHelper("--serve_raw_echo=127.0.0.1:0",
                                           "raw gRPC echo server", timeout));
  return std::unique_ptr<RawEchoArm>(new RawEchoArm(std::move(helper.process),
                                                    std::move(helper.address),
                                                    std::move(helper.channel)));
}

RawEchoArm::RawEchoArm(std::unique_ptr<ChildProcess> child, std::string address,
                       std::shared_ptr<grpc::Channel> channel)
    : child_(std::move(child)),
      address_(std::move(address)),
      channel_(std::move(channel)),
      stub_(RawEcho::NewStub(channel_)) {}

pid_t RawEchoArm::pid() const { return child_->pid(); }

RawEchoArm::~RawEchoArm() { Stop().IgnoreError(); }

absl::Status RawEchoArm::Stop() {
  stub_.reset();
  channel_.reset();
  return child_->Stop();
}

void RawEchoArm::PingPong(int64_t ops, ScenarioResult* r) {
  r->ops = ops;
  r->latencies_ns.reserve(ops);
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReaderWriter<EchoMessage, EchoMessage>> stream =
      stub_->Echo(&context);
  EchoMessage out, in;
  int64_t mismatched = 0;
  int64_t done = 0;
  const absl::Time t0 = absl::Now();
  for (; done < ops; ++done) {
    PingRequest ping;  // the payload `ask` sends, serialized as it would be
    ping.set_seq(done);
    const int64_t start = absl::GetCurrentTimeNanos();
    out.set_seq(done);
    ping.SerializeToString(out.mutable_payload());
    if (!stream->Write(out) || !stream->Read(&in)) break;
    r->latencies_ns.push_back(absl::GetCurrentTimeNanos() - start);
    if (in.seq() != done) ++mismatched;
  }
  r->seconds = absl::ToDoubleSeconds(absl::Now() - t0);
  stream->WritesDone();
  const grpc::Status status = stream->Finish();
  r->errors = mismatched + (ops - done);
  r->verified = r->errors == 0 && status.ok();
  if (done < ops) {
    r->failure = absl::StrCat("the stream broke after ", done,
                              " round trips: ", status.error_message());
  } else if (mismatched > 0) {
    r->failure = absl::StrCat(mismatched, " echoes carried the wrong seq");
  } else if (!status.ok()) {
    r->failure = absl::StrCat("the stream ended with ", status.error_message());
  }
}

}  // namespace granary::bench
