#include "gateway/upstream/vendor_caller.h"

namespace inspection::upstream {

std::string_view CacheStatusName(CacheStatus status) {
  switch (status) {
    case CacheStatus::kNotCached:
      return "none";
    case CacheStatus::kMiss:
      return "miss";
    case CacheStatus::kHit:
      return "hit";
    case CacheStatus::kCoalesced:
      return "coalesced";
    case CacheStatus::kStale:
      return "stale";
    case CacheStatus::kBypass:
      return "bypass";
  }
  return "none";
}

const nlohmann::json& VendorResult::json_body() const {
  static const nlohmann::json* const kNull = new nlohmann::json(nullptr);
  return body != nullptr ? *body : *kNull;
}

}  // namespace inspection::upstream
