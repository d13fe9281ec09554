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
  // Adds `by` to the balance and writes it; on a failed write the balance
  // stays as stored and the failure is thrown. A balance that would not fit
  // in an int64 is not written: OUT_OF_RANGE is thrown.
  Task<void> ChangeBalance(int64_t by);

  AccountState state_;
};

}  // namespace granary::examples
