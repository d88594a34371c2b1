#ifndef SANDBOX_EMULATOR_REQUEST_CHECKS_H_
#define SANDBOX_EMULATOR_REQUEST_CHECKS_H_

#include <map>
#include <string>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>

#include "adapters/vendor/request_validation.h"
#include "inspection/v1/damage.pb.h"
#include "inspection/v1/event_config.pb.h"
#include "inspection/v1/image.pb.h"
#include "inspection/v1/inspection.pb.h"
#include "inspection/v1/token.pb.h"
#include "nlohmann/json.hpp"

namespace inspection::sandbox {

// The spec's request rules, applied to what a client sends the emulator.
//
// A vendor JSON body is decoded into the gateway's typed gRPC request with the same codec
// the gateway encodes with (vendor::DecodeMessage; the codec is symmetric), then
// gateway/validation's rule for that request runs on it, so the sandbox refuses exactly
// what the gateway refuses. What the typed form cannot express is checked on the JSON
// itself: a value of the wrong JSON type or outside an enum, the fixed values
// (`options.cost` literally false, `tradeIn.tradeinVehicle` literally true, `clientType`
// "customer") when present, and `tradeIn.sendingType` being present (null allowed).
// Unknown keys are tolerated, as a tolerant server would.
//
// Every function returns the violations (empty = valid) with field paths in the vendor's
// JSON spelling (`tradeIn.sendingType`, `urls[2]`) and fills `request` for the caller to
// use when valid. They never throw.

// Names of the spec's events, in the order of the spec's event table.
const std::vector<std::string>& KnownEventNames();
bool IsKnownEventName(const std::string& name);

// Any request with a JSON body and no check of its own: decoded as the gateway encodes it,
// then the gateway's own rules (validation::ValidateRequest, the `(rules)` annotations). A
// new endpoint's handler needs nothing more.
validation::Violations CheckRequest(const nlohmann::json& body, google::protobuf::Message* request);

validation::Violations CheckCreateToken(const nlohmann::json& body,
                                        v1::CreateTokenRequest* request);
validation::Violations CheckRemoveBackground(const nlohmann::json& body,
                                             v1::RemoveBackgroundRequest* request);
validation::Violations CheckAssessQuality(const nlohmann::json& body,
                                          v1::AssessQualityRequest* request);
validation::Violations CheckAssessQualityBatch(const nlohmann::json& body,
                                               v1::AssessQualityBatchRequest* request);
validation::Violations CheckSegmentVehicle(const nlohmann::json& body,
                                           v1::SegmentVehicleRequest* request);
validation::Violations CheckSegmentParts(const nlohmann::json& body,
                                         v1::SegmentPartsRequest* request);
validation::Violations CheckDetectDamage(const nlohmann::json& body,
                                         v1::DetectDamageRequest* request);
validation::Violations CheckUpdateWebhookConfig(const nlohmann::json& body,
                                                v1::UpdateWebhookConfigRequest* request);
// Also refuses an eventName that is not one of KnownEventNames().
validation::Violations CheckUpdateEventConfig(const nlohmann::json& body,
                                              v1::UpdateEventConfigRequest* request);
// `params`: eventName and inspectionId, from the query string or a JSON body (the spec
// does not show where they go, so both are accepted). Refuses unknown event names.
validation::Violations CheckTestWebhook(const nlohmann::json& params,
                                        v1::TestWebhookRequest* request);

// Query parameters of GET /apiv1/inspection/search (licensePlate, username, page, limit).
// The spec gives no maximum for `limit`; the sandbox accepts up to kSearchMaxLimit.
inline constexpr int kSearchMaxLimit = 1000;
validation::Violations CheckSearchInspections(const std::map<std::string, std::string>& query,
                                              v1::SearchInspectionsRequest* request);
// `deviceId` of GET /apiV1/tokenmanager/test: `<uid>-pwa`; sets `uid` on success.
validation::Violations CheckDeviceId(const std::string* device_id, std::string* uid);
validation::Violations CheckDamagesReportId(const std::string& inspection_id);

// Building blocks, exposed for tests.
// The vendor spelling of a proto field path of `type` (`trade_in.sending_type` ->
// `tradeIn.sendingType`, `urls[2]` unchanged); segments it cannot resolve are kept.
std::string VendorFieldPath(const google::protobuf::Descriptor* type,
                            const std::string& proto_path);

}  // namespace inspection::sandbox

#endif  // SANDBOX_EMULATOR_REQUEST_CHECKS_H_
