#ifndef SANDBOX_EMULATOR_SANDBOX_STATE_H_
#define SANDBOX_EMULATOR_SANDBOX_STATE_H_

#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "inspection/v1/inspection.pb.h"
#include "inspection/v1/token.pb.h"
#include "nlohmann/json.hpp"
#include "sandbox/clock.h"
#include "sandbox/emulator/reply.h"
#include "sandbox/webhooks/webhook_dispatcher.h"

namespace inspection::sandbox {

// A step of the customer's journey, played through the admin API
// (POST /_sandbox/tokens/<uid>/<step>).
enum class TokenStep {
  kOpen,            // 0 -> 1: the customer opens the link; the inspection appears
  kStartShooting,   // 1 -> 2: first picture taken
  kFinishShooting,  // 2 -> 3: all pictures taken
  kFastTrack,       // 3 -> 4: damage validation by the customer (options.fastTrack only)
  kComplete,        // 4 -> 5 (or 3 -> 5 without fastTrack): report created
  kChaseUp,         // 0..5 -> 6: a chase-up message was sent
  kExpire,          // any: expiresIn becomes now
};
// "open", "start-shooting", "finish-shooting", "fast-track", "complete", "chase-up",
// "expire"; nullopt for anything else.
std::optional<TokenStep> ParseTokenStep(const std::string& name);

struct StateSettings {
  // Seed of the generated ids and uids: the same seed and call sequence give the same ids.
  uint64_t seed = 1;
  // The emulator's base URL, for the image URLs it makes up for self-inspections.
  std::string base_url;
  // `{webapp_url}`: reports are `<webapp_url>/report/<inspectionId>?token=...`.
  std::string webapp_url;
};

// Everything the emulated vendor remembers: tokens, inspections, vehicles, the webhook
// destination and the event subscriptions; and the rules by which they change. No HTTP
// here: the server validates requests (request_checks.h), calls one method per endpoint
// and writes the Reply.
//
// Every method is atomic under one mutex, so reads see a consistent state. Methods that
// cause vendor events append them to `events`, in the order the vendor emits them, already
// filtered by the configuration at that moment (delivered only when webhookUrlV2 is set
// and the event's `webhook` flag is true; testwebhook ignores the flag) and addressed
// (url, x-api-key value). The caller hands them to the WebhookDispatcher.
//
// Times come from the SandboxClock, read at each call: `expired` is computed at every
// read, so advancing the clock expires tokens.
class SandboxState {
 public:
  SandboxState(StateSettings settings, SandboxClock* clock);

  // --- Vendor endpoints; requests already satisfy request_checks.h. ---

  // POST /apiV1/tokenmanager/token -> {token, webApiVersion: "v2.5"}; event tradeinVehicle.
  // `api_token_id` becomes APITokenPtr.id (one per API key, never the key itself).
  Reply CreateToken(const v1::CreateTokenRequest& request, const std::string& api_token_id,
                    std::vector<WebhookEvent>* events);
  // GET /apiV1/tokenmanager/test -> {token, webApiVersion: "v2"}; 404 for an unknown uid.
  Reply GetTokenStatus(const std::string& uid) const;
  // POST /apiV1/damage/vehicle: a type-5 inspection with its results ->
  // {"inspectionId", "status": "processing"}; events newInspection, detectionFinished,
  // createReport.
  Reply DetectDamage(const std::vector<std::string>& urls, std::vector<WebhookEvent>* events);
  // GET /apiv1/inspection/search -> {data, paginationInfo}, newest first.
  Reply SearchInspections(const v1::SearchInspectionsRequest& request) const;
  // GET .../damagesReport/<id> -> the results plus inspectionId; 404 for an unknown id and
  // for a self-inspection that is not complete yet.
  Reply GetDamagesReport(const std::string& inspection_id) const;
  Reply GetWebhookConfig() const;
  Reply UpdateWebhookConfig(const std::string& webhook_url_v2,
                            const std::optional<std::string>& webhook_header_key);
  Reply ListEventConfigs() const;
  // `event_name` must be one of KnownEventNames() (404 otherwise).
  Reply UpdateEventConfig(const std::string& event_name, bool webhook);
  // -> {"status": "send"} and one event of that kind; 400 when no webhookUrlV2 is set.
  Reply TestWebhook(const std::string& event_name, const std::string& inspection_id,
                    std::vector<WebhookEvent>* events);

  // --- Admin (the customer's side, and shortcuts). ---

  // Plays `step` on token `uid` -> the token status body; 404 unknown uid, 409 when the
  // step does not follow from the current status (or the token has expired).
  Reply AdvanceToken(const std::string& uid, TokenStep step, std::vector<WebhookEvent>* events);
  // As PUT configwebhook + PUT configevent {webhook: true} for each of `events`.
  // An empty `header_key` stores null.
  void ConfigureWebhook(const std::string& url, const std::string& header_key,
                        const std::vector<std::string>& events);
  // Everything, for debugging (GET /_sandbox/state). The webhook header key is masked.
  nlohmann::json Dump() const;

 private:
  struct Token {
    std::string id;
    std::string uid;
    std::string vehicle_id;
    std::string customer_id;
    std::string api_token_id;
    std::optional<std::string> creator_user_id;
    absl::Time created_at;
    absl::Time updated_at;
    absl::Time status_updated_at;
    absl::Time expires_at;
    int status = 0;
    nlohmann::json sending_type;  // 0, 1, 2 or null, as sent
    bool shoot_inspect = false;
    bool fast_track = false;
    nlohmann::json customer;  // as sent, for the state dump
    std::string immat;        // tradeIn.immat, may be empty
    std::string vin;
    int validity_days = 0;
    std::string inspection_id;  // empty until the link is opened
    absl::Time fast_track_started_at;
  };

  struct Vehicle {
    std::string id;
    absl::Time created_at;
    absl::Time updated_at;
    std::string immat;
  };

  struct Inspection {
    std::string id;
    uint64_t sequence = 0;  // creation order: newest first in search results
    int type = 4;           // 4 web application, 5 API
    std::string global_state;
    absl::Time created_at;
    absl::Time updated_at;
    std::string vehicle_id;
    std::string token_uid;  // self-inspections only
    std::optional<std::string> username;
    std::vector<std::string> urls;
    std::string thumbnail_id;
    std::optional<absl::Time> detection_started_at;
    std::optional<absl::Time> detection_finished_at;
    std::optional<absl::Time> shoot_end_at;
    int64_t damage_control_ms = 0;
    double fast_track_completion = 0;
    nlohmann::json report;  // DamageReportData once detection finished, else null
    double total_time = 0;  // createReport dataAPI.totalTime, seconds
  };

  struct EventConfig {
    bool webhook = false;
  };

  std::string NewId() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string NewUid() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Creates the record; `immat` may be empty.
  Vehicle& NewVehicle(const std::string& immat, absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Inspection& NewInspection(int type, absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Runs damage detection on `inspection` (fills report and counters).
  void RunDetection(Inspection& inspection, absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  enum class TokenView { kCreate, kStatus, kSearch };
  nlohmann::json TokenJson(const Token& token, TokenView view, absl::Time now) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  nlohmann::json InspectionJson(const Inspection& inspection, absl::Time now) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  nlohmann::json StatusBody(const Token& token, absl::Time now) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  nlohmann::json WebhookConfigJson(bool mask_key) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  nlohmann::json EventConfigJson(const std::string& event_name) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);

  // The payload of `event_name` about `inspection` (nullptr: about a token only, or a
  // test event with made-up ids).
  nlohmann::json EventPayload(const std::string& event_name, const Inspection* inspection,
                              const std::string& token_uid, const std::string& vehicle_id,
                              absl::Time now) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Appends the event when the configuration says it is delivered (`force`: regardless
  // of its `webhook` flag, for testwebhook).
  void Emit(const std::string& event_name, nlohmann::json payload, bool force,
            std::vector<WebhookEvent>* events) const ABSL_SHARED_LOCKS_REQUIRED(mu_);

  const StateSettings settings_;
  SandboxClock* const clock_;

  mutable absl::Mutex mu_;
  std::mt19937_64 rng_ ABSL_GUARDED_BY(mu_);
  std::string company_id_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, Token> tokens_ ABSL_GUARDED_BY(mu_);  // by uid
  std::vector<std::string> token_order_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, Vehicle> vehicles_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, Inspection> inspections_ ABSL_GUARDED_BY(mu_);
  uint64_t next_sequence_ ABSL_GUARDED_BY(mu_) = 1;
  std::optional<std::string> webhook_url_v2_ ABSL_GUARDED_BY(mu_);
  std::optional<std::string> webhook_header_key_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, EventConfig> event_configs_ ABSL_GUARDED_BY(mu_);
};

}  // namespace inspection::sandbox

#endif  // SANDBOX_EMULATOR_SANDBOX_STATE_H_
