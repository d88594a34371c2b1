#ifndef GATEWAY_SERVICES_AUTHZ_METRICS_H_
#define GATEWAY_SERVICES_AUTHZ_METRICS_H_

// inspection_authz_denied_total{grpc_method}: calls the authorization policy denied, by
// method. The admission of every RPC (unary_call.h) reports a denial through
// ServiceDeps::on_denied; the composition root points that at Record(). Thread-safe.

#include <map>
#include <string>
#include <string_view>

#include <prometheus/counter.h>
#include <prometheus/family.h>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "gateway/metrics/metrics_scope.h"

namespace inspection::services {

class AuthzMetrics {
 public:
  explicit AuthzMetrics(const metrics::MetricsScope& scope);

  // `grpc_method` is a full method name of this gateway (a bounded set: gRPC refuses
  // unknown methods before the policy runs), so each gets its series on first denial.
  void RecordDenied(std::string_view grpc_method);

 private:
  prometheus::Family<prometheus::Counter>* const denied_;
  absl::Mutex mu_;
  std::map<std::string, prometheus::Counter*, std::less<>> by_method_ ABSL_GUARDED_BY(mu_);
};

}  // namespace inspection::services

#endif  // GATEWAY_SERVICES_AUTHZ_METRICS_H_
