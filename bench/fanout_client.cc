// bench_fanout_client: holds N EventService/Subscribe streams open against a gateway, for
// bench/run.py's `streams` scenario (the RSS of 10,000 open streams, the delivery delay of
// one webhook to 1,000 subscribers). A C++ client, so that what is measured is the
// gateway's fan-out and not the client's per-message cost.
//
//   bench_fanout_client --target=HOST:PORT --streams=N [--webhook=URL --key-file=PATH]
//                       [--from-start --inspection-id=ID]
//
// --from-start and --inspection-id make each stream a filtered catch-up over the whole
// retained log (the `catchup_isolation` scenario's "Subscribe{from_start, inspection_id:
// nope}" streams).
// Opens the streams (over ceil(N / 500) channels), prints "started N", then waits for a
// line on stdin: "post" POSTs one webhook to URL (x-api-key from the file) and waits for
// the event on every stream (repeatable); "quit" or the end of stdin ends the streams. Prints one
// JSON line with the delays from just before the POST to each stream's receipt: {"received",
// "p50_us", "p99_us", "max_us", "min_us"}, and "post_us", the POST's own round trip (the durable
// append: the receiver answers once the event is stored). Exits 1 when not every stream got the
// event within 60 s.
#include <httplib.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <fstream>
#include <iostream>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "bench/bench_flags.h"
#include "inspection/v1/event.grpc.pb.h"

namespace {

using ::inspection::bench::Flag;

using Clock = std::chrono::steady_clock;

struct Shared {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<Clock::time_point> received;
  int done = 0;
};

class Stream final : public grpc::ClientReadReactor<inspection::v1::SubscribeResponse> {
 public:
  Stream(inspection::v1::EventService::Stub* stub, Shared* shared,
         const inspection::v1::SubscribeRequest& request)
      : shared_(shared), request_(request) {
    stub->async()->Subscribe(&context_, &request_, this);
    StartRead(&response_);
    StartCall();
  }
  void OnReadDone(bool ok) override {
    if (!ok) return;  // the stream ends; OnDone follows
    const auto now = Clock::now();
    {
      std::lock_guard<std::mutex> lock(shared_->mu);
      shared_->received.push_back(now);
      shared_->cv.notify_all();
    }
    StartRead(&response_);  // the next event
  }
  void OnDone(const grpc::Status&) override {
    std::lock_guard<std::mutex> lock(shared_->mu);
    ++shared_->done;
    shared_->cv.notify_all();
  }
  void Cancel() { context_.TryCancel(); }

 private:
  Shared* const shared_;
  grpc::ClientContext context_;
  inspection::v1::SubscribeRequest request_;
  inspection::v1::SubscribeResponse response_;
};

bool HasFlag(int argc, char** argv, const std::string& name) {
  for (int i = 1; i < argc; ++i) {
    if (argv[i] == "--" + name) return true;
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string target = Flag(argc, argv, "target");
  const int streams = std::atoi(Flag(argc, argv, "streams").c_str());
  if (target.empty() || streams <= 0) {
    std::cerr << "usage: bench_fanout_client --target=HOST:PORT --streams=N "
                 "[--webhook=URL --key-file=PATH] [--from-start --inspection-id=ID]\n";
    return 2;
  }
  Shared shared;
  std::vector<std::unique_ptr<inspection::v1::EventService::Stub>> stubs;
  for (int i = 0; i < (streams + 499) / 500; ++i) {
    grpc::ChannelArguments args;
    args.SetInt("grpc.channel_id", i);  // one connection per channel
    args.SetInt(GRPC_ARG_MAX_CONCURRENT_STREAMS, 1000);
    stubs.push_back(inspection::v1::EventService::NewStub(
        grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args)));
  }
  inspection::v1::SubscribeRequest request;
  request.set_from_start(HasFlag(argc, argv, "from-start"));
  request.set_inspection_id(Flag(argc, argv, "inspection-id"));
  std::vector<std::unique_ptr<Stream>> open;
  open.reserve(streams);
  for (int i = 0; i < streams; ++i) {
    open.push_back(std::make_unique<Stream>(stubs[i % stubs.size()].get(), &shared, request));
  }
  std::cout << "started " << streams << std::endl;

  int exit_code = 0;
  int posts = 0;
  for (std::string line; std::getline(std::cin, line);) {
    if (line == "quit") break;
    if (line != "post") continue;
    std::ifstream key_file(Flag(argc, argv, "key-file"));
    std::string key;
    std::getline(key_file, key);
    const std::string webhook = Flag(argc, argv, "webhook");
    const size_t path_start = webhook.find('/', webhook.find("//") + 2);
    httplib::Client client(webhook.substr(0, path_start));
    {
      std::lock_guard<std::mutex> lock(shared.mu);
      shared.received.clear();
    }
    // A body of its own each time, across clients too: the same body twice would be one
    // (deduplicated) event.
    static const std::string run = std::to_string(
        std::chrono::system_clock::now().time_since_epoch().count() ^ (int64_t{getpid()} << 40));
    const std::string body = R"({"event": "createReport", "inspectionId": "bench-fanout", "n": )" +
                             std::to_string(++posts) + R"(, "run": ")" + run + R"("})";
    const auto sent = Clock::now();
    auto response = client.Post(webhook.substr(path_start).c_str(), {{"x-api-key", key}}, body,
                                "application/json");
    const auto acknowledged = Clock::now();
    if (!response || response->status != 200) {
      std::cerr << "the webhook was not accepted\n";
      exit_code = 1;
      break;
    }
    std::vector<Clock::time_point> received;
    {
      std::unique_lock<std::mutex> lock(shared.mu);
      shared.cv.wait_for(lock, std::chrono::seconds(60),
                         [&] { return static_cast<int>(shared.received.size()) >= streams; });
      received = shared.received;
    }
    std::vector<int64_t> delays;
    for (const auto& at : received) {
      delays.push_back(std::chrono::duration_cast<std::chrono::microseconds>(at - sent).count());
    }
    std::sort(delays.begin(), delays.end());
    auto pct = [&](double p) {
      return delays.empty() ? 0
                            : delays[std::min(delays.size() - 1,
                                              static_cast<size_t>(delays.size() * p / 100))];
    };
    std::cout << R"({"received": )" << delays.size() << R"(, "p50_us": )" << pct(50)
              << R"(, "p99_us": )" << pct(99) << R"(, "max_us": )"
              << (delays.empty() ? 0 : delays.back()) << R"(, "min_us": )"
              << (delays.empty() ? 0 : delays.front()) << R"(, "post_us": )"
              << std::chrono::duration_cast<std::chrono::microseconds>(acknowledged - sent).count()
              << "}" << std::endl;
    if (static_cast<int>(delays.size()) < streams) {
      exit_code = 1;
      break;
    }
  }
  for (auto& stream : open) stream->Cancel();
  std::unique_lock<std::mutex> lock(shared.mu);
  shared.cv.wait_for(lock, std::chrono::seconds(30), [&] { return shared.done >= streams; });
  const bool all_done = shared.done >= streams;
  lock.unlock();
  if (!all_done) std::_Exit(exit_code);  // a stream that never ended: do not hang on it
  return exit_code;
}
