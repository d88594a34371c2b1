#ifndef TESTS_SUPPORT_STATUS_DETAILS_H_
#define TESTS_SUPPORT_STATUS_DETAILS_H_

#include <optional>

#include <grpcpp/support/status.h>

#include "google/rpc/status.pb.h"

namespace inspection::testing {

// The first detail of type `Detail` (google.rpc.ErrorInfo, BadRequest, RetryInfo...) in a
// gRPC status's rich details (grpc-status-details-bin); nullopt when the details do not
// parse or hold none.
template <class Detail>
std::optional<Detail> FindStatusDetail(const grpc::Status& status) {
  google::rpc::Status rich;
  if (!rich.ParseFromString(status.error_details())) return std::nullopt;
  for (const auto& any : rich.details()) {
    Detail detail;
    if (any.UnpackTo(&detail)) return detail;
  }
  return std::nullopt;
}

}  // namespace inspection::testing

#endif  // TESTS_SUPPORT_STATUS_DETAILS_H_
