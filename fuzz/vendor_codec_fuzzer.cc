// Fuzz target: the codec from the vendor's JSON to every response message (adapters/vendor:
// the Decode* functions of the mappers and json_codec's reflection-driven DecodeMessage under
// them). The first input byte picks the response type; the rest is the vendor's answer body,
// parsed as the vendor client parses it (gateway/upstream/vendor_client.cc, Interpret): the
// bounded parser at upstream.max_json_depth's and max_json_elements' defaults, the webhook key
// sealed on the routes that seal it. Byte 15 is a `createReport` webhook payload, decoded as
// the event hub decodes it (gateway/streaming/event_hub.cc).
//
// Byte 16 is the other direction, what a gRPC caller sends: the next byte picks an RPC with a
// vendor_route annotation, the rest is its request's protobuf bytes, parsed as the generic
// unary handler parses them (gateway/services/generic_unary_service.cc), validated by the
// field rules (ValidateRequest) and, when valid, encoded for the vendor (EncodeRequest). A
// valid request whose path parameter comes out empty, a dot-segment or with a URL delimiter
// fails the input: the route table's start-up check promises it cannot.
//
// After a decode that succeeded, the message goes where the gateway sends it: serialized for
// the gRPC caller, and parsed back as the caller's protobuf library would (default limits).
// A message the gateway sends but its caller cannot parse fails the input. The message is
// also encoded back to vendor JSON (json_codec's EncodeMessage, as the sandbox does) and
// dumped.

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "adapters/vendor/bounded_json.h"
#include "adapters/vendor/damage_mapper.h"
#include "adapters/vendor/event_config_mapper.h"
#include "adapters/vendor/event_mapper.h"
#include "adapters/vendor/image_mapper.h"
#include "adapters/vendor/json_codec.h"
#include "adapters/vendor/request_validation.h"
#include "adapters/vendor/token_mapper.h"
#include "adapters/vendor/vendor_mapping.h"
#include "adapters/vendor/vendor_routes.h"
#include "inspection/v1/inspection.pb.h"

namespace {

namespace v1 = inspection::v1;
namespace vendor = inspection::vendor;
using nlohmann::json;

// upstream.max_json_depth's and max_json_elements' defaults (gateway/upstream/vendor_client.h).
constexpr vendor::JsonLimits kVendorLimits{.max_depth = 512, .max_elements = 250'000};
constexpr int kTypes = 17;

[[noreturn]] void Fail(const char* what, int type) {
  std::fprintf(stderr, "vendor_codec_fuzzer: %s (response type %d)\n", what, type);
  std::abort();
}

// Decodes `body` as response type `type`; the message in `*out`.
absl::Status Decode(int type, const json& body, std::unique_ptr<google::protobuf::Message>* out) {
  vendor::DecodeReport report;
  static const vendor::MapperOptions* const mapper_options = new vendor::MapperOptions();
  auto make = [out](auto* message) {
    out->reset(message);
    return message;
  };
  switch (type) {
    case 0:
      return vendor::DecodeCreateTokenResponse(body, "https://webapp.example.com", "en",
                                               make(new v1::CreateTokenResponse), &report);
    case 1:
      return vendor::DecodeResponse(body, make(new v1::GetTokenStatusResponse), &report);
    case 2:
      return vendor::DecodeResponse(body, make(new v1::SearchInspectionsResponse), &report);
    case 3:
      return vendor::DecodeResponse(body, make(new v1::GetDamagesReportResponse), &report);
    case 4:
      return vendor::DecodeGetWebhookConfigResponse(body, make(new v1::GetWebhookConfigResponse),
                                                    &report);
    case 5:
      return vendor::DecodeUpdateWebhookConfigResponse(
          body, make(new v1::UpdateWebhookConfigResponse), &report);
    case 6:
      return vendor::DecodeResponse(body, make(new v1::ListEventConfigsResponse), &report);
    case 7:
      return vendor::DecodeResponse(body, make(new v1::UpdateEventConfigResponse), &report);
    case 8:
      return vendor::DecodeResponse(body, make(new v1::TestWebhookResponse), &report);
    case 9:
      return vendor::DecodeResponse(body, make(new v1::RemoveBackgroundResponse), &report);
    case 10:
      return vendor::DecodeResponse(body, make(new v1::AssessQualityResponse), &report);
    case 11:
      return vendor::DecodeResponse(body, make(new v1::AssessQualityBatchResponse), &report);
    case 12:
      return vendor::DecodeResponse(body, make(new v1::SegmentVehicleResponse), &report);
    case 13:
      return vendor::DecodeSegmentPartsResponse(body, make(new v1::SegmentPartsResponse), &report);
    case 14:
      return vendor::DecodeDetectDamageResponse(body, *mapper_options,
                                                make(new v1::DetectDamageResponse));
    default:
      return vendor::DecodeCreateReport(body, make(new v1::CreateReport), &report);
  }
}

// Type 16: a caller's request for the RPC `pick` selects, through validation and encoding.
int FuzzRequest(uint8_t pick, const std::string& bytes) {
  static const auto* const routed = [] {
    auto* methods = new std::vector<const google::protobuf::MethodDescriptor*>();
    for (const auto* method : vendor::ApiMethods()) {
      if (vendor::VendorRouteOf(*method) != nullptr) methods->push_back(method);
    }
    return methods;
  }();
  const google::protobuf::MethodDescriptor* method = (*routed)[pick % routed->size()];
  std::unique_ptr<google::protobuf::Message> request(
      google::protobuf::MessageFactory::generated_factory()
          ->GetPrototype(method->input_type())
          ->New());
  if (!request->ParseFromString(bytes)) return 0;  // INVALID_ARGUMENT before anything else
  if (!inspection::validation::ValidateRequest(*request).empty()) return 0;
  const vendor::VendorRequest out =
      vendor::EncodeRequest(*vendor::VendorRouteOf(*method), *request);
  for (const auto& [name, value] : out.path_params) {
    if (value.empty() || value == "." || value == ".." ||
        value.find_first_of("/?#&") != std::string::npos) {
      Fail("a valid request gives a path parameter the vendor URL cannot carry", 16);
    }
  }
  if (out.body.has_value()) (void)out.body->dump();
  return 0;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const int type = data[0] % kTypes;
  if (type == 16)
    return size < 2 ? 0
                    : FuzzRequest(data[1],
                                  std::string(reinterpret_cast<const char*>(data + 2), size - 2));
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  json body;
  if (type == 15) {
    // The event hub: the receiver stored it within its own limits (depth 64).
    if (vendor::ParseBoundedJson(text, vendor::JsonLimits{}, &body) !=
            vendor::BoundedParseResult::kOk ||
        !body.is_object()) {
      return 0;
    }
  } else if (text.find_first_not_of(" \t\r\n") == std::string::npos) {
    body = json();  // an empty 2xx body: the mapper decides
  } else if (vendor::ParseBoundedJson(text, kVendorLimits, &body) !=
             vendor::BoundedParseResult::kOk) {
    return 0;  // VENDOR_MALFORMED_RESPONSE
  } else if (type == 4 || type == 5) {
    vendor::SealWebhookHeaderKey(&body);  // as the routes that seal it
    (void)body.dump();
  }
  std::unique_ptr<google::protobuf::Message> message;
  if (!Decode(type, body, &message).ok()) return 0;

  std::string wire;
  if (!message->SerializeToString(&wire)) Fail("a decoded message does not serialize", type);
  std::unique_ptr<google::protobuf::Message> parsed(message->New());
  if (!parsed->ParseFromString(wire)) {
    Fail("a decoded message its gRPC caller cannot parse (protobuf's default limits)", type);
  }
  (void)vendor::EncodeMessage(*message).dump();
  return 0;
}
