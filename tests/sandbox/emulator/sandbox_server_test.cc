// The emulator end to end: a SandboxServer on an OS-chosen port, driven over real HTTP
// (libcurl, the gateway's own transport), webhooks received by a FakeVendor.
#include "sandbox/emulator/sandbox_server.h"

#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "adapters/http/curl_transport.h"
#include "adapters/vendor/damage_mapper.h"
#include "adapters/vendor/event_config_mapper.h"
#include "adapters/vendor/image_mapper.h"
#include "adapters/vendor/token_mapper.h"
#include "adapters/vendor/vendor_mapping.h"
#include "adapters/vendor/vendor_routes.h"
#include "inspection/v1/inspection.pb.h"
#include "tests/support/fake_vendor.h"
#include "tests/support/wait.h"

namespace inspection::sandbox {
namespace {

using ::inspection::testing::FakeVendor;
using ::inspection::testing::RecordedRequest;
using ::inspection::testing::ScriptedResponse;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using json = nlohmann::json;

// Generous for a loaded 2-core machine; every wait returns as soon as its condition holds.
constexpr std::chrono::milliseconds kDeadline{20000};
constexpr char kKey[] = "test-key-3f9a";
constexpr char kOtherKey[] = "second-key-77c1";
constexpr char kWebhookKey[] = "hook-secret-19d2";

// One answer, decoded.
struct Answer {
  http::HttpResult result;
  long status() const { return result.response.status; }
  json body;  // discarded when not JSON
  const std::string* Header(std::string_view name) const {
    return result.response.FindHeader(name);
  }
};

// A token creation request that satisfies every rule.
json ValidTokenRequest() {
  return {{"options",
           {{"shootInspect", true},
            {"fastTrack", true},
            {"cost", false},
            {"report", false},
            {"downloadRoi", false}}},
          {"tradeIn", {{"tradeinVehicle", true}, {"immat", "AB-123-CD"}, {"sendingType", 2}}},
          {"customer",
           {{"clientType", "customer"},
            {"email", "jane@example.com"},
            {"firstname", "Jane"},
            {"lastname", "Doe"},
            {"gender", "women"},
            {"phone", "+33612345678"},
            {"locale", "fr"}}},
          {"creatorUserId", "agent-007"},
          {"validity", 90}};
}

// The decode must keep nothing aside: every key the sandbox sends has a typed field, of
// the right JSON type, with a known enum value.
void ExpectClean(const vendor::DecodeReport& report, const std::string& what) {
  EXPECT_THAT(report.unknown_paths, IsEmpty()) << what;
  EXPECT_THAT(report.type_mismatch_paths, IsEmpty()) << what;
  EXPECT_THAT(report.unknown_enum_paths, IsEmpty()) << what;
}

class SandboxServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(receiver_.Start());
    ScriptedResponse ok;
    ok.status = 200;
    ok.body = "{}";
    receiver_.RespondWith(ok);
    auto transport = http::CurlTransport::Create();
    ASSERT_TRUE(transport.ok()) << transport.status();
    client_ = *std::move(transport);
    StartSandbox(DefaultOptions());
  }

  void TearDown() override {
    if (sandbox_ != nullptr) sandbox_->Stop();
  }

  static SandboxOptions DefaultOptions() {
    SandboxOptions options;
    options.api_keys = {kKey, kOtherKey};
    options.webhook_delay = std::chrono::milliseconds(10);
    options.webhook_retry_schedule = {std::chrono::milliseconds(50)};
    options.threads = 16;
    return options;
  }

  void StartSandbox(SandboxOptions options) {
    sandbox_.reset();
    auto started = SandboxServer::Start(std::move(options));
    ASSERT_TRUE(started.ok()) << started.status();
    sandbox_ = *std::move(started);
  }

  Answer Send(const std::string& method, const std::string& path, const std::string& body,
              const std::optional<std::string>& key = std::string(kKey)) {
    return SendWith(*client_, method, path, body, key);
  }

  // On a connection of its own. libcurl silently re-sends a request once when a reused
  // keep-alive connection dies before any response byte: a reset must hit a fresh one to
  // be seen.
  Answer SendOnNewConnection(const std::string& method, const std::string& path,
                             const std::string& body) {
    auto transport = http::CurlTransport::Create();
    EXPECT_TRUE(transport.ok());
    return SendWith(**transport, method, path, body, std::string(kKey));
  }

  Answer SendWith(http::HttpTransport& transport, const std::string& method,
                  const std::string& path, const std::string& body,
                  const std::optional<std::string>& key) {
    http::HttpRequest request;
    request.method = method;
    request.url = sandbox_->BaseUrl() + path;
    if (key.has_value()) request.headers.emplace_back("X-API-Key", *key);
    if (!body.empty()) request.headers.emplace_back("Content-Type", "application/json");
    request.body = body;
    request.timeout = kDeadline;
    auto promise = std::make_shared<std::promise<http::HttpResult>>();
    std::future<http::HttpResult> future = promise->get_future();
    transport.Send(std::move(request),
                   [promise](http::HttpResult result) { promise->set_value(std::move(result)); });
    Answer answer;
    answer.result = future.get();
    answer.body = json::parse(answer.result.response.body, nullptr, false);
    return answer;
  }

  Answer Get(const std::string& path) { return Send("GET", path, ""); }
  Answer Post(const std::string& path, const json& body) { return Send("POST", path, body.dump()); }
  Answer Put(const std::string& path, const json& body) { return Send("PUT", path, body.dump()); }
  // Admin calls carry no key.
  Answer Admin(const std::string& method, const std::string& path, const std::string& body = "") {
    return Send(method, "/_sandbox" + path, body, std::nullopt);
  }

  // Creates a token and returns its uid.
  std::string CreateToken(json request = ValidTokenRequest()) {
    Answer answer = Post("/apiV1/tokenmanager/token", request);
    EXPECT_EQ(answer.status(), 200) << answer.result.response.body;
    if (!answer.body.is_object() || !answer.body.contains("token")) return "";
    return answer.body["token"].value("uid", "");
  }

  Answer Status(const std::string& uid) {
    return Get("/apiV1/tokenmanager/test?deviceId=" + uid + "-pwa");
  }

  Answer Step(const std::string& uid, const std::string& step) {
    return Admin("POST", "/tokens/" + uid + "/" + step);
  }

  void AdvanceClock(double seconds) {
    ASSERT_EQ(Admin("POST", "/clock/advance", json{{"seconds", seconds}}.dump()).status(), 200);
  }

  // Points webhooks at the receiver and enables `events`, through the vendor API.
  void ConfigureWebhooks(const std::vector<std::string>& events) {
    ASSERT_EQ(
        Put("/apiV1/eventmanager/configwebhook",
            {{"webhookUrlV2", receiver_.BaseUrl() + "/hook"}, {"webhookHeaderKey", kWebhookKey}})
            .status(),
        200);
    for (const std::string& event : events) {
      ASSERT_EQ(Put("/apiV1/eventmanager/configevent", {{"eventName", event}, {"webhook", true}})
                    .status(),
                200);
    }
  }

  // Event names of the deliveries the receiver got, in arrival order.
  std::vector<std::string> DeliveredEvents() {
    std::vector<std::string> names;
    for (const RecordedRequest& request : receiver_.Requests()) {
      json payload = json::parse(request.body, nullptr, false);
      names.push_back(payload.is_object() ? payload.value("event", "?") : "?");
    }
    return names;
  }

  void AddFault(const json& rule) {
    Answer added = Admin("POST", "/faults", rule.dump());
    ASSERT_EQ(added.status(), 200) << added.result.response.body;
  }

  FakeVendor receiver_;
  std::unique_ptr<http::CurlTransport> client_;
  std::unique_ptr<SandboxServer> sandbox_;
};

// ---- Authentication ----

TEST_F(SandboxServerTest, RefusesRequestsWithoutOrWithAnUnknownApiKey) {
  for (const std::optional<std::string>& key :
       {std::optional<std::string>(), std::optional<std::string>("wrong-key-abc")}) {
    Answer answer = Send("GET", "/apiV1/eventmanager/configwebhook", "", key);
    EXPECT_EQ(answer.status(), 401);
    ASSERT_TRUE(answer.body.is_object()) << answer.result.response.body;
    EXPECT_EQ(answer.body["error"], "unauthorized");
    EXPECT_TRUE(answer.body["message"].is_string());
    EXPECT_THAT(answer.result.response.body, Not(HasSubstr("wrong-key-abc")));
  }
  // Refused before anything happens: no token was created.
  EXPECT_EQ(
      Send("POST", "/apiV1/tokenmanager/token", ValidTokenRequest().dump(), std::nullopt).status(),
      401);
  EXPECT_THAT(Admin("GET", "/state").body["tokens"], IsEmpty());
}

TEST_F(SandboxServerTest, AcceptsEveryConfiguredKeyWithTheHeaderNameInAnyCase) {
  for (const char* name : {"X-API-Key", "x-api-key", "X-Api-Key"}) {
    http::HttpRequest request;
    request.method = "GET";
    request.url = sandbox_->BaseUrl() + "/apiV1/eventmanager/configwebhook";
    request.headers.emplace_back(name, kOtherKey);
    std::promise<http::HttpResult> promise;
    client_->Send(std::move(request),
                  [&promise](http::HttpResult result) { promise.set_value(std::move(result)); });
    http::HttpResult result = promise.get_future().get();
    EXPECT_EQ(result.response.status, 200) << name;
  }
}

// ---- Token creation rules ----

struct BrokenRule {
  const char* name;
  std::function<void(json&)> breaks;
  const char* field;
};

TEST_F(SandboxServerTest, RefusesTokenRequestsThatBreakARuleNamingTheField) {
  const std::vector<BrokenRule> cases = {
      {"phone without country code", [](json& r) { r["customer"]["phone"] = "0612345678"; },
       "customer.phone"},
      {"cost true", [](json& r) { r["options"]["cost"] = true; }, "options.cost"},
      {"report as a number", [](json& r) { r["options"]["report"] = 0; }, "options.report"},
      {"downloadRoi true", [](json& r) { r["options"]["downloadRoi"] = true; },
       "options.downloadRoi"},
      {"tradeinVehicle false", [](json& r) { r["tradeIn"]["tradeinVehicle"] = false; },
       "tradeIn.tradeinVehicle"},
      {"sendingType missing", [](json& r) { r["tradeIn"].erase("sendingType"); },
       "tradeIn.sendingType"},
      {"sendingType out of range", [](json& r) { r["tradeIn"]["sendingType"] = 7; },
       "tradeIn.sendingType"},
      {"clientType not customer", [](json& r) { r["customer"]["clientType"] = "dealer"; },
       "customer.clientType"},
      {"locale not supported", [](json& r) { r["customer"]["locale"] = "pt"; }, "customer.locale"},
      {"email missing", [](json& r) { r["customer"].erase("email"); }, "customer.email"},
      {"vin too short", [](json& r) { r["tradeIn"]["vin"] = "VF1ABC"; }, "tradeIn.vin"},
      {"validity zero", [](json& r) { r["validity"] = 0; }, "validity"},
      {"validity a string", [](json& r) { r["validity"] = "90"; }, "validity"},
      {"shootInspect missing", [](json& r) { r["options"].erase("shootInspect"); },
       "options.shootInspect"},
      {"creatorUserId blank", [](json& r) { r["creatorUserId"] = " "; }, "creatorUserId"},
  };
  for (const BrokenRule& rule : cases) {
    json request = ValidTokenRequest();
    rule.breaks(request);
    Answer answer = Post("/apiV1/tokenmanager/token", request);
    EXPECT_EQ(answer.status(), 400) << rule.name;
    ASSERT_TRUE(answer.body.is_object()) << rule.name;
    EXPECT_EQ(answer.body["error"], "invalid_request") << rule.name;
    ASSERT_TRUE(answer.body["fields"].is_array()) << rule.name;
    ASSERT_FALSE(answer.body["fields"].empty()) << rule.name;
    EXPECT_EQ(answer.body["fields"][0]["field"], rule.field)
        << rule.name << ": " << answer.result.response.body;
    EXPECT_TRUE(answer.body["fields"][0]["description"].is_string()) << rule.name;
  }
  // None of them created anything.
  EXPECT_THAT(Admin("GET", "/state").body["tokens"], IsEmpty());
}

TEST_F(SandboxServerTest, RefusesABodyThatIsNotAJsonObject) {
  for (const std::string& body : {std::string("{not json"), std::string("[1, 2]"), std::string()}) {
    Answer answer = Send("POST", "/apiV1/tokenmanager/token", body);
    EXPECT_EQ(answer.status(), 400) << body;
    ASSERT_TRUE(answer.body.is_object()) << body;
    EXPECT_EQ(answer.body["fields"][0]["field"], "body") << body;
  }
}

TEST_F(SandboxServerTest, RefusesABodyOver16MiBWith413AndTheNextRequestIsServed) {
  // Refused from its declared length, before it is read; the client (which sends it all
  // before reading) still gets the answer.
  const std::string too_large(16 * 1024 * 1024 + 1, ' ');
  EXPECT_EQ(SendOnNewConnection("POST", "/apiV1/tokenmanager/token", too_large).status(), 413);
  EXPECT_EQ(SendOnNewConnection("GET", "/apiV1/eventmanager/configwebhook", too_large).status(),
            413);
  EXPECT_FALSE(CreateToken().empty());
}

TEST_F(SandboxServerTest, ToleratesUnknownKeysAndOmittedFixedValues) {
  json request = ValidTokenRequest();
  request["somethingNew"] = {{"x", 1}};
  request["options"].erase("cost");
  request["tradeIn"].erase("tradeinVehicle");
  request["tradeIn"]["sendingType"] = nullptr;
  request["customer"].erase("clientType");
  request["customer"]["gender"] = nullptr;
  Answer answer = Post("/apiV1/tokenmanager/token", request);
  EXPECT_EQ(answer.status(), 200) << answer.result.response.body;
  EXPECT_TRUE(answer.body["token"]["sendingType"].is_null());
}

// ---- Tokens ----

TEST_F(SandboxServerTest, CreatesATokenInTheSpecShape) {
  Answer answer = Post("/apiV1/tokenmanager/token", ValidTokenRequest());
  ASSERT_EQ(answer.status(), 200) << answer.result.response.body;
  EXPECT_EQ(answer.body["webApiVersion"], "v2.5");
  const json& token = answer.body["token"];
  EXPECT_EQ(token["tradeinVehicle"], true);
  EXPECT_EQ(token["tradeinStatus"], 0);
  EXPECT_EQ(token["expired"], false);
  EXPECT_EQ(token["sendingType"], 2);
  EXPECT_EQ(token["options"], (json{{"shootInspect", true},
                                    {"fastTrack", true},
                                    {"cost", false},
                                    {"report", false},
                                    {"downloadRoi", false},
                                    {"loadInspection", false}}));
  for (const char* key :
       {"id", "uid", "createdAt", "updatedAt", "tradeinStatusUpdatedAt", "expiresIn"}) {
    EXPECT_TRUE(token[key].is_string()) << key;
  }
  EXPECT_TRUE(token["vehiclePtr"]["id"].is_string());
  EXPECT_TRUE(token["APITokenPtr"]["id"].is_string());
  EXPECT_FALSE(token.contains("inspectionPtr"));
  EXPECT_NE(token["id"], token["uid"]);
  // The key itself never appears.
  EXPECT_THAT(answer.result.response.body, Not(HasSubstr(kKey)));

  // expiresIn = createdAt + validity days.
  absl::Time created;
  absl::Time expires;
  std::string error;
  ASSERT_TRUE(
      absl::ParseTime(absl::RFC3339_full, token["createdAt"].get<std::string>(), &created, &error));
  ASSERT_TRUE(
      absl::ParseTime(absl::RFC3339_full, token["expiresIn"].get<std::string>(), &expires, &error));
  EXPECT_EQ(expires - created, absl::Hours(24 * 90));

  // Each key is its own APITokenPtr; uids differ between tokens.
  Answer other = Send("POST", "/apiV1/tokenmanager/token", ValidTokenRequest().dump(), kOtherKey);
  ASSERT_EQ(other.status(), 200);
  EXPECT_NE(other.body["token"]["APITokenPtr"]["id"], token["APITokenPtr"]["id"]);
  EXPECT_NE(other.body["token"]["uid"], token["uid"]);
}

TEST_F(SandboxServerTest, TokenStatusAddsTheStatusFields) {
  const std::string uid = CreateToken();
  Answer status = Status(uid);
  ASSERT_EQ(status.status(), 200) << status.result.response.body;
  EXPECT_EQ(status.body["webApiVersion"], "v2");
  const json& token = status.body["token"];
  EXPECT_EQ(token["uid"], uid);
  EXPECT_EQ(token["deviceId"], uid + "-pwa");
  EXPECT_EQ(token["options"]["thirdParty"], false);
  EXPECT_EQ(token["creatorUserPtr"]["id"], "agent-007");
  EXPECT_TRUE(token["customerPtr"]["id"].is_string());
  EXPECT_FALSE(token.contains("inspectionPtr"));

  EXPECT_EQ(Get("/apiV1/tokenmanager/test?deviceId=unknown-uid-pwa").status(), 404);
  Answer no_suffix = Get("/apiV1/tokenmanager/test?deviceId=" + uid);
  EXPECT_EQ(no_suffix.status(), 400);
  EXPECT_EQ(no_suffix.body["fields"][0]["field"], "deviceId");
  EXPECT_EQ(Get("/apiV1/tokenmanager/test").status(), 400);
}

TEST_F(SandboxServerTest, TokenExpiresWhenTheSandboxClockPassesItsValidity) {
  json request = ValidTokenRequest();
  request["validity"] = 1;
  const std::string uid = CreateToken(request);
  EXPECT_EQ(Status(uid).body["token"]["expired"], false);
  AdvanceClock(86400 - 60);
  EXPECT_EQ(Status(uid).body["token"]["expired"], false);
  AdvanceClock(120);
  EXPECT_EQ(Status(uid).body["token"]["expired"], true);

  Answer clock = Admin("GET", "/clock");
  ASSERT_EQ(clock.status(), 200);
  EXPECT_DOUBLE_EQ(clock.body["offsetSeconds"].get<double>(), 86400 + 60);
  EXPECT_TRUE(clock.body["now"].is_string());
  EXPECT_EQ(Admin("POST", "/clock/advance", R"({"seconds": -5})").status(), 400);
}

TEST_F(SandboxServerTest, ExpireStepExpiresAtOnceAndBlocksFurtherSteps) {
  const std::string uid = CreateToken();
  Answer expired = Step(uid, "expire");
  ASSERT_EQ(expired.status(), 200) << expired.result.response.body;
  EXPECT_EQ(expired.body["token"]["expired"], true);
  EXPECT_EQ(Status(uid).body["token"]["expired"], true);
  Answer open = Step(uid, "open");
  EXPECT_EQ(open.status(), 409);
  EXPECT_THAT(open.body["message"].get<std::string>(), HasSubstr("expired"));
}

// ---- The customer's journey ----

TEST_F(SandboxServerTest, AdminWalksATokenThroughEveryStatus) {
  const std::string uid = CreateToken();
  const std::vector<std::pair<std::string, int>> walk = {
      {"open", 1},       {"start-shooting", 2}, {"finish-shooting", 3},
      {"fast-track", 4}, {"complete", 5},       {"chase-up", 6}};
  const std::vector<std::string> global_states = {"on-boarding", "shoot-inspect", "form-offboard",
                                                  "fast-track",  "end-inspect",   "end-inspect"};
  std::string previous_update =
      Status(uid).body["token"]["tradeinStatusUpdatedAt"].get<std::string>();
  for (size_t i = 0; i < walk.size(); ++i) {
    const auto& [step, status] = walk[i];
    AdvanceClock(1);  // so that every step has its own timestamp
    // A step out of order first: the one after next (chase-up may come at any time).
    if (i + 2 < walk.size() && walk[i + 2].first != "chase-up") {
      Answer wrong = Step(uid, walk[i + 2].first);
      EXPECT_EQ(wrong.status(), 409) << walk[i + 2].first << " at step " << step;
      EXPECT_THAT(wrong.body["message"].get<std::string>(), HasSubstr("tradeinStatus"));
    }
    Answer stepped = Step(uid, step);
    ASSERT_EQ(stepped.status(), 200) << step << ": " << stepped.result.response.body;

    const json token = Status(uid).body["token"];
    EXPECT_EQ(token["tradeinStatus"], status) << step;
    EXPECT_NE(token["tradeinStatusUpdatedAt"], previous_update) << step;
    EXPECT_EQ(token["updatedAt"], token["tradeinStatusUpdatedAt"]) << step;
    previous_update = token["tradeinStatusUpdatedAt"].get<std::string>();
    EXPECT_EQ(token["inspectionPtr"]["type"], 4) << step;
    EXPECT_TRUE(token["inspectionPtr"]["percentDamage"].is_null()) << step;

    Answer search = Get("/apiv1/inspection/search?username=agent-007");
    ASSERT_EQ(search.body["data"].size(), 1u) << step;
    EXPECT_EQ(search.body["data"][0]["globalState"], global_states[i]) << step;
    EXPECT_EQ(search.body["data"][0]["tradeInToken"]["tradeinStatus"], status) << step;
  }
  // Nothing comes after 6; repeating a step is out of order too.
  EXPECT_EQ(Step(uid, "chase-up").status(), 409);
  EXPECT_EQ(Step(uid, "open").status(), 409);
  EXPECT_EQ(Step(uid, "dance").status(), 404);
  EXPECT_EQ(Step("no-such-uid", "open").status(), 404);
}

TEST_F(SandboxServerTest, FastTrackNeedsTheOptionAndCompleteFollowsShootingWithoutIt) {
  json request = ValidTokenRequest();
  request["options"]["fastTrack"] = false;
  const std::string uid = CreateToken(request);
  for (const char* step : {"open", "start-shooting", "finish-shooting"}) {
    ASSERT_EQ(Step(uid, step).status(), 200) << step;
  }
  Answer fast_track = Step(uid, "fast-track");
  EXPECT_EQ(fast_track.status(), 409);
  EXPECT_THAT(fast_track.body["message"].get<std::string>(), HasSubstr("fastTrack"));
  ASSERT_EQ(Step(uid, "complete").status(), 200);
  EXPECT_EQ(Status(uid).body["token"]["tradeinStatus"], 5);

  // With fastTrack, complete needs the validation step first.
  const std::string fast = CreateToken();
  for (const char* step : {"open", "start-shooting", "finish-shooting"}) {
    ASSERT_EQ(Step(fast, step).status(), 200) << step;
  }
  EXPECT_EQ(Step(fast, "complete").status(), 409);
}

TEST_F(SandboxServerTest, InspectionAppearsWhenTheLinkIsOpened) {
  const std::string uid = CreateToken();
  Answer before = Get("/apiv1/inspection/search?licensePlate=AB-123-CD");
  ASSERT_EQ(before.status(), 200);
  EXPECT_THAT(before.body["data"], IsEmpty());
  EXPECT_EQ(before.body["paginationInfo"]["range"], "0-0");

  ASSERT_EQ(Step(uid, "open").status(), 200);
  // Plates match whatever their separators and case.
  Answer after = Get("/apiv1/inspection/search?licensePlate=ab123cd");
  ASSERT_EQ(after.body["data"].size(), 1u) << after.result.response.body;
  const json& item = after.body["data"][0];
  EXPECT_EQ(item["type"], 4);
  EXPECT_EQ(item["globalState"], "on-boarding");
  EXPECT_EQ(item["detectionFinished"], false);
  EXPECT_EQ(item["vehicle"]["immat"], "AB-123-CD");
  EXPECT_EQ(item["user"]["username"], "agent-007");
  EXPECT_EQ(item["tradeInToken"]["uid"], uid);
  EXPECT_EQ(item["tradeInToken"]["deviceId"], uid + "-pwa");
  EXPECT_EQ(item["tradeInToken"]["inspectionPtr"]["id"], item["id"]);
  EXPECT_EQ(Status(uid).body["token"]["inspectionPtr"]["id"], item["id"]);
}

TEST_F(SandboxServerTest, SearchPaginatesNewestFirst) {
  std::vector<std::string> inspection_ids;
  for (int i = 0; i < 25; ++i) {
    json request = ValidTokenRequest();
    request["creatorUserId"] = "agent-pages";
    request["tradeIn"]["immat"] = "PG-" + std::to_string(100 + i) + "-ZZ";
    const std::string uid = CreateToken(request);
    Answer opened = Step(uid, "open");
    ASSERT_EQ(opened.status(), 200);
    inspection_ids.push_back(opened.body["token"]["inspectionPtr"]["id"].get<std::string>());
  }
  // Another agent's inspection is not listed.
  json other = ValidTokenRequest();
  other["creatorUserId"] = "agent-other";
  ASSERT_EQ(Step(CreateToken(other), "open").status(), 200);

  struct Page {
    int page;
    size_t count;
    const char* range;
  };
  for (const Page& expected :
       {Page{1, 10, "1-10"}, Page{2, 10, "11-20"}, Page{3, 5, "21-25"}, Page{4, 0, "0-0"}}) {
    Answer answer = Get(absl::StrCat(
        "/apiv1/inspection/search?username=agent-pages&page=", expected.page, "&limit=10"));
    ASSERT_EQ(answer.status(), 200);
    EXPECT_EQ(answer.body["data"].size(), expected.count) << expected.page;
    const json& info = answer.body["paginationInfo"];
    EXPECT_EQ(info["totalInspections"], 25);
    EXPECT_EQ(info["totalPages"], 3);
    EXPECT_EQ(info["currentPage"], expected.page);
    EXPECT_EQ(info["range"], expected.range) << expected.page;
    if (expected.count > 0) {
      // Newest first: page p starts with the (25 - 10 (p - 1))th inspection created.
      EXPECT_EQ(answer.body["data"][0]["id"], inspection_ids[25 - 10 * (expected.page - 1) - 1]);
    }
  }
  // Defaults: page 1, 10 per page.
  Answer defaults = Get("/apiv1/inspection/search?username=agent-pages");
  EXPECT_EQ(defaults.body["data"].size(), 10u);
  EXPECT_EQ(defaults.body["paginationInfo"]["currentPage"], 1);
  // Plate and username together: both must match.
  Answer both = Get("/apiv1/inspection/search?username=agent-pages&licensePlate=PG-107-ZZ");
  ASSERT_EQ(both.body["data"].size(), 1u);
  EXPECT_EQ(both.body["data"][0]["id"], inspection_ids[7]);
  EXPECT_THAT(
      Get("/apiv1/inspection/search?username=agent-other&licensePlate=PG-107-ZZ").body["data"],
      IsEmpty());
}

TEST_F(SandboxServerTest, SearchNeedsAPlateOrAUsername) {
  Answer neither = Get("/apiv1/inspection/search?page=1");
  EXPECT_EQ(neither.status(), 400);
  EXPECT_EQ(neither.body["fields"][0]["field"], "licensePlate");
  Answer bad_limit = Get("/apiv1/inspection/search?username=a&limit=0");
  EXPECT_EQ(bad_limit.status(), 400);
  EXPECT_EQ(bad_limit.body["fields"][0]["field"], "limit");
  EXPECT_EQ(Get("/apiv1/inspection/search?username=a&page=two").body["fields"][0]["field"], "page");
}

TEST_F(SandboxServerTest, DamagesReportExistsOnceTheSelfInspectionIsComplete) {
  const std::string uid = CreateToken();
  Answer opened = Step(uid, "open");
  const std::string id = opened.body["token"]["inspectionPtr"]["id"];
  const std::string path = "/apiv1/inspection/apiV1_sdk/inspection/damagesReport/" + id;
  EXPECT_EQ(Get("/apiv1/inspection/apiV1_sdk/inspection/damagesReport/nope").status(), 404);
  Answer early = Get(path);
  EXPECT_EQ(early.status(), 404);
  EXPECT_EQ(early.body["error"], "not_found");

  for (const char* step : {"start-shooting", "finish-shooting", "fast-track", "complete"}) {
    ASSERT_EQ(Step(uid, step).status(), 200) << step;
  }
  Answer report = Get(path);
  ASSERT_EQ(report.status(), 200) << report.result.response.body;
  EXPECT_EQ(report.body["inspectionId"], id);
  EXPECT_EQ(report.body["tokenId"], uid);
  EXPECT_TRUE(report.body["damages"].is_object());
  EXPECT_TRUE(report.body["detectionList"].is_array());
  EXPECT_TRUE(report.body["vehicle"].is_object());

  Answer search = Get("/apiv1/inspection/search?username=agent-007");
  const json& item = search.body["data"][0];
  EXPECT_EQ(item["detectionFinished"], true);
  EXPECT_TRUE(item["detectionFinishedAt"].is_string());
  EXPECT_TRUE(item["modShootInspectEndDate"].is_string());
  EXPECT_EQ(item["numberDamage"], report.body["damageNumber"]);
  EXPECT_EQ(item["fastTrackCompletion"], 1);
}

// ---- Damage detection and webhooks ----

TEST_F(SandboxServerTest, DamageDetectionCreatesAnApiInspectionAndDeliversItsEventsInOrder) {
  ConfigureWebhooks({"newInspection", "detectionFinished", "createReport"});
  Answer answer =
      Post("/apiV1/damage/vehicle",
           {{"urls", {"https://img.example/car/front.jpg", "https://img.example/car/back.jpg"}}});
  ASSERT_EQ(answer.status(), 200) << answer.result.response.body;
  EXPECT_EQ(answer.body["status"], "processing");
  const std::string id = answer.body["inspectionId"];

  ASSERT_TRUE(receiver_.WaitForRequests(3, kDeadline));
  EXPECT_THAT(DeliveredEvents(), ElementsAre("newInspection", "detectionFinished", "createReport"));
  for (const RecordedRequest& request : receiver_.Requests()) {
    EXPECT_EQ(request.method, "POST");
    EXPECT_EQ(request.path, "/hook");
    ASSERT_NE(request.Header("x-api-key"), nullptr);
    EXPECT_EQ(*request.Header("x-api-key"), kWebhookKey);
    json payload = json::parse(request.body, nullptr, false);
    ASSERT_TRUE(payload.is_object());
    EXPECT_EQ(payload["inspectionId"], id);
    EXPECT_EQ(payload["tokenId"], "");
    EXPECT_TRUE(payload["vehicleId"].is_string());
  }
  const json report = json::parse(receiver_.Requests()[2].body, nullptr, false);
  EXPECT_EQ(report["message"], "Report OK");
  EXPECT_EQ(report["event"], "createReport");
  EXPECT_EQ(report["dataAPI"]["status"], 200);
  EXPECT_TRUE(report["dataAPI"]["totalTime"].is_number());
  const json& data = report["dataAPI"]["data"];
  for (const char* key :
       {"damages", "vehicle", "damageNumber", "detectionList", "reportUrl", "reportUrlWithoutCosts",
        "customFormResults", "severity", "inspectionImages"}) {
    EXPECT_TRUE(data.contains(key)) << key;
  }

  // The inspection is searchable by the plate its pictures show, type 5, finished.
  const json plate = data["vehicle"]["immat"];
  ASSERT_TRUE(plate.is_string() && !plate.get<std::string>().empty()) << data["vehicle"];
  Answer search = Get("/apiv1/inspection/search?licensePlate=" + plate.get<std::string>());
  ASSERT_EQ(search.body["data"].size(), 1u) << search.result.response.body;
  EXPECT_EQ(search.body["data"][0]["id"], id);
  EXPECT_EQ(search.body["data"][0]["type"], 5);
  EXPECT_EQ(search.body["data"][0]["globalState"], "end-inspect");
  EXPECT_FALSE(search.body["data"][0].contains("tradeInToken"));
  Answer results = Get("/apiV1/inspection/apiV1_sdk/inspection/damagesReport/" + id);
  ASSERT_EQ(results.status(), 200);
  json expected = data;
  expected["inspectionId"] = id;
  EXPECT_EQ(results.body, expected);
}

TEST_F(SandboxServerTest, DeliversOnlyEventsWhoseWebhookFlagIsTrue) {
  ConfigureWebhooks({"createReport"});  // newInspection and detectionFinished stay false
  ASSERT_EQ(Post("/apiV1/damage/vehicle", {{"urls", {"https://img.example/x.jpg"}}}).status(), 200);
  CreateToken();  // tradeinVehicle: not enabled either
  ASSERT_TRUE(receiver_.WaitForRequests(1, kDeadline));
  // Everything emitted has been delivered; nothing else is on its way.
  ASSERT_TRUE(sandbox_->webhooks().WaitIdle(kDeadline));
  EXPECT_THAT(DeliveredEvents(), ElementsAre("createReport"));

  // Switching a flag off stops that event from then on.
  ASSERT_EQ(
      Put("/apiV1/eventmanager/configevent", {{"eventName", "createReport"}, {"webhook", false}})
          .status(),
      200);
  ASSERT_EQ(
      Put("/apiV1/eventmanager/configevent", {{"eventName", "tradeinVehicle"}, {"webhook", true}})
          .status(),
      200);
  ASSERT_EQ(Post("/apiV1/damage/vehicle", {{"urls", {"https://img.example/y.jpg"}}}).status(), 200);
  const std::string uid = CreateToken();
  ASSERT_TRUE(receiver_.WaitForRequests(2, kDeadline));
  ASSERT_TRUE(sandbox_->webhooks().WaitIdle(kDeadline));
  EXPECT_THAT(DeliveredEvents(), ElementsAre("createReport", "tradeinVehicle"));
  EXPECT_EQ(json::parse(receiver_.Requests()[1].body)["tokenId"], uid);
}

TEST_F(SandboxServerTest, EmitsNothingWithoutAWebhookUrl) {
  for (const char* event : {"newInspection", "detectionFinished", "createReport"}) {
    ASSERT_EQ(
        Put("/apiV1/eventmanager/configevent", {{"eventName", event}, {"webhook", true}}).status(),
        200);
  }
  ASSERT_EQ(Post("/apiV1/damage/vehicle", {{"urls", {"https://img.example/x.jpg"}}}).status(), 200);
  EXPECT_EQ(sandbox_->webhooks().Pending(), 0u);
  EXPECT_THAT(Admin("GET", "/webhooks/deliveries").body["deliveries"], IsEmpty());
}

TEST_F(SandboxServerTest, SelfInspectionEventsFollowTheJourney) {
  ConfigureWebhooks(
      {"tradeinVehicle", "newInspection", "detectionFinished", "createReport", "chaseUpVehicle"});
  json request = ValidTokenRequest();
  request["options"]["fastTrack"] = false;
  const std::string uid = CreateToken(request);
  for (const char* step : {"open", "start-shooting", "finish-shooting", "complete", "chase-up"}) {
    ASSERT_EQ(Step(uid, step).status(), 200) << step;
  }
  ASSERT_TRUE(receiver_.WaitForRequests(5, kDeadline));
  ASSERT_TRUE(sandbox_->webhooks().WaitIdle(kDeadline));
  EXPECT_THAT(DeliveredEvents(), ElementsAre("tradeinVehicle", "newInspection", "detectionFinished",
                                             "createReport", "chaseUpVehicle"));
  for (const RecordedRequest& delivered : receiver_.Requests()) {
    EXPECT_EQ(json::parse(delivered.body)["tokenId"], uid);
  }
  Answer log = Admin("GET", "/webhooks/deliveries");
  ASSERT_EQ(log.body["deliveries"].size(), 5u);
  EXPECT_EQ(log.body["deliveries"][0]["outcome"], "delivered");
  EXPECT_EQ(log.body["deliveries"][0]["event_name"], "tradeinVehicle");
  EXPECT_EQ(log.body["deliveries"][0]["http_status"], 200);
  EXPECT_EQ(log.body["deliveries"][0]["final"], true);
  EXPECT_EQ(log.body["pending"], 0);
}

TEST_F(SandboxServerTest, WebhookFaultsFromTheAdminApiShapeDeliveries) {
  ConfigureWebhooks({"createReport"});
  AddFault({{"webhook", true},
            {"event", "createReport"},
            {"kind", "fail_first"},
            {"count", 1},
            {"times", 1}});
  ASSERT_EQ(Post("/apiV1/damage/vehicle", {{"urls", {"https://img.example/x.jpg"}}}).status(), 200);
  ASSERT_TRUE(receiver_.WaitForRequests(1, kDeadline));
  ASSERT_TRUE(sandbox_->webhooks().WaitIdle(kDeadline));
  EXPECT_EQ(receiver_.RequestCount(), 1u);  // the failed attempt never reached it
  const json log = Admin("GET", "/webhooks/deliveries").body["deliveries"];
  ASSERT_EQ(log.size(), 2u) << log;
  EXPECT_EQ(log[0]["outcome"], "injected_failure");
  EXPECT_EQ(log[0]["final"], false);
  EXPECT_EQ(log[1]["outcome"], "delivered");
  EXPECT_EQ(log[1]["attempt"], 2);
  EXPECT_EQ(log[1]["delivery_id"], log[0]["delivery_id"]);
}

// ---- Webhook and event configuration ----

TEST_F(SandboxServerTest, WebhookConfigStartsNullAndStoresWhatIsPut) {
  EXPECT_EQ(
      Get("/apiV1/eventmanager/configwebhook").body,
      (json{{"webhookHeaderKey", nullptr}, {"webhookUrl", nullptr}, {"webhookUrlV2", nullptr}}));
  const json stored = {{"webhookHeaderKey", "k-1"},
                       {"webhookUrl", nullptr},
                       {"webhookUrlV2", "https://hooks.example/in"}};
  Answer put = Put("/apiV1/eventmanager/configwebhook",
                   {{"webhookUrlV2", "https://hooks.example/in"}, {"webhookHeaderKey", "k-1"}});
  ASSERT_EQ(put.status(), 200) << put.result.response.body;
  EXPECT_EQ(put.body, stored);
  EXPECT_EQ(Get("/apiV1/eventmanager/configwebhook").body, stored);

  Answer missing = Put("/apiV1/eventmanager/configwebhook", {{"webhookHeaderKey", "k-2"}});
  EXPECT_EQ(missing.status(), 400);
  EXPECT_EQ(missing.body["fields"][0]["field"], "webhookUrlV2");
  Answer bad_url = Put("/apiV1/eventmanager/configwebhook", {{"webhookUrlV2", "ftp://x"}});
  EXPECT_EQ(bad_url.body["fields"][0]["field"], "webhookUrlV2");
  EXPECT_EQ(Get("/apiV1/eventmanager/configwebhook").body, stored);
  // The debugging dump never shows the header key.
  EXPECT_EQ(Admin("GET", "/state").body["webhookConfig"]["webhookHeaderKey"], "***");
}

TEST_F(SandboxServerTest, EventConfigListsEveryEventAndUpdatesOne) {
  Answer list = Get("/apiV1/eventmanager/configevent");
  ASSERT_EQ(list.status(), 200);
  ASSERT_TRUE(list.body.is_array());
  std::vector<std::string> names;
  for (const json& entry : list.body) {
    names.push_back(entry["eventName"].get<std::string>());
    EXPECT_EQ(entry, (json{{"eventName", entry["eventName"]},
                           {"webhook", false},
                           {"companyEmail", false},
                           {"companyEmailAddress", nullptr},
                           {"customerEmail", false},
                           {"customerSMS", false},
                           {"senderEmail", nullptr},
                           {"senderName", nullptr}}));
  }
  EXPECT_THAT(
      names, ElementsAre("newInspection", "detectionFinished", "createReport", "shareUpdatedReport",
                         "deleteInspection", "tradeinVehicle", "newDamage", "chaseUpVehicle"));

  Answer put = Put("/apiV1/eventmanager/configevent",
                   {{"eventName", "deleteInspection"}, {"webhook", true}});
  ASSERT_EQ(put.status(), 200) << put.result.response.body;
  EXPECT_EQ(put.body["eventName"], "deleteInspection");
  EXPECT_EQ(put.body["webhook"], true);
  EXPECT_EQ(Get("/apiV1/eventmanager/configevent").body[4], put.body);

  Answer unknown =
      Put("/apiV1/eventmanager/configevent", {{"eventName", "carWashed"}, {"webhook", true}});
  EXPECT_EQ(unknown.status(), 400);
  EXPECT_EQ(unknown.body["fields"][0]["field"], "eventName");
  Answer no_flag = Put("/apiV1/eventmanager/configevent", {{"eventName", "newDamage"}});
  EXPECT_EQ(no_flag.status(), 400);
  EXPECT_EQ(no_flag.body["fields"][0]["field"], "webhook");
}

TEST_F(SandboxServerTest, TestWebhookReadsTheQueryOrABodyAndDeliversOneEvent) {
  Answer unconfigured = Get("/apiV1/eventmanager/testwebhook?eventName=newInspection");
  EXPECT_EQ(unconfigured.status(), 400);
  EXPECT_THAT(unconfigured.body["message"].get<std::string>(), HasSubstr("webhook not configured"));

  ConfigureWebhooks({});  // a destination, but no event enabled: the test ignores the flags
  Answer query = Get("/apiV1/eventmanager/testwebhook?eventName=newInspection&inspectionId=abc");
  ASSERT_EQ(query.status(), 200) << query.result.response.body;
  EXPECT_EQ(query.body, (json{{"status", "send"}}));
  ASSERT_TRUE(receiver_.WaitForRequests(1, kDeadline));
  json first = json::parse(receiver_.Requests()[0].body);
  EXPECT_EQ(first["event"], "newInspection");
  EXPECT_EQ(first["inspectionId"], "abc");

  // GET with a JSON body (the other placement the gateway can be configured for).
  Answer body = Send("GET", "/apiV1/eventmanager/testwebhook", R"({"eventName": "createReport"})");
  ASSERT_EQ(body.status(), 200) << body.result.response.body;
  ASSERT_TRUE(receiver_.WaitForRequests(2, kDeadline));
  json second = json::parse(receiver_.Requests()[1].body);
  EXPECT_EQ(second["event"], "createReport");
  EXPECT_EQ(second["message"], "Report OK");
  EXPECT_TRUE(second["dataAPI"]["data"]["damages"].is_object());
  EXPECT_EQ(*receiver_.Requests()[1].Header("x-api-key"), kWebhookKey);

  // The connection carried a GET body and still serves the next request.
  EXPECT_EQ(Get("/apiV1/eventmanager/configwebhook").status(), 200);
  Answer unknown = Get("/apiV1/eventmanager/testwebhook?eventName=carWashed");
  EXPECT_EQ(unknown.status(), 400);
  EXPECT_EQ(unknown.body["fields"][0]["field"], "eventName");
  EXPECT_EQ(Get("/apiV1/eventmanager/testwebhook").status(), 400);
}

TEST_F(SandboxServerTest, AcceptsBothVersionPrefixSpellings) {
  EXPECT_EQ(Get("/apiv1/eventmanager/configwebhook").status(), 200);
  EXPECT_EQ(Get("/apiV1/eventmanager/configwebhook").status(), 200);
  EXPECT_EQ(Send("POST", "/apiv1/tokenmanager/token", ValidTokenRequest().dump()).status(), 200);
  EXPECT_EQ(Get("/apiV1/inspection/search?username=x").status(), 200);
  EXPECT_EQ(Get("/apiv1/inspection/search?username=x").status(), 200);
  Answer detected = Post("/apiv1/damage/vehicle", {{"urls", {"https://img.example/a.jpg"}}});
  ASSERT_EQ(detected.status(), 200);
  const std::string id = detected.body["inspectionId"];
  EXPECT_EQ(Get("/apiV1/inspection/apiv1_sdk/inspection/damagesReport/" + id).status(), 200);
  EXPECT_EQ(Get("/apiv1/inspection/apiV1_sdk/inspection/damagesReport/" + id).status(), 200);
  // Other segments keep their spelling.
  EXPECT_EQ(Get("/apiV1/EventManager/configwebhook").status(), 404);
  EXPECT_EQ(Send("DELETE", "/apiV1/eventmanager/configwebhook", "").status(), 405);
}

TEST_F(SandboxServerTest, ImageEndpointsValidateTheirUrls) {
  struct Case {
    const char* path;
    json body;
    const char* field;
  };
  const std::vector<Case> cases = {
      {"/apiV1/quality/image", json::object(), "url"},
      {"/apiV1/quality/image", {{"url", "not a url"}}, "url"},
      {"/apiV1/quality/image/list", {{"urls", json::array()}}, "urls"},
      {"/apiV1/seg/image", {{"urls", {"https://a.example/1.jpg", "ftp://b"}}}, "urls[1]"},
      {"/apiV1/part/image", {{"urls", "https://a.example/1.jpg"}}, "urls"},
      {"/apiV1/damage/vehicle", {{"urls", {""}}}, "urls[0]"},
      {"/apiV1/remarketing/removeBackground",
       {{"url", "https://a.example/1.jpg"}, {"colorBackground", "blue"}},
       "colorBackground"},
  };
  for (const Case& c : cases) {
    Answer answer = Post(c.path, c.body);
    EXPECT_EQ(answer.status(), 400) << c.path << " " << c.body;
    EXPECT_EQ(answer.body["fields"][0]["field"], c.field) << c.path << " " << c.body;
  }
  Answer removed =
      Post("/apiV1/remarketing/removeBackground", {{"url", "https://a.example/1.jpg"}});
  ASSERT_EQ(removed.status(), 200);
  EXPECT_EQ(removed.body["path"].get<std::string>().rfind(sandbox_->BaseUrl() + "/cdn/", 0), 0u)
      << removed.body;
}

// ---- Faults ----

TEST_F(SandboxServerTest, ErrorFaultAnswersItsStatusAndBody) {
  AddFault({{"route", "get_webhook_config"},
            {"kind", "error"},
            {"status", 503},
            {"body", R"({"error": "maintenance"})"},
            {"times", 1}});
  Answer faulted = Get("/apiV1/eventmanager/configwebhook");
  EXPECT_EQ(faulted.status(), 503);
  EXPECT_EQ(faulted.body, (json{{"error", "maintenance"}}));
  EXPECT_EQ(Get("/apiV1/eventmanager/configwebhook").status(), 200);  // times: 1
}

TEST_F(SandboxServerTest, RateLimitFaultAnswers429WithRetryAfter) {
  AddFault({{"route", "list_event_configs"}, {"kind", "rate_limit"}, {"retry_after", "7"}});
  Answer limited = Get("/apiV1/eventmanager/configevent");
  EXPECT_EQ(limited.status(), 429);
  ASSERT_NE(limited.Header("retry-after"), nullptr);
  EXPECT_EQ(*limited.Header("retry-after"), "7");
  EXPECT_EQ(limited.body["error"], "rate_limited");
  // Other routes are untouched.
  EXPECT_EQ(Get("/apiV1/eventmanager/configwebhook").status(), 200);
}

TEST_F(SandboxServerTest, ResetFaultClosesTheConnectionWithoutAnAnswer) {
  AddFault({{"route", "get_webhook_config"}, {"kind", "reset"}, {"times", 1}});
  Answer reset = SendOnNewConnection("GET", "/apiV1/eventmanager/configwebhook", "");
  EXPECT_EQ(reset.result.error, http::TransportError::kReceive) << reset.result.error_detail;
  EXPECT_EQ(Get("/apiV1/eventmanager/configwebhook").status(), 200);
}

TEST_F(SandboxServerTest, TruncateFaultCutsTheBodyShort) {
  AddFault({{"route", "list_event_configs"}, {"kind", "truncate"}, {"times", 1}});
  Answer truncated = Get("/apiV1/eventmanager/configevent");
  EXPECT_EQ(truncated.result.error, http::TransportError::kReceive)
      << truncated.result.error_detail;
  EXPECT_EQ(Get("/apiV1/eventmanager/configevent").status(), 200);
}

TEST_F(SandboxServerTest, MalformedFaultAnswers200WithABodyThatIsNotJson) {
  AddFault({{"route", "assess_quality"}, {"kind", "malformed"}, {"times", 1}});
  Answer malformed = Post("/apiV1/quality/image", {{"url", "https://a.example/car.jpg"}});
  EXPECT_EQ(malformed.result.error, http::TransportError::kNone);
  EXPECT_EQ(malformed.status(), 200);
  EXPECT_TRUE(malformed.body.is_discarded()) << malformed.result.response.body;
}

TEST_F(SandboxServerTest, SlowBodyFaultStillDeliversTheWholeBody) {
  const json request = {{"urls", {"https://a.example/1.jpg", "https://a.example/2.jpg"}}};
  Answer normal = Post("/apiV1/part/image", request);
  ASSERT_EQ(normal.status(), 200);
  AddFault({{"route", "segment_parts"}, {"kind", "slow_body"}, {"latency_ms", 5}, {"times", 1}});
  Answer slow = Post("/apiV1/part/image", request);
  EXPECT_EQ(slow.result.error, http::TransportError::kNone) << slow.result.error_detail;
  EXPECT_EQ(slow.status(), 200);
  EXPECT_EQ(slow.body, normal.body);
  ASSERT_NE(slow.Header("transfer-encoding"), nullptr);
  EXPECT_EQ(*slow.Header("transfer-encoding"), "chunked");
  EXPECT_THAT(sandbox_->faults().Rules(), IsEmpty());  // it fired
}

TEST_F(SandboxServerTest, LatencyFaultIsAppliedThenTheNormalAnswerFollows) {
  AddFault(
      {{"route", "get_webhook_config"}, {"kind", "latency"}, {"latency_ms", 20}, {"times", 1}});
  Answer delayed = Get("/apiV1/eventmanager/configwebhook");
  EXPECT_EQ(delayed.status(), 200);
  EXPECT_TRUE(delayed.body["webhookUrlV2"].is_null());
  // The rule fired for this answer (times 1 is used up and removed).
  EXPECT_THAT(sandbox_->faults().Rules(), IsEmpty());
}

TEST_F(SandboxServerTest, AFaultedTokenCreationCreatesNothing) {
  ConfigureWebhooks({"tradeinVehicle"});
  AddFault({{"route", "create_token"}, {"kind", "error"}, {"status", 500}, {"times", 1}});
  AddFault({{"route", "create_token"}, {"kind", "reset"}, {"times", 1}});
  EXPECT_EQ(Post("/apiV1/tokenmanager/token", ValidTokenRequest()).status(), 500);
  EXPECT_EQ(SendOnNewConnection("POST", "/apiV1/tokenmanager/token", ValidTokenRequest().dump())
                .result.error,
            http::TransportError::kReceive);
  EXPECT_THAT(Admin("GET", "/state").body["tokens"], IsEmpty());
  EXPECT_EQ(sandbox_->webhooks().Pending(), 0u);
  EXPECT_EQ(receiver_.RequestCount(), 0u);
}

TEST_F(SandboxServerTest, FaultsApplyAfterAuthenticationAndNeverToTheAdminApi) {
  AddFault({{"route", "*"}, {"kind", "error"}, {"status", 502}, {"times", 1}});
  EXPECT_EQ(Send("GET", "/apiV1/eventmanager/configwebhook", "", std::nullopt).status(), 401);
  EXPECT_EQ(Admin("GET", "/state").status(), 200);
  ASSERT_EQ(sandbox_->faults().Rules().size(), 1u);  // not used up by either
  EXPECT_EQ(Get("/apiV1/eventmanager/configwebhook").status(), 502);
  EXPECT_EQ(Admin("GET", "/faults").body["rules"], json::array());
  AddFault({{"route", "*"}, {"kind", "error"}, {"status", 502}});
  EXPECT_EQ(Admin("DELETE", "/faults").status(), 200);
  EXPECT_EQ(Get("/apiV1/eventmanager/configwebhook").status(), 200);
  EXPECT_EQ(Admin("POST", "/faults", R"({"kind": "explode"})").status(), 400);
}

TEST_F(SandboxServerTest, FaultRulesFromTheOptionsAreActiveAtStart) {
  SandboxOptions options = DefaultOptions();
  options.faults =
      json::array({{{"route", "list_event_configs"}, {"kind", "error"}, {"status", 418}}});
  StartSandbox(std::move(options));
  EXPECT_EQ(Get("/apiV1/eventmanager/configevent").status(), 418);

  SandboxOptions bad = DefaultOptions();
  bad.faults = {{"kind", "explode"}};
  EXPECT_FALSE(SandboxServer::Start(std::move(bad)).ok());
}

// ---- Shapes ----

TEST_F(SandboxServerTest, EveryResponseDecodesIntoTheGatewaysTypedResponse) {
  ConfigureWebhooks({});
  const std::string uid = CreateToken();
  {
    Answer created = Post("/apiV1/tokenmanager/token", ValidTokenRequest());
    v1::CreateTokenResponse response;
    vendor::DecodeReport report;
    ASSERT_TRUE(vendor::DecodeCreateTokenResponse(created.body, sandbox_->WebappUrl(), "fr",
                                                  &response, &report)
                    .ok());
    ExpectClean(report, "create token");
    EXPECT_EQ(response.token().tradein_status(), v1::TRADEIN_STATUS_CREATED);
    EXPECT_EQ(response.token().sending_type(), v1::SENDING_TYPE_EMAIL_AND_SMS);
    EXPECT_EQ(response.customer_url(),
              sandbox_->WebappUrl() + "/fr/services/" + response.token().uid());
  }
  for (const char* step : {"open", "start-shooting", "finish-shooting", "fast-track", "complete"}) {
    ASSERT_EQ(Step(uid, step).status(), 200);
  }
  {
    v1::GetTokenStatusResponse response;
    vendor::DecodeReport report;
    ASSERT_TRUE(vendor::DecodeResponse(Status(uid).body, &response, &report).ok());
    ExpectClean(report, "token status");
    EXPECT_EQ(response.token().tradein_status(), v1::TRADEIN_STATUS_COMPLETED);
    EXPECT_EQ(response.token().inspection_ptr().type(), 4);
  }
  {
    v1::SearchInspectionsResponse response;
    vendor::DecodeReport report;
    ASSERT_TRUE(vendor::DecodeResponse(Get("/apiv1/inspection/search?username=agent-007").body,
                                       &response, &report)
                    .ok());
    ExpectClean(report, "search");
    ASSERT_EQ(response.data_size(), 1);
    EXPECT_EQ(response.data(0).type(), v1::INSPECTION_TYPE_WEB_APP);
    EXPECT_EQ(response.data(0).global_state(), v1::GLOBAL_STATE_END_INSPECT);
    EXPECT_EQ(response.pagination_info().range(), "1-1");
  }
  {
    v1::RemoveBackgroundResponse response;
    vendor::DecodeReport report;
    ASSERT_TRUE(vendor::DecodeResponse(
                    Post("/apiV1/remarketing/removeBackground",
                         {{"url", "https://a.example/car.jpg"}, {"colorBackground", "#ffffff"}})
                        .body,
                    &response, &report)
                    .ok());
    ExpectClean(report, "remove background");
  }
  const json urls = {{"urls",
                      {"https://a.example/1.jpg", "https://a.example/not_a_car.jpg",
                       "https://a.example/error500.jpg"}}};
  {
    v1::AssessQualityResponse response;
    vendor::DecodeReport report;
    ASSERT_TRUE(vendor::DecodeResponse(
                    Post("/apiV1/quality/image", {{"url", "https://a.example/1.jpg"}}).body,
                    &response, &report)
                    .ok());
    ExpectClean(report, "quality");
  }
  {
    v1::AssessQualityBatchResponse response;
    vendor::DecodeReport report;
    ASSERT_TRUE(
        vendor::DecodeResponse(Post("/apiV1/quality/image/list", urls).body, &response, &report)
            .ok());
    ExpectClean(report, "quality list");
  }
  {
    v1::SegmentVehicleResponse response;
    vendor::DecodeReport report;
    ASSERT_TRUE(
        vendor::DecodeResponse(Post("/apiV1/seg/image", urls).body, &response, &report).ok());
    ExpectClean(report, "segmentation");
  }
  {
    v1::SegmentPartsResponse response;
    vendor::DecodeReport report;
    ASSERT_TRUE(
        vendor::DecodeSegmentPartsResponse(Post("/apiV1/part/image", urls).body, &response, &report)
            .ok());
    ExpectClean(report, "parts");
  }
  std::string inspection_id;
  {
    v1::DetectDamageResponse response;
    ASSERT_TRUE(vendor::DecodeDetectDamageResponse(Post("/apiV1/damage/vehicle", urls).body,
                                                   vendor::MapperOptions{}, &response)
                    .ok());
    EXPECT_FALSE(response.inspection_id().empty());  // found by the default pointers
    inspection_id = response.inspection_id();
  }
  {
    v1::GetDamagesReportResponse response;
    ASSERT_TRUE(
        vendor::DecodeResponse(
            Get("/apiv1/inspection/apiV1_sdk/inspection/damagesReport/" + inspection_id).body,
            &response, nullptr)
            .ok());
    EXPECT_TRUE(response.report().has_struct_value());
  }
  {
    v1::GetWebhookConfigResponse response;
    vendor::DecodeReport report;
    ASSERT_TRUE(vendor::DecodeGetWebhookConfigResponse(
                    Get("/apiV1/eventmanager/configwebhook").body, &response, &report)
                    .ok());
    ExpectClean(report, "get webhook config");
    // The key itself is sealed into its fingerprint by the decoder.
    EXPECT_TRUE(response.config().webhook_header_key_set());
    EXPECT_EQ(response.config().webhook_header_key_sha256_prefix(),
              vendor::WebhookKeySha256Prefix(kWebhookKey));
    EXPECT_FALSE(response.config().has_webhook_url());
  }
  {
    v1::UpdateWebhookConfigResponse response;
    vendor::DecodeReport report;
    ASSERT_TRUE(vendor::DecodeUpdateWebhookConfigResponse(
                    Put("/apiV1/eventmanager/configwebhook",
                        {{"webhookUrlV2", receiver_.BaseUrl() + "/hook"}})
                        .body,
                    &response, &report)
                    .ok());
    ExpectClean(report, "update webhook config");
    EXPECT_FALSE(response.config().webhook_header_key_set());
    EXPECT_EQ(response.config().webhook_header_key_sha256_prefix(), "");
  }
  {
    v1::ListEventConfigsResponse response;
    vendor::DecodeReport report;
    ASSERT_TRUE(
        vendor::DecodeResponse(Get("/apiV1/eventmanager/configevent").body, &response, &report)
            .ok());
    ExpectClean(report, "list event configs");
    ASSERT_EQ(response.event_configs_size(), 8);
    EXPECT_EQ(response.event_configs(7).event_name(), v1::EVENT_NAME_CHASE_UP_VEHICLE);
  }
  {
    v1::UpdateEventConfigResponse response;
    vendor::DecodeReport report;
    ASSERT_TRUE(vendor::DecodeResponse(Put("/apiV1/eventmanager/configevent",
                                           {{"eventName", "newDamage"}, {"webhook", true}})
                                           .body,
                                       &response, &report)
                    .ok());
    ExpectClean(report, "update event config");
    EXPECT_EQ(response.config().event_name(), v1::EVENT_NAME_NEW_DAMAGE);
    EXPECT_TRUE(response.config().webhook());
  }
  {
    v1::TestWebhookResponse response;
    vendor::DecodeReport report;
    ASSERT_TRUE(vendor::DecodeResponse(
                    Get("/apiV1/eventmanager/testwebhook?eventName=deleteInspection").body,
                    &response, &report)
                    .ok());
    ExpectClean(report, "test webhook");
    EXPECT_EQ(response.status(), "send");
  }
}

// What the gateway sends (its own encoders) passes the sandbox's checks.
TEST_F(SandboxServerTest, AcceptsWhatTheGatewaysEncodersSend) {
  v1::CreateTokenRequest request;
  request.mutable_options()->set_shoot_inspect(true);
  request.mutable_options()->set_fast_track(false);
  request.mutable_trade_in()->set_sending_type(v1::SENDING_TYPE_NONE);
  request.mutable_customer()->set_email("<EMAIL>");
  request.mutable_customer()->set_firstname("<FIRST_NAME>");
  request.mutable_customer()->set_lastname("<LAST_NAME>");
  request.mutable_customer()->set_phone("<PHONE>");
  request.mutable_customer()->set_locale(v1::LOCALE_NL_BE);
  request.set_validity(30);
  Answer created =
      Post("/apiV1/tokenmanager/token", *vendor::EncodeCreateTokenRequest(request).body);
  EXPECT_EQ(created.status(), 200) << created.result.response.body;

  v1::RemoveBackgroundRequest background;
  background.set_url("https://a.example/car.jpg");
  background.set_url_background("https://a.example/bg.jpg");
  background.set_manual_positioning(true);
  background.add_manual_top_left_position_ratio(0.1);
  background.add_manual_top_left_position_ratio(0.2);
  background.add_wheel_box(0.1);
  background.add_wheel_box(0.2);
  background.add_wheel_box(0.3);
  background.add_wheel_box(0.4);
  Answer removed =
      Post("/apiV1/remarketing/removeBackground",
           *vendor::EncodeRemoveBackgroundRequest(background, vendor::MapperOptions{}).body);
  EXPECT_EQ(removed.status(), 200) << removed.result.response.body;

  v1::UpdateEventConfigRequest event;
  event.set_event_name(v1::EVENT_NAME_CREATE_REPORT);
  event.set_webhook(true);
  Answer updated =
      Put("/apiV1/eventmanager/configevent",
          *vendor::EncodeRequest(*vendor::VendorRouteOf(*vendor::FindApiMethod(
                                     "inspection.v1.EventConfigService.UpdateEventConfig")),
                                 event)
               .body);
  EXPECT_EQ(updated.status(), 200) << updated.result.response.body;
}

// ---- Concurrency ----

TEST_F(SandboxServerTest, ConcurrentCreationsAreAllKeptWithDistinctIds) {
  constexpr int kThreads = 8;
  constexpr int kPerThread = 10;
  std::vector<std::thread> threads;
  std::vector<std::vector<std::string>> uids(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([this, t, &uids] {
      for (int i = 0; i < kPerThread; ++i) uids[t].push_back(CreateToken());
    });
  }
  for (auto& thread : threads) thread.join();
  std::set<std::string> distinct;
  for (const auto& list : uids) distinct.insert(list.begin(), list.end());
  EXPECT_EQ(distinct.size(), static_cast<size_t>(kThreads * kPerThread));
  EXPECT_EQ(distinct.count(""), 0u);
  EXPECT_EQ(Admin("GET", "/state").body["tokens"].size(),
            static_cast<size_t>(kThreads * kPerThread));
}

TEST_F(SandboxServerTest, SameSeedGivesTheSameIds) {
  const std::string first = CreateToken();
  StartSandbox(DefaultOptions());
  EXPECT_EQ(CreateToken(), first);
  SandboxOptions other = DefaultOptions();
  other.seed = 42;
  StartSandbox(std::move(other));
  EXPECT_NE(CreateToken(), first);
}

TEST_F(SandboxServerTest, StopIsPromptAndIdempotentWithOpenConnections) {
  // The client keeps its connection alive after this call.
  ASSERT_EQ(Get("/apiV1/eventmanager/configwebhook").status(), 200);
  const auto start = std::chrono::steady_clock::now();
  sandbox_->Stop();
  sandbox_->Stop();
  // Far below the 30 s keep-alive timeout an idle connection would otherwise hold Stop().
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  EXPECT_EQ(Get("/apiV1/eventmanager/configwebhook").result.error, http::TransportError::kConnect);
}

}  // namespace
}  // namespace inspection::sandbox
