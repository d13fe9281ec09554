// greeter-client: greets through a silo's gateway with the C++ client.
//
//   greeter-client 127.0.0.1:30000 alice Ada
//
// calls the Greeter grain "alice" with the name "Ada" and prints its answer;
// exits 1 with the status when the call fails.
#include <cstdio>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "client/client.h"
#include "greeter.granary.h"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: greeter-client GATEWAY GRAIN_KEY NAME\n");
    return 2;
  }
  granary::ClientOptions options;
  options.gateways = {argv[1]};
  absl::StatusOr<std::unique_ptr<granary::Client>> client =
      granary::Client::Connect(options);
  if (!client.ok()) {
    std::fprintf(stderr, "greeter-client: %s\n",
                 client.status().ToString().c_str());
    return 1;
  }
  granary::standalone::GreetRequest request;
  request.set_name(argv[3]);
  absl::StatusOr<granary::standalone::Greeting> greeting =
      (*client)
          ->Get<granary::standalone::GreeterRef>(argv[2])
          .Greet(request)
          .Get();
  (*client)->Close();
  if (!greeting.ok()) {
    std::fprintf(stderr, "greeter-client: %s\n",
                 greeting.status().ToString().c_str());
    return 1;
  }
  std::printf("%s (greeting %lld)\n", greeting->text().c_str(),
              static_cast<long long>(greeting->greetings()));
  return 0;
}
