#include "sandbox/emulator/admin_api.h"

#include <cmath>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"

namespace inspection::sandbox {
namespace {

using nlohmann::json;

json ClockJson(const SandboxClock& clock) {
  return {{"now", IsoTime(clock.Now())}, {"offsetSeconds", absl::ToDoubleSeconds(clock.offset())}};
}

json RulesJson(const FaultInjector& faults) {
  json rules = json::array();
  for (const FaultRule& rule : faults.Rules()) rules.push_back(FaultRuleToJson(rule));
  return {{"rules", std::move(rules)}};
}

json DeliveriesJson(const WebhookDispatcher& webhooks) {
  json deliveries = json::array();
  for (const DeliveryRecord& record : webhooks.Log()) {
    // Keys are DeliveryRecord's field names, so the log reads like the dispatcher's docs.
    deliveries.push_back({{"delivery_id", record.delivery_id},
                          {"attempt", record.attempt},
                          {"event_name", record.event_name},
                          {"url", record.url},
                          {"outcome", record.outcome},
                          {"http_status", record.http_status},
                          {"at", record.at},
                          {"final", record.final}});
  }
  return {{"deliveries", std::move(deliveries)}, {"pending", webhooks.Pending()}};
}

Reply BadRequest(const std::string& message) { return ErrorReply(400, "invalid_request", message); }

Reply MethodNotAllowed(const std::string& method, const std::string& path) {
  return ErrorReply(405, "method_not_allowed", method + " is not allowed on " + path + ".");
}

// Parses a JSON body; an empty body is an empty object.
bool ParseBody(const std::string& body, json* out) {
  if (body.empty()) {
    *out = json::object();
    return true;
  }
  *out = json::parse(body, nullptr, /*allow_exceptions=*/false);
  return !out->is_discarded();
}

Reply AdvanceClock(const AdminContext& context, const std::string& body) {
  json request;
  if (!ParseBody(body, &request) || !request.is_object()) {
    return BadRequest("The body must be a JSON object: {\"seconds\": N}.");
  }
  auto seconds = request.find("seconds");
  if (seconds == request.end() || !seconds->is_number() || !std::isfinite(seconds->get<double>()) ||
      seconds->get<double>() < 0) {
    // Forward only: tokens that expired stay expired, as in real time.
    return BadRequest("seconds is required: a number of seconds >= 0 to move the clock forward.");
  }
  context.clock->Advance(absl::Seconds(seconds->get<double>()));
  return OkReply(ClockJson(*context.clock));
}

Reply AddFaults(const AdminContext& context, const std::string& body) {
  json request;
  if (!ParseBody(body, &request)) return BadRequest("The body is not valid JSON.");
  absl::StatusOr<std::vector<FaultRule>> rules = ParseFaultRules(request);
  if (!rules.ok()) return BadRequest(std::string(rules.status().message()));
  context.faults->AddRules(*std::move(rules));
  return OkReply(RulesJson(*context.faults));
}

}  // namespace

Reply HandleAdminRequest(const AdminContext& context, const std::string& method,
                         const std::string& path, const std::string& body,
                         std::vector<WebhookEvent>* events) {
  std::vector<std::string> segments =
      absl::StrSplit(path.substr(std::string("/_sandbox").size()), '/', absl::SkipEmpty());
  const std::string route = absl::StrJoin(segments, "/");

  if (segments.size() == 3 && segments[0] == "tokens") {
    if (method != "POST") return MethodNotAllowed(method, path);
    std::optional<TokenStep> step = ParseTokenStep(segments[2]);
    if (!step.has_value()) {
      return ErrorReply(404, "not_found",
                        "Unknown step " + segments[2] +
                            ": use open, start-shooting, finish-shooting, fast-track, complete, "
                            "chase-up or expire.");
    }
    return context.state->AdvanceToken(segments[1], *step, events);
  }
  if (route == "clock") {
    if (method != "GET") return MethodNotAllowed(method, path);
    return OkReply(ClockJson(*context.clock));
  }
  if (route == "clock/advance") {
    if (method != "POST") return MethodNotAllowed(method, path);
    return AdvanceClock(context, body);
  }
  if (route == "faults") {
    if (method == "GET") return OkReply(RulesJson(*context.faults));
    if (method == "POST") return AddFaults(context, body);
    if (method == "DELETE") {
      context.faults->Clear();
      return OkReply(RulesJson(*context.faults));
    }
    return MethodNotAllowed(method, path);
  }
  if (route == "webhooks/deliveries") {
    if (method != "GET") return MethodNotAllowed(method, path);
    return OkReply(DeliveriesJson(*context.webhooks));
  }
  if (route == "state") {
    if (method != "GET") return MethodNotAllowed(method, path);
    return OkReply(context.state->Dump());
  }
  return ErrorReply(404, "not_found", "No sandbox admin endpoint at " + path + ".");
}

}  // namespace inspection::sandbox
