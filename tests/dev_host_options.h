// File: tests/dev_host_options.h
// -----------------------------------------------------------------------------
// Options of a SiloHost in a test's in-process dev cluster: every listener
// on 127.0.0.1 port 0, grain state in memory, two workers, and a test
// failure should the cluster declare the silo dead.
//
//   silo::SiloHost primary(DevHostOptions());
//   ... primary.Start() ...
//   silo::SiloHost member(DevHostOptions(primary.silo_address()));
#pragma once

#include <string>
#include <utility>

#include "gtest/gtest.h"
#include "silo/silo_host.h"

namespace granary::testing {

// `primary`: the silo address of the cluster's primary; empty for the
// primary itself.
inline silo::SiloHostOptions DevHostOptions(std::string primary = {}) {
  silo::SiloHostOptions o;
  o.gateway = "127.0.0.1:0";
  o.silo = "127.0.0.1:0";
  o.http = "127.0.0.1:0";
  o.storage = "memory";
  o.workers = 2;
  o.cluster = "dev";
  o.primary = std::move(primary);
  o.on_declared_dead = [] { ADD_FAILURE() << "declared dead"; };
  return o;
}

}  // namespace granary::testing
