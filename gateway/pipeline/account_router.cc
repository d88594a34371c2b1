#include "gateway/pipeline/account_router.h"

#include <utility>

namespace inspection::pipeline {

AccountRouter::AccountRouter(std::map<std::string, upstream::VendorCaller*> accounts)
    : accounts_(std::move(accounts)) {}

void AccountRouter::Call(routes::RouteId route, const vendor::VendorRequest& request,
                         std::chrono::system_clock::time_point deadline,
                         const upstream::CallOptions& options, upstream::VendorCallback done) {
  auto it = accounts_.find(options.account);
  if (it == accounts_.end() || it->second == nullptr) {
    upstream::VendorResult result;
    result.error = errors::ApiError::UnknownVendorAccount();
    std::move(done)(std::move(result));
    return;
  }
  it->second->Call(route, request, deadline, options, std::move(done));
}

}  // namespace inspection::pipeline
