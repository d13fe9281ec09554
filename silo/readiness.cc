#include "silo/readiness.h"

#include "absl/strings/str_cat.h"
#include "core/clock.h"
#include "silo/admin/http_server.h"
#include "silo/listener_watch.h"
#include "silo/runtime/runtime.h"

namespace granary::silo {

std::string NotReadyBecause(const ReadinessSources& s) {
  if (std::string why = s.watch->NotReadyBecause(); !why.empty()) return why;
  if (s.leaving->load()) return "shutting down";
  if (s.agent->load() == nullptr) return "not yet in the cluster";
  if (s.silo != nullptr && MonoNanos() > s.silo->internals().lease_until_ns()) {
    // The membership table (PostgreSQL, or the dev primary) has not
    // confirmed this silo lately: it runs no grain code until it does.
    return "the membership table has not confirmed this silo lately";
  }
  if (s.storage != nullptr && !s.storage->Health().ok()) {
    return "storage cannot write";
  }
  return "";
}

void ServeProbes(HttpServer* http, ReadinessSources sources) {
  http->Handle("/readyz", [sources](const HttpRequest&) {
    const std::string why = NotReadyBecause(sources);
    if (why.empty()) {
      return HttpResponse{200, "text/plain; charset=utf-8", "ready\n"};
    }
    return HttpResponse{503, "text/plain; charset=utf-8",
                        absl::StrCat("not ready: ", why, "\n")};
  });
  ListenerWatch* watch = sources.watch;
  http->Handle("/healthz", [watch](const HttpRequest&) {
    const std::string why = watch->UnhealthyBecause();
    if (why.empty()) {
      return HttpResponse{200, "text/plain; charset=utf-8", "ok\n"};
    }
    return HttpResponse{503, "text/plain; charset=utf-8",
                        absl::StrCat("unhealthy: ", why, "\n")};
  });
}

}  // namespace granary::silo
