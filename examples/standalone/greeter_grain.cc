#include "greeter_grain.h"

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/status.h"

namespace granary::standalone {

Task<Greeting> GreeterGrain::Greet(const GreetRequest& request) {
  if (request.name().empty()) {
    throw StatusError(absl::InvalidArgumentError("a greeting needs a name"));
  }
  state_.set_greetings(state_.greetings() + 1);
  co_await WriteState();  // durable before the reply
  Greeting greeting;
  greeting.set_text(absl::StrCat("Hello, ", request.name(), ", from ",
                                 GetGrainId().key(), "!"));
  greeting.set_greetings(state_.greetings());
  co_return greeting;
}

}  // namespace granary::standalone
