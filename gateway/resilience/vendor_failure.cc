#include "gateway/resilience/vendor_failure.h"

namespace inspection::resilience {

bool VendorFailure::MayHaveReachedVendor() const {
  switch (kind) {
    case Kind::kNotCalled:
      return false;
    case Kind::kConnect:
    case Kind::kTimeout:
    case Kind::kConnectionLost:
      return request_sent;
    case Kind::kNone:  // nothing known: assume it may have
    case Kind::kHttpStatus:
    case Kind::kBadBody:
    case Kind::kTooLarge:
      return true;
  }
  return true;
}

bool VendorFailure::CountsAgainstVendor() const {
  switch (kind) {
    case Kind::kHttpStatus:
      return http_status >= 500;
    case Kind::kConnect:
    case Kind::kTimeout:
    case Kind::kConnectionLost:
      return true;
    case Kind::kNone:
    case Kind::kNotCalled:
    case Kind::kBadBody:
    case Kind::kTooLarge:
      return false;
  }
  return false;
}

}  // namespace inspection::resilience
