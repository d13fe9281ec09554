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
  co_await ChangeBalance(request.amount());  // durable before the reply
  co_return Current();
}

Task<void> BankAccountGrain::ChangeBalance(int64_t by) {
  const int64_t before = state_.balance();
  int64_t after = 0;
  if (__builtin_add_overflow(before, by, &after)) {
    throw StatusError(absl::OutOfRangeError(
        absl::StrCat("a balance of ", before, " cannot take ", by, " more")));
  }
  state_.set_balance(after);
  absl::Status written;
  try {
    co_await WriteState();
  } catch (...) {
    written = StatusFromException(std::current_exception());
  }
  if (!written.ok()) {
    // Not durable (a full disk, say): the caller hears so, and the balance
    // is as stored, so a later write does not make this change durable.
    state_.set_balance(before);
    throw StatusError(written);
  }
}

Task<Balance> BankAccountGrain::Withdraw(const Amount& request) {
  RequirePositive(request.amount());
  if (state_.balance() < request.amount()) {
    throw StatusError(absl::FailedPreconditionError(absl::StrCat(
        "balance ", state_.balance(), " does not cover ", request.amount())));
  }
  co_await ChangeBalance(-request.amount());
  co_return Current();
}

Task<Balance> BankAccountGrain::GetBalance(const GetBalanceRequest&) {
  co_return Current();
}

Task<Balance> BankAccountGrain::Transfer(const TransferRequest& request) {
  RequirePositive(request.amount());
  if (request.to().empty() || request.to() == GetGrainId().key()) {
    throw StatusError(
        absl::InvalidArgumentError("transfer needs another account as `to`"));
  }
  if (state_.balance() < request.amount()) {
    throw StatusError(absl::FailedPreconditionError(absl::StrCat(
        "balance ", state_.balance(), " does not cover ", request.amount())));
  }
  co_await ChangeBalance(-request.amount());
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
