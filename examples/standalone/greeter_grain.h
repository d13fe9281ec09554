// granary.standalone.Greeter: the grain of the standalone example, built
// against the installed granary-dev package.
//
//   host.AddGrain<granary::standalone::GreeterGrain>();
#pragma once

#include "greeter.grain.h"

namespace granary::standalone {

class GreeterGrain final : public GreeterGrainBase {
 public:
  GreeterGrain() { PersistState(&state_); }
  Task<Greeting> Greet(const GreetRequest& request) override;

 private:
  GreeterState state_;
};

}  // namespace granary::standalone
