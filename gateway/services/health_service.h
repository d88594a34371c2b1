#ifndef GATEWAY_SERVICES_HEALTH_SERVICE_H_
#define GATEWAY_SERVICES_HEALTH_SERVICE_H_

#include <map>
#include <set>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "gateway/services/unary_call.h"
#include "grpc/health/v1/health.grpc.pb.h"

namespace inspection::services {

// grpc.health.v1.Health (Check and Watch), served by the gateway instead of gRPC's built-in
// service (grpc::EnableDefaultHealthCheckService), whose calls never reach our code: here
// every call is first admitted by AdmitHealthCheck, so the authorization policy decides who
// may ask like for any RPC (PERMISSION_DENIED, reason PERMISSION_DENIED_BY_POLICY). An
// admitted caller gets what gRPC's service answers:
//   Check: the service's status (SERVING, NOT_SERVING); NOT_FOUND for a service never set.
//   Watch: the current status at once (SERVICE_UNKNOWN for a service never set), then every
//          change (only the latest one when changes come faster than the caller reads);
//          the stream holds a stream slot (AdmitHealthCheck) until it ends: when the
//          caller cancels it, or with UNAVAILABLE after Shutdown's NOT_SERVING.
// "" names the server as a whole: SERVING from the start, as with gRPC's service.
// Thread-safe. Must outlive the gRPC server it is registered with (its calls).
class HealthService final : public grpc::health::v1::Health::CallbackService {
 public:
  static constexpr char kCheckMethod[] = "/grpc.health.v1.Health/Check";
  static constexpr char kWatchMethod[] = "/grpc.health.v1.Health/Watch";
  static constexpr char kServiceName[] = "grpc.health.v1.Health";

  // `deps` (the policy, the stream slots and limits, the refusal log) must outlive the
  // service.
  explicit HealthService(const AdmissionDeps& deps);
  ~HealthService() override;

  // Sets `service`'s status and tells its watchers. Ignored once Shutdown has run.
  void SetServingStatus(const std::string& service, bool serving);
  // Every service NOT_SERVING from now on (later SetServingStatus calls are ignored); each
  // Watch is sent NOT_SERVING and then ends with UNAVAILABLE, so that a drain does not wait
  // for health watchers.
  void Shutdown();
  // Watch streams open now.
  size_t watches() const;

  grpc::ServerUnaryReactor* Check(grpc::CallbackServerContext* context,
                                  const grpc::health::v1::HealthCheckRequest* request,
                                  grpc::health::v1::HealthCheckResponse* response) override;
  grpc::ServerWriteReactor<grpc::health::v1::HealthCheckResponse>* Watch(
      grpc::CallbackServerContext* context,
      const grpc::health::v1::HealthCheckRequest* request) override;

 private:
  class WatchReactor;
  using ServingStatus = grpc::health::v1::HealthCheckResponse::ServingStatus;

  ServingStatus StatusLocked(const std::string& service) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Forget(WatchReactor* watch);

  const AdmissionDeps& deps_;
  mutable absl::Mutex mu_;
  std::map<std::string, bool> serving_ ABSL_GUARDED_BY(mu_);
  // The open watches by the service they watch (entries go when their last watch ends).
  std::map<std::string, std::set<WatchReactor*>> watchers_ ABSL_GUARDED_BY(mu_);
  size_t watches_ ABSL_GUARDED_BY(mu_) = 0;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace inspection::services

#endif  // GATEWAY_SERVICES_HEALTH_SERVICE_H_
