#include "sandbox/emulator/sandbox_state.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "adapters/vendor/token_mapper.h"
#include "sandbox/analysis/image_analysis.h"
#include "sandbox/emulator/request_checks.h"

namespace inspection::sandbox {
namespace {

using nlohmann::json;

// Version strings of the spec's samples: creation answers `v2.5`, status answers `v2`.
constexpr char kCreateWebApiVersion[] = "v2.5";
constexpr char kStatusWebApiVersion[] = "v2";
constexpr int kWebAppInspection = 4;
constexpr int kApiInspection = 5;

// The pictures a self-inspection "takes": one per viewpoint of the quality angles. The
// sandbox has no customer uploading photos, so it names them under its own web app.
constexpr const char* kSelfInspectionShots[] = {
    "front", "front-t34-driver",   "side-driver",    "back-t34-driver",
    "back",  "back-t34-passenger", "side-passenger", "front-t34-passenger"};

const char* StatusMeaning(int status) {
  switch (status) {
    case 0:
      return "created, link not opened";
    case 1:
      return "link opened, no picture taken";
    case 2:
      return "shooting in progress";
    case 3:
      return "all pictures taken";
    case 4:
      return "damage validation (fast track) in progress";
    case 5:
      return "inspection complete";
    case 6:
      return "chased up";
    default:
      return "unknown";
  }
}

const char* StepName(TokenStep step) {
  switch (step) {
    case TokenStep::kOpen:
      return "open";
    case TokenStep::kStartShooting:
      return "start-shooting";
    case TokenStep::kFinishShooting:
      return "finish-shooting";
    case TokenStep::kFastTrack:
      return "fast-track";
    case TokenStep::kComplete:
      return "complete";
    case TokenStep::kChaseUp:
      return "chase-up";
    case TokenStep::kExpire:
      return "expire";
  }
  return "?";
}

json TimeOrNull(const std::optional<absl::Time>& time) {
  return time.has_value() ? json(IsoTime(*time)) : json(nullptr);
}

json StringOrNull(const std::optional<std::string>& value) {
  return value.has_value() ? json(*value) : json(nullptr);
}

// Plates are written with or without separators and in either case (`AB-123-CD`,
// `ab123cd`): compare letters and digits only, upper-cased.
std::string NormalisePlate(const std::string& plate) {
  std::string out;
  for (char c : plate) {
    if (absl::ascii_isalnum(static_cast<unsigned char>(c))) {
      out.push_back(absl::ascii_toupper(static_cast<unsigned char>(c)));
    }
  }
  return out;
}

// The vendor's sendingType number for a typed value, null for SENDING_TYPE_NONE.
json SendingTypeJson(v1::SendingType type) {
  switch (type) {
    case v1::SENDING_TYPE_EMAIL:
      return 0;
    case v1::SENDING_TYPE_SMS:
      return 1;
    case v1::SENDING_TYPE_EMAIL_AND_SMS:
      return 2;
    default:
      return nullptr;
  }
}

int DamageNumber(const json& report) {
  if (!report.is_object()) return 0;
  auto it = report.find("damageNumber");
  return it != report.end() && it->is_number_integer() ? it->get<int>() : 0;
}

int DamagedParts(const json& report) {
  if (!report.is_object()) return 0;
  auto it = report.find("damages");
  return it != report.end() && it->is_object() ? static_cast<int>(it->size()) : 0;
}

}  // namespace

std::optional<TokenStep> ParseTokenStep(const std::string& name) {
  for (TokenStep step :
       {TokenStep::kOpen, TokenStep::kStartShooting, TokenStep::kFinishShooting,
        TokenStep::kFastTrack, TokenStep::kComplete, TokenStep::kChaseUp, TokenStep::kExpire}) {
    if (name == StepName(step)) return step;
  }
  return std::nullopt;
}

SandboxState::SandboxState(StateSettings settings, SandboxClock* clock)
    : settings_(std::move(settings)), clock_(clock), rng_(settings_.seed) {
  absl::MutexLock lock(&mu_);
  company_id_ = NewId();
  for (const std::string& name : KnownEventNames()) event_configs_[name] = EventConfig{};
}

std::string SandboxState::NewId() {
  static constexpr char kAlphabet[] =
      "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
  std::string id;
  for (int i = 0; i < 10; ++i) id.push_back(kAlphabet[rng_() % (sizeof(kAlphabet) - 1)]);
  return id;
}

std::string SandboxState::NewUid() {
  // UUID-shaped (8-4-4-4-12 hex): random-looking, as a customer-facing token id should be.
  const uint64_t high = rng_();
  const uint64_t low = rng_();
  char text[37];
  std::snprintf(text, sizeof(text), "%08x-%04x-%04x-%04x-%012llx",
                static_cast<unsigned>(high >> 32), static_cast<unsigned>((high >> 16) & 0xffff),
                static_cast<unsigned>(high & 0xffff), static_cast<unsigned>(low >> 48),
                static_cast<unsigned long long>(low & 0xffffffffffffULL));
  return text;
}

SandboxState::Vehicle& SandboxState::NewVehicle(const std::string& immat, absl::Time now) {
  Vehicle vehicle;
  vehicle.id = NewId();
  vehicle.created_at = now;
  vehicle.updated_at = now;
  vehicle.immat = immat;
  const std::string id = vehicle.id;
  return vehicles_[id] = std::move(vehicle);
}

SandboxState::Inspection& SandboxState::NewInspection(int type, absl::Time now) {
  Inspection inspection;
  inspection.id = NewId();
  inspection.thumbnail_id = NewId();
  inspection.sequence = next_sequence_++;
  inspection.type = type;
  inspection.created_at = now;
  inspection.updated_at = now;
  const std::string id = inspection.id;
  return inspections_[id] = std::move(inspection);
}

void SandboxState::RunDetection(Inspection& inspection, absl::Time now) {
  Vehicle& vehicle = vehicles_[inspection.vehicle_id];
  DamageReportInput input;
  input.inspection_id = inspection.id;
  input.token_uid = inspection.token_uid;
  input.vehicle_id = inspection.vehicle_id;
  input.licence_plate = vehicle.immat;
  input.urls = inspection.urls;
  input.report_base_url = settings_.webapp_url + "/report";
  input.now_iso = IsoTime(now);
  inspection.report = DamageReportData(input);
  if (!inspection.detection_started_at.has_value()) inspection.detection_started_at = now;
  inspection.detection_finished_at = now;
  inspection.updated_at = now;
  // Seconds the vendor's pipeline "took": derived from the id, so stable per inspection.
  inspection.total_time = 2.0 + static_cast<double>(StableHash(inspection.id) % 30000) / 1000.0;
  // An API inspection knows its plate only from the pictures ("visible licence plate
  // numbers are included in results").
  if (vehicle.immat.empty() && inspection.report.is_object()) {
    auto found = inspection.report.find("vehicle");
    if (found != inspection.report.end() && found->is_object()) {
      auto immat = found->find("immat");
      if (immat != found->end() && immat->is_string()) vehicle.immat = immat->get<std::string>();
    }
  }
  vehicle.updated_at = now;
}

json SandboxState::TokenJson(const Token& token, TokenView view, absl::Time now) const {
  json out = {
      {"expired", now >= token.expires_at},
      {"id", token.id},
      {"createdAt", IsoTime(token.created_at)},
      {"updatedAt", IsoTime(token.updated_at)},
      {"tradeinVehicle", true},
      {"tradeinStatus", token.status},
      {"tradeinStatusUpdatedAt", IsoTime(token.status_updated_at)},
      {"sendingType", token.sending_type},
      {"uid", token.uid},
      {"expiresIn", IsoTime(token.expires_at)},
  };
  json options = {{"fastTrack", token.fast_track},
                  {"shootInspect", token.shoot_inspect},
                  {"cost", false},
                  {"report", false},
                  {"downloadRoi", false},
                  {"loadInspection", false}};
  if (view == TokenView::kStatus) options["thirdParty"] = false;
  out["options"] = std::move(options);
  // The search item's tradeInToken lists fewer fields than the token answers (spec,
  // "Inspection search item"); each view carries exactly its list.
  if (view != TokenView::kSearch) {
    out["vehiclePtr"] = {{"id", token.vehicle_id}};
    out["APITokenPtr"] = {{"id", token.api_token_id}};
  }
  if (view != TokenView::kCreate) out["deviceId"] = token.uid + "-pwa";
  if (view == TokenView::kStatus) {
    out["customerPtr"] = {{"id", token.customer_id}};
    out["creatorUserPtr"] =
        token.creator_user_id.has_value() ? json{{"id", *token.creator_user_id}} : json(nullptr);
    if (!token.inspection_id.empty()) {
      out["inspectionPtr"] = {
          {"id", token.inspection_id}, {"type", kWebAppInspection}, {"percentDamage", nullptr}};
    }
  }
  if (view == TokenView::kSearch) {
    out["inspectionPtr"] = {{"id", token.inspection_id}};
    out["monitoring"] = json::array();
  }
  return out;
}

json SandboxState::StatusBody(const Token& token, absl::Time now) const {
  return {{"token", TokenJson(token, TokenView::kStatus, now)},
          {"webApiVersion", kStatusWebApiVersion}};
}

json SandboxState::InspectionJson(const Inspection& inspection, absl::Time now) const {
  const auto vehicle_it = vehicles_.find(inspection.vehicle_id);
  json vehicle = json::object();
  if (vehicle_it != vehicles_.end()) {
    const Vehicle& v = vehicle_it->second;
    vehicle = {{"id", v.id},
               {"createdAt", IsoTime(v.created_at)},
               {"updatedAt", IsoTime(v.updated_at)},
               {"companyPtr", {{"id", company_id_}}},
               {"immat", v.immat.empty() ? json(nullptr) : json(v.immat)}};
  }
  const int damages = DamageNumber(inspection.report);
  json out = {
      {"id", inspection.id},
      {"createdAt", IsoTime(inspection.created_at)},
      {"updatedAt", IsoTime(inspection.updated_at)},
      {"detectionFinished", inspection.detection_finished_at.has_value()},
      {"detectionFinishedAt", TimeOrNull(inspection.detection_finished_at)},
      {"detectionStartedAt", TimeOrNull(inspection.detection_started_at)},
      {"detectionStatus", false},
      {"inspectionCreatedAt", IsoTime(inspection.created_at)},
      {"damageControl", inspection.damage_control_ms},
      {"numberDamage", damages},
      {"numberSevParts", DamagedParts(inspection.report)},
      {"originalNbDamage", damages},
      {"fastTrackCompletion", inspection.fast_track_completion},
      {"type", inspection.type},
      {"vehicle", std::move(vehicle)},
      {"isDeleted", false},
      {"inspected", false},
      {"picturesSelected", json::object()},
      {"thumbnailImagePtr",
       {{"id", inspection.thumbnail_id},
        {"createdAt", IsoTime(inspection.created_at)},
        {"updatedAt", IsoTime(inspection.created_at)}}},
      {"modShootInspectEndDate", TimeOrNull(inspection.shoot_end_at)},
      {"globalState", inspection.global_state},
      {"thumbnailUrl", inspection.urls.empty() ? json(nullptr) : json(inspection.urls.front())},
  };
  if (inspection.username.has_value()) out["user"] = {{"username", *inspection.username}};
  if (!inspection.token_uid.empty()) {
    auto token = tokens_.find(inspection.token_uid);
    if (token != tokens_.end()) {
      out["tradeInToken"] = TokenJson(token->second, TokenView::kSearch, now);
    }
  }
  return out;
}

json SandboxState::WebhookConfigJson(bool mask_key) const {
  json key = StringOrNull(webhook_header_key_);
  if (mask_key && key.is_string()) key = "***";
  return {{"webhookHeaderKey", std::move(key)},
          {"webhookUrl", nullptr},
          {"webhookUrlV2", StringOrNull(webhook_url_v2_)}};
}

json SandboxState::EventConfigJson(const std::string& event_name) const {
  auto it = event_configs_.find(event_name);
  const bool webhook = it != event_configs_.end() && it->second.webhook;
  return {{"eventName", event_name},        {"webhook", webhook},     {"companyEmail", false},
          {"companyEmailAddress", nullptr}, {"customerEmail", false}, {"customerSMS", false},
          {"senderEmail", nullptr},         {"senderName", nullptr}};
}

json SandboxState::EventPayload(const std::string& event_name, const Inspection* inspection,
                                const std::string& token_uid, const std::string& vehicle_id,
                                absl::Time now) const {
  const json inspection_id = inspection != nullptr ? json(inspection->id) : json(nullptr);
  if (event_name != "createReport") {
    // The spec shows only createReport's payload; every other event gets this small
    // shape of the sandbox's own choosing, with the same identifying fields.
    return {{"event", event_name},
            {"inspectionId", inspection_id},
            {"tokenId", token_uid},
            {"vehicleId", vehicle_id},
            {"createdAt", IsoTime(now)}};
  }
  json data;
  double total_time = 0;
  if (inspection != nullptr && inspection->report.is_object()) {
    data = inspection->report;
    total_time = inspection->total_time;
  } else {
    // A report asked for before detection ran (testwebhook): made up the same way.
    DamageReportInput input;
    input.inspection_id = inspection != nullptr ? inspection->id : "";
    input.token_uid = token_uid;
    input.vehicle_id = vehicle_id;
    input.urls = inspection != nullptr ? inspection->urls : std::vector<std::string>{};
    input.report_base_url = settings_.webapp_url + "/report";
    input.now_iso = IsoTime(now);
    data = DamageReportData(input);
    total_time = 2.5;
  }
  return {{"message", "Report OK"},
          {"event", "createReport"},
          {"inspectionId", inspection_id},
          {"tokenId", token_uid},
          {"vehicleId", vehicle_id},
          {"dataAPI", {{"totalTime", total_time}, {"status", 200}, {"data", std::move(data)}}}};
}

void SandboxState::Emit(const std::string& event_name, json payload, bool force,
                        std::vector<WebhookEvent>* events) const {
  if (events == nullptr || !webhook_url_v2_.has_value()) return;
  if (!force) {
    auto it = event_configs_.find(event_name);
    if (it == event_configs_.end() || !it->second.webhook) return;
  }
  WebhookEvent event;
  event.event_name = event_name;
  event.url = *webhook_url_v2_;
  event.header_key = webhook_header_key_.value_or("");
  event.payload = std::move(payload);
  events->push_back(std::move(event));
}

Reply SandboxState::CreateToken(const v1::CreateTokenRequest& request,
                                const std::string& api_token_id,
                                std::vector<WebhookEvent>* events) {
  const absl::Time now = clock_->Now();
  absl::MutexLock lock(&mu_);
  Token token;
  token.id = NewId();
  token.uid = NewUid();
  token.customer_id = NewId();
  token.api_token_id = api_token_id;
  if (request.has_creator_user_id()) token.creator_user_id = request.creator_user_id();
  token.created_at = now;
  token.updated_at = now;
  token.status_updated_at = now;
  token.validity_days = request.validity();
  token.expires_at = now + absl::Hours(24) * request.validity();
  token.sending_type = SendingTypeJson(request.trade_in().sending_type());
  token.shoot_inspect = request.options().shoot_inspect();
  token.fast_track = request.options().fast_track();
  token.immat = request.trade_in().immat();
  token.vin = request.trade_in().vin();
  const v1::Customer& customer = request.customer();
  token.customer = {{"email", customer.email()},
                    {"firstname", customer.firstname()},
                    {"lastname", customer.lastname()},
                    {"phone", customer.phone()},
                    {"locale", vendor::LocaleCode(customer.locale())}};
  token.vehicle_id = NewVehicle(token.immat, now).id;
  const std::string uid = token.uid;
  Token& stored = tokens_[uid] = std::move(token);
  token_order_.push_back(uid);
  Emit("tradeinVehicle", EventPayload("tradeinVehicle", nullptr, uid, stored.vehicle_id, now),
       false, events);
  return OkReply({{"token", TokenJson(stored, TokenView::kCreate, now)},
                  {"webApiVersion", kCreateWebApiVersion}});
}

Reply SandboxState::GetTokenStatus(const std::string& uid) const {
  const absl::Time now = clock_->Now();
  absl::ReaderMutexLock lock(&mu_);
  auto it = tokens_.find(uid);
  if (it == tokens_.end()) {
    return ErrorReply(404, "not_found", "No token has this deviceId.");
  }
  return OkReply(StatusBody(it->second, now));
}

Reply SandboxState::DetectDamage(const std::vector<std::string>& urls,
                                 std::vector<WebhookEvent>* events) {
  const absl::Time now = clock_->Now();
  absl::MutexLock lock(&mu_);
  Inspection& inspection = NewInspection(kApiInspection, now);
  inspection.global_state = "end-inspect";
  inspection.urls = urls;
  inspection.vehicle_id = NewVehicle("", now).id;
  inspection.detection_started_at = now;
  // Results are computed at once; only their delivery waits for the webhook delay.
  RunDetection(inspection, now);
  for (const char* event : {"newInspection", "detectionFinished", "createReport"}) {
    Emit(event, EventPayload(event, &inspection, "", inspection.vehicle_id, now), false, events);
  }
  // The spec does not show this response body; the sandbox answers the new inspection's id
  // (where the gateway's default inspection_id_pointers look first) and a status.
  return OkReply({{"inspectionId", inspection.id}, {"status", "processing"}});
}

Reply SandboxState::SearchInspections(const v1::SearchInspectionsRequest& request) const {
  const absl::Time now = clock_->Now();
  absl::ReaderMutexLock lock(&mu_);
  const std::string plate = NormalisePlate(request.license_plate());
  const std::string username = std::string(absl::StripAsciiWhitespace(request.username()));
  std::vector<const Inspection*> matches;
  for (const auto& [id, inspection] : inspections_) {
    if (!plate.empty()) {
      auto vehicle = vehicles_.find(inspection.vehicle_id);
      if (vehicle == vehicles_.end() || NormalisePlate(vehicle->second.immat) != plate) continue;
    }
    // Both given: inspections linked to the plate AND the agent.
    if (!username.empty() && !(inspection.username.has_value() &&
                               absl::EqualsIgnoreCase(*inspection.username, username))) {
      continue;
    }
    matches.push_back(&inspection);
  }
  std::sort(matches.begin(), matches.end(),
            [](const Inspection* a, const Inspection* b) { return a->sequence > b->sequence; });

  // Defaults the spec leaves open: page 1, 10 per page.
  const int64_t page = request.has_page() ? request.page() : 1;
  const int64_t limit = request.has_limit() ? request.limit() : 10;
  const int64_t total = static_cast<int64_t>(matches.size());
  const int64_t first = (page - 1) * limit;
  json data = json::array();
  for (int64_t i = first; i < total && i < first + limit; ++i) {
    data.push_back(InspectionJson(*matches[static_cast<size_t>(i)], now));
  }
  const int64_t shown = static_cast<int64_t>(data.size());
  json pagination = {
      {"totalInspections", total},
      {"totalPages", (total + limit - 1) / limit},
      {"currentPage", page},
      // 1-based indexes of the first and last item on this page.
      {"range", shown == 0 ? std::string("0-0") : absl::StrCat(first + 1, "-", first + shown)}};
  return OkReply({{"data", std::move(data)}, {"paginationInfo", std::move(pagination)}});
}

Reply SandboxState::GetDamagesReport(const std::string& inspection_id) const {
  absl::ReaderMutexLock lock(&mu_);
  auto it = inspections_.find(inspection_id);
  if (it == inspections_.end()) {
    return ErrorReply(404, "not_found", "No inspection has this id.");
  }
  if (!it->second.report.is_object()) {
    return ErrorReply(404, "not_found",
                      "This inspection has no report yet: the self-inspection is not complete.");
  }
  // The spec does not show this body ("holds the inspection's results"): the sandbox
  // answers the createReport data plus the inspection id.
  json body = it->second.report;
  body["inspectionId"] = inspection_id;
  return OkReply(std::move(body));
}

Reply SandboxState::GetWebhookConfig() const {
  absl::ReaderMutexLock lock(&mu_);
  return OkReply(WebhookConfigJson(/*mask_key=*/false));
}

Reply SandboxState::UpdateWebhookConfig(const std::string& webhook_url_v2,
                                        const std::optional<std::string>& webhook_header_key) {
  absl::MutexLock lock(&mu_);
  // PUT replaces: a call without webhookHeaderKey leaves no key.
  webhook_url_v2_ = webhook_url_v2;
  webhook_header_key_ = webhook_header_key;
  return OkReply(WebhookConfigJson(/*mask_key=*/false));
}

Reply SandboxState::ListEventConfigs() const {
  absl::ReaderMutexLock lock(&mu_);
  json list = json::array();
  for (const std::string& name : KnownEventNames()) list.push_back(EventConfigJson(name));
  return OkReply(std::move(list));
}

Reply SandboxState::UpdateEventConfig(const std::string& event_name, bool webhook) {
  absl::MutexLock lock(&mu_);
  auto it = event_configs_.find(event_name);
  if (it == event_configs_.end()) {
    return ErrorReply(404, "not_found", "No event has this name.");
  }
  it->second.webhook = webhook;
  return OkReply(EventConfigJson(event_name));
}

Reply SandboxState::TestWebhook(const std::string& event_name, const std::string& inspection_id,
                                std::vector<WebhookEvent>* events) {
  const absl::Time now = clock_->Now();
  absl::ReaderMutexLock lock(&mu_);
  if (!webhook_url_v2_.has_value()) {
    return ErrorReply(400, "webhook_not_configured",
                      "webhook not configured: set webhookUrlV2 with PUT "
                      "/apiV1/eventmanager/configwebhook first.");
  }
  json payload;
  auto it = inspection_id.empty() ? inspections_.end() : inspections_.find(inspection_id);
  if (it != inspections_.end()) {
    const Inspection& inspection = it->second;
    payload =
        EventPayload(event_name, &inspection, inspection.token_uid, inspection.vehicle_id, now);
  } else {
    // An unknown (or no) inspection id still gets a test event, about a made-up inspection
    // carrying the id that was asked for.
    Inspection sample;
    sample.id = inspection_id.empty() ? "sandbox-test-inspection" : inspection_id;
    for (const char* shot : kSelfInspectionShots) {
      sample.urls.push_back(absl::StrCat(settings_.base_url, "/webapp/images/test/", shot, ".jpg"));
    }
    payload = EventPayload(event_name, &sample, "", "sandbox-test-vehicle", now);
  }
  Emit(event_name, std::move(payload), /*force=*/true, events);
  return OkReply({{"status", "send"}});
}

namespace {

// Why `step` cannot be taken from tradeinStatus `status` (the conflict's explanation), or
// nothing, with the status it leads to in `*next_status` (unchanged for kExpire).
std::optional<std::string> RefusedStep(TokenStep step, int status, bool fast_track,
                                       int* next_status) {
  switch (step) {
    case TokenStep::kOpen:
      if (status != 0) return std::string("open needs status 0 (link not opened yet).");
      *next_status = 1;
      break;
    case TokenStep::kStartShooting:
      if (status != 1) return std::string("start-shooting needs status 1 (open first).");
      *next_status = 2;
      break;
    case TokenStep::kFinishShooting:
      if (status != 2) {
        return std::string("finish-shooting needs status 2 (start-shooting first).");
      }
      *next_status = 3;
      break;
    case TokenStep::kFastTrack:
      if (!fast_track) {
        return std::string("fast-track needs a token created with options.fastTrack true.");
      }
      if (status != 3) {
        return std::string("fast-track needs status 3 (finish-shooting first).");
      }
      *next_status = 4;
      break;
    case TokenStep::kComplete:
      if (fast_track && status != 4) {
        return std::string(
            "with options.fastTrack true, complete needs status 4 (fast-track first).");
      }
      if (!fast_track && status != 3) {
        return std::string("complete needs status 3 (finish-shooting first).");
      }
      *next_status = 5;
      break;
    case TokenStep::kChaseUp:
      if (status == 6) return std::string("the customer has already been chased up.");
      *next_status = 6;
      break;
    case TokenStep::kExpire:
      break;
  }
  return std::nullopt;
}

}  // namespace

Reply SandboxState::AdvanceToken(const std::string& uid, TokenStep step,
                                 std::vector<WebhookEvent>* events) {
  const absl::Time now = clock_->Now();
  absl::MutexLock lock(&mu_);
  auto it = tokens_.find(uid);
  if (it == tokens_.end()) return ErrorReply(404, "not_found", "No token has this uid.");
  Token& token = it->second;
  auto conflict = [&](const std::string& why) {
    return ErrorReply(
        409, "conflict",
        absl::StrCat("Cannot ", StepName(step), " token ", uid, ": its tradeinStatus is ",
                     token.status, " (", StatusMeaning(token.status), "); ", why));
  };
  if (step != TokenStep::kExpire && now >= token.expires_at) {
    return ErrorReply(
        409, "conflict",
        absl::StrCat("Cannot ", StepName(step), " token ", uid, ": it has expired (expiresIn ",
                     IsoTime(token.expires_at), ")."));
  }
  Inspection* inspection = nullptr;
  if (!token.inspection_id.empty()) inspection = &inspections_[token.inspection_id];
  int next_status = token.status;
  if (std::optional<std::string> why =
          RefusedStep(step, token.status, token.fast_track, &next_status);
      why.has_value()) {
    return conflict(*why);
  }
  if (step == TokenStep::kExpire) token.expires_at = now;

  token.status = next_status;
  token.status_updated_at = now;
  token.updated_at = now;
  switch (step) {
    case TokenStep::kOpen: {
      Inspection& created = NewInspection(kWebAppInspection, now);
      created.global_state = "on-boarding";
      created.vehicle_id = token.vehicle_id;
      created.token_uid = uid;
      created.username = token.creator_user_id;
      for (const char* shot : kSelfInspectionShots) {
        created.urls.push_back(
            absl::StrCat(settings_.base_url, "/webapp/images/", created.id, "/", shot, ".jpg"));
      }
      token.inspection_id = created.id;
      Emit("newInspection", EventPayload("newInspection", &created, uid, token.vehicle_id, now),
           false, events);
      break;
    }
    case TokenStep::kStartShooting:
      if (inspection != nullptr) inspection->global_state = "shoot-inspect";
      break;
    case TokenStep::kFinishShooting:
      if (inspection != nullptr) {
        inspection->global_state = "form-offboard";
        inspection->shoot_end_at = now;
        inspection->detection_started_at = now;
      }
      break;
    case TokenStep::kFastTrack:
      token.fast_track_started_at = now;
      if (inspection != nullptr) inspection->global_state = "fast-track";
      break;
    case TokenStep::kComplete:
      if (inspection != nullptr) {
        inspection->global_state = "end-inspect";
        if (token.fast_track) {
          inspection->damage_control_ms =
              absl::ToInt64Milliseconds(now - token.fast_track_started_at);
          inspection->fast_track_completion = 1;
        }
        RunDetection(*inspection, now);
        for (const char* event : {"detectionFinished", "createReport"}) {
          Emit(event, EventPayload(event, inspection, uid, token.vehicle_id, now), false, events);
        }
      }
      break;
    case TokenStep::kChaseUp:
      Emit("chaseUpVehicle", EventPayload("chaseUpVehicle", inspection, uid, token.vehicle_id, now),
           false, events);
      break;
    case TokenStep::kExpire:
      break;
  }
  if (inspection != nullptr && step != TokenStep::kExpire) inspection->updated_at = now;
  return OkReply(StatusBody(token, now));
}

void SandboxState::ConfigureWebhook(const std::string& url, const std::string& header_key,
                                    const std::vector<std::string>& events) {
  absl::MutexLock lock(&mu_);
  webhook_url_v2_ = url;
  if (header_key.empty()) {
    webhook_header_key_.reset();
  } else {
    webhook_header_key_ = header_key;
  }
  for (const std::string& name : events) {
    auto it = event_configs_.find(name);
    if (it != event_configs_.end()) it->second.webhook = true;
  }
}

json SandboxState::Dump() const {
  const absl::Time now = clock_->Now();
  absl::ReaderMutexLock lock(&mu_);
  json tokens = json::array();
  for (const std::string& uid : token_order_) {
    const Token& token = tokens_.at(uid);
    json entry = TokenJson(token, TokenView::kStatus, now);
    entry["customer"] = token.customer;
    entry["creatorUserId"] = StringOrNull(token.creator_user_id);
    entry["immat"] = token.immat;
    entry["vin"] = token.vin;
    entry["validity"] = token.validity_days;
    tokens.push_back(std::move(entry));
  }
  std::vector<const Inspection*> ordered;
  for (const auto& [id, inspection] : inspections_) ordered.push_back(&inspection);
  std::sort(ordered.begin(), ordered.end(),
            [](const Inspection* a, const Inspection* b) { return a->sequence < b->sequence; });
  json inspections = json::array();
  for (const Inspection* inspection : ordered) {
    json entry = InspectionJson(*inspection, now);
    entry["urls"] = inspection->urls;
    entry["hasReport"] = inspection->report.is_object();
    inspections.push_back(std::move(entry));
  }
  json event_configs = json::array();
  for (const std::string& name : KnownEventNames()) event_configs.push_back(EventConfigJson(name));
  return {{"now", IsoTime(now)},
          {"tokens", std::move(tokens)},
          {"inspections", std::move(inspections)},
          {"webhookConfig", WebhookConfigJson(/*mask_key=*/true)},
          {"eventConfigs", std::move(event_configs)}};
}

}  // namespace inspection::sandbox
