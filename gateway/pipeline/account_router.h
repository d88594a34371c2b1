#ifndef GATEWAY_PIPELINE_ACCOUNT_ROUTER_H_
#define GATEWAY_PIPELINE_ACCOUNT_ROUTER_H_

#include <map>
#include <string>

#include "gateway/upstream/vendor_caller.h"

namespace inspection::pipeline {

// Sends each call to the pipeline of the vendor account it names (CallOptions::account,
// "" for the default account). Every account has its own vendor client, circuit breaker
// and retry budget below this point, so one account's outage neither opens another's
// breaker nor spends its retries. The services refuse unknown names before calling; a
// call that still names one fails with INVALID_ARGUMENT and reaches no vendor.
// Thread-safe (the map is fixed at construction).
class AccountRouter final : public upstream::VendorCaller {
 public:
  // `accounts`: account name -> the caller of that account (not owned; must outlive
  // the router). Must contain "".
  explicit AccountRouter(std::map<std::string, upstream::VendorCaller*> accounts);

  void Call(routes::RouteId route, const vendor::VendorRequest& request,
            std::chrono::system_clock::time_point deadline, const upstream::CallOptions& options,
            upstream::VendorCallback done) override;

 private:
  const std::map<std::string, upstream::VendorCaller*> accounts_;
};

}  // namespace inspection::pipeline

#endif  // GATEWAY_PIPELINE_ACCOUNT_ROUTER_H_
