#include "examples/bank_grain.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/status.h"

namespace granary::examples {
namespace {

void RequirePositive(int64_t amount) {
  if (amount <= 0) {
    throw StatusError(absl::InvalidArgumentError(
        absl::StrCat("amount must be positive, got ", amount)));
  }
}

}  // namespace

Balance BankAccountGrain::Current() const {
  Balance b;
  b.set_balance(state_.balance());
  return b;
}

Task<Balance> BankAccountGrain::Deposit(const Amount& request) {
  RequirePositive(request.amount());
  state_.set_balance(state_.balance() + request.amount());
  co_await WriteState();  // durable before the caller hears of it
  co_return Current();
}

Task<Balance> BankAccountGrain::Withdraw(const Amount& request) {
  RequirePositive(request.amount());
  if (state_.balance() < request.amount()) {
    throw StatusError(absl::FailedPreconditionError(absl::StrCat(
        "balance ", state_.balance(), " does not cover ", request.amount())));
  }
  state_.set_balance(state_.balance() - request.amount());
  co_await WriteState();
  co_return Current();
}

Task<Balance> BankAccountGrain::GetBalance(const GetBalanceRequest&) {
  co_return Current();
}

Task<Balance> BankAccountGrain::Transfer(const TransferRequest& request) {
  RequirePositive(request.amount());
  if (request.to().empty() || request.to() == GetGrainId().key()) {
    throw StatusError(absl::InvalidArgumentError(
        "transfer needs another account as `to`"));
  }
  if (state_.balance() < request.amount()) {
    throw StatusError(absl::FailedPreconditionError(absl::StrCat(
        "balance ", state_.balance(), " does not cover ", request.amount())));
  }
  state_.set_balance(state_.balance() - request.amount());
  co_await WriteState();
  Amount deposit;
  deposit.set_amount(request.amount());
  absl::Status deposited;
  try {
    co_await GetGrain<BankAccountRef>(request.to()).Deposit(deposit);
  } catch (...) {
    deposited = StatusFromException(std::current_exception());
  }
  if (!deposited.ok()) {
    // Put the amount back; whether the deposit happened is unknown only on
    // DEADLINE_EXCEEDED, which the caller sees.
    state_.set_balance(state_.balance() + request.amount());
    co_await WriteState();
    throw StatusError(deposited);
  }
  co_return Current();
}

}  // namespace granary::examples
