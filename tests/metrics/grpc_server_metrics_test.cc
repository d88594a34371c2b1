// The metrics interceptor on a real gRPC server (127.0.0.1, OS-chosen port) with callback-API
// methods: one unary, one server-streaming, plus a stream the client cancels and a method
// the server does not have. Counters are read back from AllMetrics::Collect().
//
// The test service is written the way protoc's generated "raw callback" services are
// (RpcServiceMethod + MarkMethodRawCallback with grpc::ByteBuffer messages), so the test needs
// no .proto of its own; the client side uses the same internal helpers generated stubs use.
#include "gateway/metrics/grpc_server_metrics.h"

#include <chrono>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/client_unary_call.h>
#include <grpcpp/impl/codegen/server_callback_handlers.h>
#include <grpcpp/impl/rpc_method.h>
#include <grpcpp/impl/rpc_service_method.h>
#include <grpcpp/impl/service_type.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/server_callback.h>
#include <grpcpp/support/sync_stream.h>
#include <gtest/gtest.h>
#include <prometheus/metric_type.h>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "tests/metrics/all_metrics.h"
#include "tests/support/wait.h"

namespace inspection::metrics {
namespace {

using LabelMap = std::map<std::string, std::string>;
using namespace std::chrono_literals;

constexpr char kService[] = "test.v1.Probe";
constexpr char kEcho[] = "/test.v1.Probe/Echo";
constexpr char kCount[] = "/test.v1.Probe/Count";

grpc::ByteBuffer Bytes(const std::string& text) {
  grpc::Slice slice(text);
  return grpc::ByteBuffer(&slice, 1);
}

std::string Text(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  if (!buffer.Dump(&slices).ok()) return "";
  std::string text;
  for (const grpc::Slice& slice : slices) {
    text.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  }
  return text;
}

// Echo (unary): answers the request back; "fail" -> INVALID_ARGUMENT.
// Count (server streaming): request "N" -> N messages then OK; "N!" -> N messages then
// NOT_FOUND; "hold" -> one message, then waits for the client to cancel.
class ProbeService final : public grpc::Service {
 public:
  ProbeService() {
    AddMethod(new grpc::internal::RpcServiceMethod(kEcho, grpc::internal::RpcMethod::NORMAL_RPC,
                                                   nullptr));
    MarkMethodRawCallback(
        0, new grpc::internal::CallbackUnaryHandler<grpc::ByteBuffer, grpc::ByteBuffer>(
               [](grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
                  grpc::ByteBuffer* response) {
                 grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
                 const std::string text = Text(*request);
                 if (text == "fail") {
                   reactor->Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "fail"));
                 } else {
                   *response = Bytes(text);
                   reactor->Finish(grpc::Status::OK);
                 }
                 return reactor;
               }));
    AddMethod(new grpc::internal::RpcServiceMethod(
        kCount, grpc::internal::RpcMethod::SERVER_STREAMING, nullptr));
    MarkMethodRawCallback(
        1, new grpc::internal::CallbackServerStreamingHandler<grpc::ByteBuffer, grpc::ByteBuffer>(
               [this](grpc::CallbackServerContext* context, const grpc::ByteBuffer* request) {
                 return new Counter(Text(*request), &held_);
               }));
  }

  // Notified once a "hold" stream has written its first message.
  absl::Notification& held() { return held_; }

 private:
  // One write in flight, continue from OnWriteDone, free in OnDone (gRPC's example shape).
  class Counter final : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
   public:
    Counter(const std::string& request, absl::Notification* held) : held_(held) {
      if (request == "hold") {
        hold_ = true;
        left_ = 1;
      } else {
        fail_ = !request.empty() && request.back() == '!';
        left_ = std::stoi(request);
      }
      Next();
    }
    void OnWriteDone(bool ok) override {
      if (!ok) return;  // cancelled: OnCancel finishes
      Next();
    }
    void OnCancel() override { Finish(grpc::Status::CANCELLED); }
    void OnDone() override { delete this; }

   private:
    void Next() {
      if (left_ > 0) {
        message_ = Bytes(std::to_string(left_--));
        StartWrite(&message_);
        return;
      }
      if (hold_) {
        held_->Notify();  // now wait for OnCancel
        return;
      }
      Finish(fail_ ? grpc::Status(grpc::StatusCode::NOT_FOUND, "gone") : grpc::Status::OK);
    }

    absl::Notification* held_;
    grpc::ByteBuffer message_;
    int left_ = 0;
    bool fail_ = false;
    bool hold_ = false;
  };

  absl::Notification held_;
};

class GrpcServerMetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    AllMetricsConfig config;
    config.grpc_methods = {{kService, "Echo", GrpcType::kUnary},
                           {kService, "Count", GrpcType::kServerStream}};
    absl::StatusOr<std::shared_ptr<AllMetrics>> metrics = AllMetrics::Create(config);
    ASSERT_TRUE(metrics.ok()) << metrics.status();
    metrics_ = *std::move(metrics);

    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&service_);
    std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> creators;
    creators.push_back(
        std::make_unique<GrpcServerMetricsInterceptorFactory>(metrics_->grpc_shared()));
    builder.experimental().SetInterceptorCreators(std::move(creators));
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_GT(port, 0);
    channel_ = grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                                   grpc::InsecureChannelCredentials());
  }

  void TearDown() override {
    if (server_) server_->Shutdown(std::chrono::system_clock::now() + 5s);
  }

  grpc::Status Echo(const std::string& text, std::string* reply = nullptr) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + 10s);
    grpc::ByteBuffer response;
    const grpc::Status status =
        grpc::internal::BlockingUnaryCall<grpc::ByteBuffer, grpc::ByteBuffer>(
            channel_.get(), grpc::internal::RpcMethod(kEcho, grpc::internal::RpcMethod::NORMAL_RPC),
            &context, Bytes(text), &response);
    if (reply != nullptr) *reply = Text(response);
    return status;
  }

  // Reads the whole stream; returns its status and the number of messages.
  grpc::Status Count(const std::string& request, int* messages) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + 10s);
    std::unique_ptr<grpc::ClientReader<grpc::ByteBuffer>> reader(
        grpc::internal::ClientReaderFactory<grpc::ByteBuffer>::Create(
            channel_.get(),
            grpc::internal::RpcMethod(kCount, grpc::internal::RpcMethod::SERVER_STREAMING),
            &context, Bytes(request)));
    grpc::ByteBuffer message;
    *messages = 0;
    while (reader->Read(&message)) ++*messages;
    return reader->Finish();
  }

  double Value(const std::string& name, const LabelMap& labels) const {
    for (const prometheus::MetricFamily& family : metrics_->Collect()) {
      if (family.name != name) continue;
      for (const auto& metric : family.metric) {
        LabelMap actual;
        for (const auto& label : metric.label) actual[label.name] = label.value;
        if (actual != labels) continue;
        if (family.type == prometheus::MetricType::Histogram) {
          return static_cast<double>(metric.histogram.sample_count);
        }
        return metric.counter.value;
      }
    }
    ADD_FAILURE() << "no series " << name;
    return std::numeric_limits<double>::quiet_NaN();
  }

  static LabelMap Method(const std::string& type, const std::string& method,
                         const std::string& service = kService) {
    return {{"grpc_type", type}, {"grpc_service", service}, {"grpc_method", method}};
  }
  static LabelMap WithCode(LabelMap labels, const std::string& code) {
    labels["grpc_code"] = code;
    return labels;
  }

  ProbeService service_;
  std::shared_ptr<AllMetrics> metrics_;
  std::unique_ptr<grpc::Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
};

TEST_F(GrpcServerMetricsTest, UnaryCallbackCallsAreCountedByCode) {
  std::string reply;
  ASSERT_TRUE(Echo("hello", &reply).ok());
  EXPECT_EQ(reply, "hello");
  ASSERT_TRUE(Echo("again").ok());
  ASSERT_EQ(Echo("fail").error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  // handled is recorded before the status leaves the server, so the client having its
  // answer means the counters are final: no waiting needed.
  const LabelMap echo = Method("unary", "Echo");
  EXPECT_EQ(Value("grpc_server_started_total", echo), 3);
  EXPECT_EQ(Value("grpc_server_handled_total", WithCode(echo, "OK")), 2);
  EXPECT_EQ(Value("grpc_server_handled_total", WithCode(echo, "InvalidArgument")), 1);
  EXPECT_EQ(Value("grpc_server_handled_total", WithCode(echo, "Unknown")), 0);
  EXPECT_EQ(Value("grpc_server_handling_seconds", echo), 3);  // sample count
  EXPECT_EQ(Value("grpc_server_msg_received_total", echo), 3);
  EXPECT_EQ(Value("grpc_server_msg_sent_total", echo), 2);  // no message with the error
  // Nothing leaked to the other method or to "other".
  EXPECT_EQ(Value("grpc_server_started_total", Method("server_stream", "Count")), 0);
  EXPECT_EQ(Value("grpc_server_started_total", Method("unary", "other", "other")), 0);
}

TEST_F(GrpcServerMetricsTest, ServerStreamingCallbackCallsCountMessagesAndCodes) {
  int messages = 0;
  ASSERT_TRUE(Count("3", &messages).ok());
  EXPECT_EQ(messages, 3);
  ASSERT_EQ(Count("2!", &messages).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(messages, 2);
  ASSERT_TRUE(Count("0", &messages).ok());
  EXPECT_EQ(messages, 0);

  const LabelMap count = Method("server_stream", "Count");
  EXPECT_EQ(Value("grpc_server_started_total", count), 3);
  EXPECT_EQ(Value("grpc_server_handled_total", WithCode(count, "OK")), 2);
  EXPECT_EQ(Value("grpc_server_handled_total", WithCode(count, "NotFound")), 1);
  EXPECT_EQ(Value("grpc_server_handling_seconds", count), 3);
  EXPECT_EQ(Value("grpc_server_msg_sent_total", count), 5);
  EXPECT_EQ(Value("grpc_server_msg_received_total", count), 3);
}

TEST_F(GrpcServerMetricsTest, ClientCancellationIsCountedAsCanceled) {
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReader<grpc::ByteBuffer>> reader(
      grpc::internal::ClientReaderFactory<grpc::ByteBuffer>::Create(
          channel_.get(),
          grpc::internal::RpcMethod(kCount, grpc::internal::RpcMethod::SERVER_STREAMING), &context,
          Bytes("hold")));
  grpc::ByteBuffer message;
  ASSERT_TRUE(reader->Read(&message));
  ASSERT_TRUE(service_.held().WaitForNotificationWithTimeout(absl::Seconds(10)));
  context.TryCancel();
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);

  // The client learns of its own cancellation at once; the server side finishes on its own
  // time, so wait for the count (the interceptor records it whichever way the call ends).
  const LabelMap count = Method("server_stream", "Count");
  EXPECT_TRUE(inspection::testing::WaitUntil(
      [&] { return Value("grpc_server_handled_total", WithCode(count, "Canceled")) == 1; }, 10s));
  EXPECT_EQ(Value("grpc_server_started_total", count), 1);
  EXPECT_EQ(Value("grpc_server_handling_seconds", count), 1);
  EXPECT_EQ(Value("grpc_server_handled_total", WithCode(count, "OK")), 0);
}

TEST_F(GrpcServerMetricsTest, UnknownMethodsGoToTheOtherBucketNotUnderTheirName) {
  grpc::ClientContext context;
  grpc::ByteBuffer response;
  const grpc::Status status = grpc::internal::BlockingUnaryCall<grpc::ByteBuffer, grpc::ByteBuffer>(
      channel_.get(),
      grpc::internal::RpcMethod("/test.v1.Probe/Nope", grpc::internal::RpcMethod::NORMAL_RPC),
      &context, Bytes("x"), &response);
  ASSERT_EQ(status.error_code(), grpc::StatusCode::UNIMPLEMENTED);

  // gRPC answers unknown methods through a generic handler, seen as a bidi stream.
  const LabelMap other = Method("bidi_stream", "other", "other");
  EXPECT_TRUE(inspection::testing::WaitUntil(
      [&] { return Value("grpc_server_handled_total", WithCode(other, "Unimplemented")) == 1; },
      10s));
  EXPECT_EQ(Value("grpc_server_started_total", other), 1);
  for (const prometheus::MetricFamily& family : metrics_->Collect()) {
    for (const auto& metric : family.metric) {
      for (const auto& label : metric.label) {
        EXPECT_NE(label.value, "Nope") << family.name;
      }
    }
  }
}

}  // namespace
}  // namespace inspection::metrics
