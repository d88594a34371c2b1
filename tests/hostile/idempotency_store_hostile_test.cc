// A Redis idempotency store that accepts connections and never answers (issue 33, item 3),
// against the real inspection-gateway process. The store's round trips used to run on
// gRPC's handler threads (1 s to connect, 1 s per command): a burst of calls with
// idempotency keys held those threads, and calls without a key queued behind them. Now the
// store's own threads do them (idempotency.redis_threads), a bounded queue and a short
// back-off after a failure answer keyed calls UNAVAILABLE fast, and calls without a key
// never touch Redis. Asserted: every call without a key is answered OK while the keyed
// burst is in flight; every keyed call gets UNAVAILABLE (never OK, never the vendor); the
// vendor saw only the calls without a key; the RSS the burst cost; the failures are counted.
#include <signal.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <google/protobuf/text_format.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "inspection/v1/token.grpc.pb.h"
#include "tests/support/fake_vendor.h"
#include "tests/support/gateway_binary.h"
#include "tests/support/loopback_listener.h"
#include "tests/support/rss_bounds.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"
#include "tests/support/wait.h"

namespace inspection::testing {
namespace {

using std::chrono::milliseconds;

constexpr milliseconds kDeadline{30000};
constexpr int kKeyedCalls = 400;
constexpr int kPlainCalls = 20;

constexpr char kTokenBody[] = R"({
  "token": {"expired": false, "id": "tok_1", "createdAt": "2024-03-01T10:00:00.000Z",
            "updatedAt": "2024-03-01T10:00:00.000Z", "tradeinVehicle": true,
            "tradeinStatus": 0, "tradeinStatusUpdatedAt": "2024-03-01T10:00:00.000Z",
            "sendingType": null, "vehiclePtr": {"id": "veh_1"}, "uid": "Zx81kQ",
            "expiresIn": "2024-05-30T10:00:00.000Z",
            "options": {"fastTrack": false, "shootInspect": true, "cost": false,
                        "report": false, "downloadRoi": false, "loadInspection": false},
            "APITokenPtr": {"id": "api_1"}},
  "webApiVersion": "v2.5"
})";

v1::CreateTokenRequest TokenRequest() {
  v1::CreateTokenRequest request;
  google::protobuf::TextFormat::ParseFromString(
      R"pb(
        options { shoot_inspect: true fast_track: false }
        trade_in { immat: "AB-123-CD" vin: "VF1AB000123456789" sending_type: SENDING_TYPE_NONE }
        customer {
          email: "<EMAIL>"
          firstname: "<FIRST_NAME>"
          lastname: "<LAST_NAME>"
          phone: "<PHONE>"
          locale: LOCALE_NL_BE
        }
        validity: 90
      )pb",
      &request);
  return request;
}

TEST(IdempotencyStoreHostileTest, ARedisThatNeverAnswersCostsCallsWithoutAKeyNothing) {
  // The kernel completes the handshakes (up to the backlog); nobody ever reads.
  LoopbackListener silent_redis(/*backlog=*/4096);
  ASSERT_TRUE(silent_redis.ok());
  // CreateToken is not idempotent: the gateway sends each on a fresh vendor connection, and
  // each idle keep-alive connection holds one of the fake's threads.
  FakeVendorOptions vendor_options;
  vendor_options.threads = 4 * kPlainCalls;
  FakeVendor vendor(vendor_options);
  ASSERT_TRUE(vendor.Start());
  vendor.SetHandler([](const RecordedRequest&) {
    ScriptedResponse answer;
    answer.body = kTokenBody;
    return answer;
  });

  TempDir temp;
  std::vector<std::string> argv =
      LoopbackGatewayArgv(GATEWAY_BINARY, vendor.BaseUrl(), temp.File("events.db"));
  argv.push_back(absl::StrCat("--idempotency-store=redis://127.0.0.1:", silent_redis.port()));
  Subprocess gateway(argv, {"INSPECTION_API_KEY=idempotency-hostile-vendor-key"});
  const ServingPorts ports = WaitUntilServing(gateway, kDeadline);
  ASSERT_GT(ports.grpc, 0) << gateway.output();
  auto channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", ports.grpc),
                                     grpc::InsecureChannelCredentials());
  auto stub = v1::TokenService::NewStub(channel);
  const int64_t rss_before = gateway.ResidentKiB();

  // The burst: every call with its own key, all at once.
  struct Keyed {
    grpc::ClientContext context;
    v1::CreateTokenResponse response;
    grpc::Status status;
  };
  std::vector<std::unique_ptr<Keyed>> keyed;
  absl::Mutex mu;
  int keyed_done = 0;
  const v1::CreateTokenRequest request = TokenRequest();
  for (int i = 0; i < kKeyedCalls; ++i) {
    auto call = std::make_unique<Keyed>();
    call->context.set_deadline(std::chrono::system_clock::now() + kDeadline);
    call->context.AddMetadata("idempotency-key", absl::StrCat("hostile-key-", i));
    Keyed* raw = call.get();
    stub->async()->CreateToken(&raw->context, &request, &raw->response,
                               [raw, &mu, &keyed_done](grpc::Status status) {
                                 absl::MutexLock lock(&mu);
                                 raw->status = std::move(status);
                                 ++keyed_done;
                               });
    keyed.push_back(std::move(call));
  }

  // Meanwhile: calls without a key, each with a deadline far below what the keyed burst
  // would cost them if it held gRPC's threads (400 calls x 1-2 s of Redis timeouts: with the
  // round trips on gRPC's threads and no back-off, every one of them missed it). From
  // another client connection: one connection's streams (grpc.max_concurrent_streams) are
  // the burst's own to fill.
  grpc::ChannelArguments other_client;
  other_client.SetInt("grpc.use_local_subchannel_pool", 1);
  auto plain_stub = v1::TokenService::NewStub(grpc::CreateCustomChannel(
      absl::StrCat("127.0.0.1:", ports.grpc), grpc::InsecureChannelCredentials(), other_client));
  for (int i = 0; i < kPlainCalls; ++i) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + milliseconds(10000));
    v1::CreateTokenResponse response;
    const grpc::Status status = plain_stub->CreateToken(&context, request, &response);
    EXPECT_TRUE(status.ok()) << "call without a key " << i << ": " << status.error_code() << " "
                             << status.error_message();
  }

  {
    absl::MutexLock lock(&mu);
    ASSERT_TRUE(
        mu.AwaitWithTimeout(absl::Condition(
                                +[](int* done) { return *done == kKeyedCalls; }, &keyed_done),
                            absl::Milliseconds(kDeadline.count())));
  }
  int unavailable = 0;
  for (const auto& call : keyed) {
    EXPECT_NE(call->status.error_code(), grpc::StatusCode::OK) << "a keyed call went through";
    if (call->status.error_code() == grpc::StatusCode::UNAVAILABLE) ++unavailable;
  }
  // UNAVAILABLE, the store's answer; nothing reached the vendor for them.
  EXPECT_EQ(unavailable, kKeyedCalls);
  EXPECT_EQ(vendor.RequestCount(), static_cast<size_t>(kPlainCalls));
  const int64_t rss_after = gateway.ResidentKiB();
  ASSERT_GT(rss_before, 0);
  EXPECT_RSS_GROWTH_LT(rss_after - rss_before, 64 * 1024)
      << "KiB added by " << kKeyedCalls << " keyed calls against a silent Redis";

  httplib::Client admin("127.0.0.1", ports.admin);
  auto page = admin.Get("/metrics");
  ASSERT_TRUE(page);
  EXPECT_GT(PrometheusSample(page->body, "inspection_idempotency_store_errors_total"), 0)
      << gateway.output();
  EXPECT_EQ(::kill(gateway.pid(), 0), 0) << "the gateway died:\n" << gateway.output();
  EXPECT_EQ(gateway.Stop(SIGTERM, kDeadline), 0) << gateway.output();
}

}  // namespace
}  // namespace inspection::testing
