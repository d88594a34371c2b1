// StreamDamageResults with an idempotency key against impatient duplicates, on the real
// inspection-gateway process (issue 31, finding 1). A first call A submits the damage
// detection and its vendor call is held; five duplicates B with the same key and URLs wait
// for A's outcome, and give up after 300 ms. gRPC frees a cancelled call's context once
// its reactor is done; the waiters' callbacks used to keep a raw pointer to it and wrote
// the "idempotency-replayed" metadata through it when A's submission completed, which
// killed the process (every stream of every caller with it). Now: A gets its answer, the
// process lives, and the next call is answered.
//
// And a replay of a submission that named no inspection (outside review of issue 31): the
// first call ends with INSPECTION_ID_NOT_FOUND, but its replay used to follow an empty
// filter, which matches every inspection of the account: a caller allowed only
// StreamDamageResults read the account's whole event log.
#include <signal.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include "absl/strings/str_cat.h"
#include "inspection/v1/damage.grpc.pb.h"
#include "nlohmann/json.hpp"
#include "tests/support/fake_vendor.h"
#include "tests/support/gateway_binary.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"
#include "tests/support/wait.h"

namespace inspection::testing {
namespace {

using std::chrono::milliseconds;

constexpr milliseconds kDeadline{30000};
constexpr char kDamagePath[] = "/apiV1/damage/vehicle";

TEST(IdempotentStreamHostileTest, DuplicatesThatGiveUpDoNotOutliveTheirCalls) {
  FakeVendor vendor;
  ASSERT_TRUE(vendor.Start());
  // The first damage submission is held until the test releases it; later ones answer.
  std::atomic<int> submissions{0};
  vendor.SetHandler([&submissions](const RecordedRequest& request) {
    ScriptedResponse answer;
    if (request.path != kDamagePath) {
      answer.status = 404;
      answer.body = R"({"message": "not here"})";
      return answer;
    }
    const int n = submissions.fetch_add(1);
    answer.body =
        absl::StrCat(R"({"message": "processing", "data": {"inspectionId": "insp_)", n, R"("}})");
    if (n == 0) answer.kind = ScriptedResponse::Kind::kHold;
    return answer;
  });

  TempDir temp;
  Subprocess gateway(LoopbackGatewayArgv(GATEWAY_BINARY, vendor.BaseUrl(), temp.File("events.db")),
                     {"INSPECTION_API_KEY=idempotent-stream-vendor-key"});
  const ServingPorts ports = WaitUntilServing(gateway, kDeadline);
  ASSERT_GT(ports.grpc, 0) << gateway.output();
  auto stub = v1::DamageService::NewStub(grpc::CreateChannel(absl::StrCat("127.0.0.1:", ports.grpc),
                                                             grpc::InsecureChannelCredentials()));

  v1::StreamDamageResultsRequest request;
  request.add_urls("https://img.example.test/front.jpg");
  request.set_idempotency_key("hostile-duplicate-key");

  // A: leads the submission, which the vendor holds.
  grpc::ClientContext first_context;
  first_context.set_deadline(std::chrono::system_clock::now() + kDeadline);
  auto first = stub->StreamDamageResults(&first_context, request);
  ASSERT_TRUE(vendor.WaitForHeld(1, kDeadline));

  // B x5: the same key and URLs, waiting for A's outcome, each giving up after 300 ms.
  for (int i = 0; i < 5; ++i) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + milliseconds(300));
    auto duplicate = stub->StreamDamageResults(&context, request);
    v1::StreamDamageResultsResponse message;
    EXPECT_FALSE(duplicate->Read(&message)) << "a waiter got a message before A's outcome";
    EXPECT_EQ(duplicate->Finish().error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  }
  // The gateway has finished the five calls (their reactors end on the cancel), so gRPC is
  // done with their contexts before A's submission completes.
  httplib::Client admin("127.0.0.1", ports.admin);
  ASSERT_TRUE(WaitUntil(
      [&] {
        auto page = admin.Get("/metrics");
        return page && PrometheusSum(page->body, "grpc_server_handled_total",
                                     R"(grpc_method="StreamDamageResults")") >= 5;
      },
      kDeadline));
  EXPECT_EQ(vendor.RequestCount(), 1u) << "a duplicate reached the vendor";

  vendor.ReleaseHeld();
  v1::StreamDamageResultsResponse submitted;
  ASSERT_TRUE(first->Read(&submitted)) << first->Finish().error_message();
  EXPECT_EQ(submitted.submitted().inspection_id(), "insp_0");
  first_context.TryCancel();
  first->Finish();

  // The process lives, and answers the next call (a new key: a new submission).
  grpc::ClientContext next_context;
  next_context.set_deadline(std::chrono::system_clock::now() + kDeadline);
  v1::DetectDamageRequest next;
  next.add_urls("https://img.example.test/back.jpg");
  v1::DetectDamageResponse answer;
  const grpc::Status status = stub->DetectDamage(&next_context, next, &answer);
  EXPECT_TRUE(status.ok()) << status.error_code() << " " << status.error_message() << "\n"
                           << gateway.output();
  EXPECT_EQ(::kill(gateway.pid(), 0), 0) << "the gateway died:\n" << gateway.output();
  EXPECT_EQ(gateway.Stop(SIGTERM, kDeadline), 0) << gateway.output();
}

TEST(IdempotentStreamHostileTest, AReplayOfASubmissionWithoutInspectionIdFollowsNothing) {
  FakeVendor vendor;
  ASSERT_TRUE(vendor.Start());
  // The vendor accepts the submission but names no inspection (its shape is "not shown").
  vendor.SetHandler([](const RecordedRequest& request) {
    ScriptedResponse answer;
    answer.status = request.path == kDamagePath ? 200 : 404;
    answer.body = R"({"status": "queued"})";
    return answer;
  });
  constexpr char kWebhookKey[] = "idempotent-stream-webhook-key";
  TempDir temp;
  Subprocess gateway(LoopbackGatewayArgv(GATEWAY_BINARY, vendor.BaseUrl(), temp.File("events.db")),
                     {"INSPECTION_API_KEY=idempotent-stream-vendor-key",
                      std::string("INSPECTION_WEBHOOK_KEY=") + kWebhookKey});
  const ServingPorts ports = WaitUntilServing(gateway, kDeadline);
  ASSERT_GT(ports.grpc, 0) << gateway.output();
  // Other inspections of the same (default) account are in the log.
  httplib::Client webhooks("127.0.0.1", ports.webhook);
  for (int i = 0; i < 3; ++i) {
    const nlohmann::json body = {{"event", "newInspection"},
                                 {"inspectionId", absl::StrCat("someone-else-", i)}};
    auto posted = webhooks.Post("/webhooks/v2", {{"x-api-key", kWebhookKey}}, body.dump(),
                                "application/json");
    ASSERT_TRUE(posted);
    ASSERT_EQ(posted->status, 200) << posted->body;
  }
  auto stub = v1::DamageService::NewStub(grpc::CreateChannel(absl::StrCat("127.0.0.1:", ports.grpc),
                                                             grpc::InsecureChannelCredentials()));
  v1::StreamDamageResultsRequest request;
  request.add_urls("https://img.example.test/front.jpg");
  request.set_idempotency_key("no-inspection-id-key");

  for (const char* call : {"first", "replay"}) {
    SCOPED_TRACE(call);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    auto reader = stub->StreamDamageResults(&context, request);
    std::vector<v1::StreamDamageResultsResponse> messages;
    v1::StreamDamageResultsResponse message;
    while (reader->Read(&message)) messages.push_back(message);
    const grpc::Status status = reader->Finish();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << status.error_message();
    ASSERT_EQ(messages.size(), 1u) << "events of other inspections were streamed; the second: "
                                   << messages[1].ShortDebugString();
    EXPECT_TRUE(messages[0].has_submitted());
    EXPECT_EQ(messages[0].submitted().inspection_id(), "");
  }
  EXPECT_EQ(vendor.RequestCount(), 1u) << "the replay submitted again";
  EXPECT_EQ(gateway.Stop(SIGTERM, kDeadline), 0) << gateway.output();
}

}  // namespace
}  // namespace inspection::testing
