// File: examples/bank_grain.h
// -----------------------------------------------------------------------------
// granary.examples.BankAccount: the example of a grain with persistent state
// (PersistState / WriteState, silo/runtime/grain.h).
//
//   silo.AddGrain<BankAccountGrain>();
#pragma once

#include "examples/bank.grain.h"

namespace granary::examples {

class BankAccountGrain final : public BankAccountGrainBase {
 public:
  BankAccountGrain() { PersistState(&state_); }

  Task<Balance> Deposit(const Amount& request) override;
  Task<Balance> Withdraw(const Amount& request) override;
  Task<Balance> GetBalance(const GetBalanceRequest& request) override;
  Task<Balance> Transfer(const TransferRequest& request) override;

 private:
  Balance Current() const;

  AccountState state_;
};

}  // namespace granary::examples
