// The gRPC port against requests built to cost the gateway (and the billing vendor) as much
// as possible, against the real inspection-gateway process: a million empty URLs in one
// AssessQualityBatch (once measured at +1.3 GiB RSS and an error trailer too large for
// HTTP/2), and 20,000 valid URLs, which were forwarded to the vendor as they were. The
// answer, the gateway's RSS growth (VmRSS from /proc, sampled during the call), and the
// vendor calls it caused (none).
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "inspection/v1/image.grpc.pb.h"
#include "nlohmann/json.hpp"
#include "tests/support/fake_vendor.h"
#include "tests/support/gateway_binary.h"
#include "tests/support/rss_bounds.h"
#include "tests/support/status_details.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace inspection::testing {
namespace {

using std::chrono::milliseconds;

constexpr milliseconds kDeadline{30000};
constexpr int64_t kMiB = 1024;  // in KiB

// inspection-gateway in front of a scripted fake vendor, on free loopback ports.
class GatewayProcess {
 public:
  GatewayProcess(const std::string& upstream_url, std::vector<std::string> flags) {
    std::vector<std::string> argv =
        LoopbackGatewayArgv(GATEWAY_BINARY, upstream_url, temp_.File("events.db"));
    for (std::string& flag : flags) argv.push_back(std::move(flag));
    process_ = std::make_unique<Subprocess>(
        argv, std::vector<std::string>{"INSPECTION_API_KEY=bounds-suite-vendor-key"});
    port_ = WaitUntilServing(*process_, kDeadline).grpc;
  }

  int port() const { return port_; }
  Subprocess& process() { return *process_; }

  std::unique_ptr<v1::ImageService::Stub> Stub() {
    grpc::ChannelArguments args;
    args.SetMaxSendMessageSize(64 * 1024 * 1024);
    return v1::ImageService::NewStub(grpc::CreateCustomChannel(
        absl::StrCat("127.0.0.1:", port_), grpc::InsecureChannelCredentials(), args));
  }

 private:
  TempDir temp_;
  std::unique_ptr<Subprocess> process_;
  int port_ = 0;
};

// The call, with the gateway's RSS sampled every 2 ms meanwhile; returns the peak growth.
int64_t CallMeasuringRss(GatewayProcess& gateway, const v1::AssessQualityBatchRequest& request,
                         grpc::Status* status) {
  auto stub = gateway.Stub();
  // One small call first, so that the connection and the threads serving it exist.
  {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + kDeadline);
    v1::AssessQualityBatchRequest empty;
    v1::AssessQualityBatchResponse ignored;
    stub->AssessQualityBatch(&context, empty, &ignored);
  }
  const int64_t before = gateway.process().ResidentKiB();
  std::atomic<bool> done{false};
  std::atomic<int64_t> peak{before};
  std::thread sampler([&] {
    while (!done.load()) {
      peak = std::max<int64_t>(peak.load(), gateway.process().ResidentKiB());
      std::this_thread::sleep_for(milliseconds(2));
    }
  });
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + kDeadline);
  v1::AssessQualityBatchResponse response;
  *status = stub->AssessQualityBatch(&context, request, &response);
  done = true;
  sampler.join();
  return std::max<int64_t>(peak.load(), gateway.process().ResidentKiB()) - before;
}

google::rpc::BadRequest BadRequestOf(const grpc::Status& status) {
  return FindStatusDetail<google::rpc::BadRequest>(status).value_or(google::rpc::BadRequest());
}

v1::AssessQualityBatchRequest EmptyUrls(int count) {
  v1::AssessQualityBatchRequest request;
  request.mutable_urls()->Reserve(count);
  for (int i = 0; i < count; ++i) request.add_urls("");
  return request;
}

TEST(GrpcRequestBoundsTest, AMillionEmptyUrlsAreRefusedByTheMessageLimitBeforeParsing) {
  FakeVendor vendor;
  ASSERT_TRUE(vendor.Start());
  GatewayProcess gateway(vendor.BaseUrl(), {});
  ASSERT_GT(gateway.port(), 0) << gateway.process().output();
  grpc::Status status;
  // About 2 MB on the wire: over grpc.max_receive_message_bytes (512 KiB).
  const int64_t growth = CallMeasuringRss(gateway, EmptyUrls(1000000), &status);
  std::cout << "a million empty URLs, default limits: " << status.error_code() << ", gateway RSS +"
            << growth << " KiB\n";
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();
  EXPECT_RSS_GROWTH_LT(growth, 16 * kMiB);
  EXPECT_EQ(vendor.RequestCount(), 0u);
}

TEST(GrpcRequestBoundsTest, AMillionEmptyUrlsPastARaisedMessageLimitAreOneViolation) {
  FakeVendor vendor;
  ASSERT_TRUE(vendor.Start());
  // An operator who raised the message limit: validation must still hold the line.
  GatewayProcess gateway(vendor.BaseUrl(), {"--grpc-max-receive-message-bytes=4194304"});
  ASSERT_GT(gateway.port(), 0) << gateway.process().output();
  grpc::Status status;
  const int64_t growth = CallMeasuringRss(gateway, EmptyUrls(1000000), &status);
  std::cout << "a million empty URLs, 4 MiB messages: " << status.error_code() << ", gateway RSS +"
            << growth << " KiB\n";
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  const google::rpc::BadRequest bad_request = BadRequestOf(status);
  ASSERT_EQ(bad_request.field_violations_size(), 1);
  EXPECT_EQ(bad_request.field_violations(0).field(), "urls");
  EXPECT_NE(bad_request.field_violations(0).description().find("urls has 1000000 URLs"),
            std::string::npos);
  // The parsed request itself (a million strings) is most of it; no violation per URL.
  EXPECT_RSS_GROWTH_LT(growth, 96 * kMiB);
  EXPECT_EQ(vendor.RequestCount(), 0u);
}

TEST(GrpcRequestBoundsTest, TwentyThousandValidUrlsNeverReachTheVendor) {
  FakeVendor vendor;
  ASSERT_TRUE(vendor.Start());
  GatewayProcess gateway(vendor.BaseUrl(), {});
  ASSERT_GT(gateway.port(), 0) << gateway.process().output();
  v1::AssessQualityBatchRequest request;
  for (int i = 0; i < 20000; ++i) request.add_urls(absl::StrCat("https://i.test/", i));
  grpc::Status status;
  CallMeasuringRss(gateway, request, &status);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  const google::rpc::BadRequest bad_request = BadRequestOf(status);
  ASSERT_EQ(bad_request.field_violations_size(), 1);
  EXPECT_NE(bad_request.field_violations(0).description().find("at most 100"), std::string::npos);
  EXPECT_EQ(vendor.RequestCount(), 0u);
}

}  // namespace
}  // namespace inspection::testing
