#include "gateway/services/authz_metrics.h"

namespace inspection::services {

AuthzMetrics::AuthzMetrics(const metrics::MetricsScope& scope)
    : denied_(&scope.CounterFamily(
          "inspection_authz_denied_total",
          "Calls the authorization policy (grpc.authz_policy_file) denied, by method.")) {}

void AuthzMetrics::RecordDenied(std::string_view grpc_method) {
  prometheus::Counter* counter = nullptr;
  {
    absl::MutexLock lock(&mu_);
    auto at = by_method_.find(grpc_method);
    if (at == by_method_.end()) {
      at = by_method_
               .emplace(std::string(grpc_method),
                        &denied_->Add({{"grpc_method", std::string(grpc_method)}}))
               .first;
    }
    counter = at->second;
  }
  counter->Increment();
}

}  // namespace inspection::services
