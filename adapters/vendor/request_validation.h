#ifndef ADAPTERS_VENDOR_REQUEST_VALIDATION_H_
#define ADAPTERS_VENDOR_REQUEST_VALIDATION_H_

#include <string>
#include <vector>

#include "inspection/v1/damage.pb.h"
#include "inspection/v1/event_config.pb.h"
#include "inspection/v1/image.pb.h"
#include "inspection/v1/inspection.pb.h"
#include "inspection/v1/token.pb.h"

namespace inspection::validation {

// One broken rule. `field` is the path of the field in the gRPC request using proto
// field names (`customer.phone`, `urls[2]`); `description` says what is wrong and
// what is expected, in one sentence, and never echoes secrets.
struct FieldViolation {
  std::string field;
  std::string description;
  bool operator==(const FieldViolation& other) const {
    return field == other.field && description == other.description;
  }
};
using Violations = std::vector<FieldViolation>;

struct ValidationLimits {
  int search_max_limit = 100;  // SearchInspections: limit in 1..search_max_limit
  // URLs per call in the list RPCs (AssessQualityBatch, SegmentVehicle, SegmentParts,
  // DetectDamage, StreamDamageResults). The spec gives no maximum; past this the request is
  // refused as a whole (one violation on `urls`), before any URL is looked at.
  int max_urls = 100;
};

// At most this many violations are reported for one request; past it, one more entry
// (field "", "and N more field violations not listed") says how many were left out, so
// that no error can outgrow its gRPC trailer.
inline constexpr size_t kMaxReportedViolations = 20;

// Each function returns every violation of the request (empty = valid), one per
// problem, in field order. They never call the vendor and never throw.
Violations ValidateCreateToken(const v1::CreateTokenRequest& request);
Violations ValidateGetTokenStatus(const v1::GetTokenStatusRequest& request);
Violations ValidateRemoveBackground(const v1::RemoveBackgroundRequest& request);
Violations ValidateAssessQuality(const v1::AssessQualityRequest& request);
Violations ValidateAssessQualityBatch(const v1::AssessQualityBatchRequest& request,
                                      const ValidationLimits& limits = ValidationLimits());
Violations ValidateSegmentVehicle(const v1::SegmentVehicleRequest& request,
                                  const ValidationLimits& limits = ValidationLimits());
Violations ValidateSegmentParts(const v1::SegmentPartsRequest& request,
                                const ValidationLimits& limits = ValidationLimits());
Violations ValidateDetectDamage(const v1::DetectDamageRequest& request,
                                const ValidationLimits& limits = ValidationLimits());
Violations ValidateSearchInspections(const v1::SearchInspectionsRequest& request,
                                     const ValidationLimits& limits);
Violations ValidateGetDamagesReport(const v1::GetDamagesReportRequest& request);
Violations ValidateUpdateWebhookConfig(const v1::UpdateWebhookConfigRequest& request);
Violations ValidateUpdateEventConfig(const v1::UpdateEventConfigRequest& request);
Violations ValidateTestWebhook(const v1::TestWebhookRequest& request);

// Building blocks, exposed for tests and for other request types.
// True for an absolute http:// or https:// URL with a non-empty host and no spaces
// or control characters.
bool IsWellFormedHttpUrl(const std::string& url);

}  // namespace inspection::validation

#endif  // ADAPTERS_VENDOR_REQUEST_VALIDATION_H_
