#ifndef ADAPTERS_VENDOR_REQUEST_VALIDATION_H_
#define ADAPTERS_VENDOR_REQUEST_VALIDATION_H_

#include <string>
#include <vector>

#include <google/protobuf/message.h>

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

// Every violation of `request` (empty = valid), one per problem, in field order: the
// `(inspection.v1.rules)` annotations of its fields (proto/inspection/v1/vendor_options.proto,
// FieldRules), each field's named code check at its place. Never calls the vendor, never
// throws. A request type with no rules is valid.
Violations ValidateRequest(const google::protobuf::Message& request,
                           const ValidationLimits& limits = ValidationLimits());

// What is wrong with the rules of `message`'s fields (a rule on a field of the wrong type, an
// unknown limit or check name, a rule on a field of a nested message, which nothing would
// check); empty when they are sound. validation tests run it on every
// request type of the API.
std::vector<std::string> RuleProblems(const google::protobuf::Descriptor& message);

// Building blocks, exposed for tests and for other request types.
// True for an absolute http:// or https:// URL with a non-empty host and no spaces
// or control characters.
bool IsWellFormedHttpUrl(const std::string& url);

}  // namespace inspection::validation

#endif  // ADAPTERS_VENDOR_REQUEST_VALIDATION_H_
