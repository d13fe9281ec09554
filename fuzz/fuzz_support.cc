#include "fuzz/fuzz_support.h"

#include "core/log.h"
#include "google/protobuf/stubs/logging.h"

namespace granary::fuzz {

void QuietLogs() {
  SetLogLevel(LogLevel::kError);
  // Protobuf reports each string field with invalid UTF-8 it parses; fatal
  // messages still abort.
  google::protobuf::SetLogHandler(nullptr);
}

std::shared_ptr<CallWaiter> CallWaiter::Attach(CallBase* call) {
  auto waiter = std::make_shared<CallWaiter>();
  // The callback's reference, released when the call finishes.
  call->SetDoneCallback(&CallWaiter::Done,
                        new std::shared_ptr<CallWaiter>(waiter));
  return waiter;
}

void CallWaiter::Done(void* ctx, CallBase* call) {
  std::unique_ptr<std::shared_ptr<CallWaiter>> holder(
      static_cast<std::shared_ptr<CallWaiter>*>(ctx));
  CallWaiter& waiter = **holder;
  waiter.status_ = call->status();
  if (waiter.status_.ok()) {
    waiter.reply_serialized_ = call->reply().SerializeToString(&waiter.reply_);
  }
  waiter.done_.Notify();
}

}  // namespace granary::fuzz
