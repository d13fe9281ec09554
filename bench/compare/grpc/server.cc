#include "bench/compare/grpc/server.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "bench/compare/grpc/compare_echo.grpc.pb.h"
#include "core/address.h"
#include "core/percentile.h"
#include "grpcpp/grpcpp.h"

namespace granary::bench::compare {
namespace {

// One bidi stream: each message read is written back before the next read.
class BidiEchoReactor final : public grpc::ServerBidiReactor<Echo, Echo> {
 public:
  BidiEchoReactor() { StartRead(&echo_); }

  void OnReadDone(bool ok) override {
    if (ok) {
      StartWrite(&echo_);
    } else {  // the client half-closed (or went away)
      Finish(grpc::Status::OK);
    }
  }

  void OnWriteDone(bool ok) override {
    if (ok) {
      StartRead(&echo_);
    } else {
      Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "echo not written"));
    }
  }

  void OnDone() override { delete this; }

 private:
  Echo echo_;
};

// One client stream of `Message` (Tell or TellBatch): counts what it reads
// and answers a Tally when the client half-closes.
template <typename Message>
class TallyReactor final : public grpc::ServerReadReactor<Message> {
 public:
  explicit TallyReactor(Tally* reply) : reply_(reply) {
    this->StartRead(&message_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      reply_->set_count(count_);
      reply_->set_tells(tells_);
      reply_->set_writes(writes_);
      if (!latencies_ns_.empty()) {
        reply_->set_p50_ns(NearestRank(latencies_ns_, 0.50));
        reply_->set_p99_ns(NearestRank(latencies_ns_, 0.99));
      }
      this->Finish(grpc::Status::OK);
      return;
    }
    ++writes_;
    Add(message_);
    this->StartRead(&message_);
  }

  void OnDone() override { delete this; }

 private:
  void Add(const Tell& tell) {
    count_ += tell.amount();
    ++tells_;
    if (tell.sent_ns() > 0) {
      latencies_ns_.push_back(absl::GetCurrentTimeNanos() - tell.sent_ns());
    }
  }
  void Add(const TellBatch& batch) {
    for (const Tell& tell : batch.tells()) Add(tell);
  }

  Tally* const reply_;
  Message message_;
  int64_t count_ = 0;
  int64_t tells_ = 0;
  int64_t writes_ = 0;
  std::vector<int64_t> latencies_ns_;
};

class CompareEchoService final : public CompareEcho::CallbackService {
  grpc::ServerUnaryReactor* Unary(grpc::CallbackServerContext* context,
                                  const Echo* request, Echo* reply) override {
    *reply = *request;
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

  grpc::ServerBidiReactor<Echo, Echo>* Bidi(
      grpc::CallbackServerContext*) override {
    return new BidiEchoReactor();
  }

  grpc::ServerReadReactor<Tell>* Collect(grpc::CallbackServerContext*,
                                         Tally* reply) override {
    return new TallyReactor<Tell>(reply);
  }

  grpc::ServerReadReactor<TellBatch>* CollectBatched(
      grpc::CallbackServerContext*, Tally* reply) override {
    return new TallyReactor<TellBatch>(reply);
  }
};

}  // namespace

int ServeCompareEcho(const std::string& address) {
  std::string host;
  int port = 0;
  if (!SplitHostPort(address, &host, &port)) {
    std::fprintf(stderr, "granary-compare-grpc: '%s' is not HOST:PORT\n",
                 address.c_str());
    return 2;
  }
  // SIGTERM / SIGINT are taken with sigwait below, so they are blocked here,
  // before gRPC starts the threads that inherit the mask.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  CompareEchoService service;
  int bound_port = 0;
  grpc::ServerBuilder builder;
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(),
                           &bound_port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || bound_port == 0) {
    std::fprintf(stderr, "granary-compare-grpc: cannot listen on %s\n",
                 address.c_str());
    return 2;
  }
  const std::string bound = absl::StrContains(host, ':')
                                ? absl::StrCat("[", host, "]:", bound_port)
                                : absl::StrCat(host, ":", bound_port);
  std::printf("READY address=%s\n", bound.c_str());
  std::fflush(stdout);

  // End of stdin (the parent closed it, or died) counts as a stop signal:
  // a reader thread turns it into one. Whatever is written to stdin is
  // ignored.
  std::thread([] {
    char chunk[256];
    while (true) {
      const ssize_t n = read(STDIN_FILENO, chunk, sizeof(chunk));
      if (n > 0 || (n < 0 && errno == EINTR)) continue;
      kill(getpid(), SIGTERM);
      return;
    }
  }).detach();
  int received = 0;
  sigwait(&stop_signals, &received);

  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  server->Wait();
  return 0;
}

}  // namespace granary::bench::compare
