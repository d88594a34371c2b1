// The webhook port as a hostile or careless client sees it, against the real
// inspection-gateway process over real sockets: idle connections by the thousand,
// slowloris heads and bodies, kept-alive hogs, an endless header line, 100,000 headers,
// an HTTP/2 preface with a huge body, a chunk-extension flood, deep JSON after a valid key,
// a connect flood, and slow clients on the admin port. For each: the answer (or the
// close), the memory it cost the gateway (VmRSS from /proc, sampled during the attack),
// and a legitimate, correctly keyed delivery sent while it goes on, which must be stored
// and answered 200 within 1 s.
//
// Attackers connect from 127.0.0.2 and up (a server limiting per address sees them as
// other clients than the legitimate sender on 127.0.0.1).
#include <dirent.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"
#include "tests/support/gateway_binary.h"
#include "tests/support/raw_tcp_client.h"
#include "tests/support/rss_bounds.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"
#include "tests/support/wait.h"

namespace inspection::testing {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr char kWebhookKey[] = "hostile-suite-webhook-key";
constexpr milliseconds kDeadline{30000};
constexpr milliseconds kLegitimateAnswerWithin{1000};
constexpr int64_t kMiB = 1024;  // in KiB

// The process may need more open files than the usual 1024 (10,000 idle sockets).
uint64_t RaiseOpenFileLimit() {
  rlimit limit{};
  ::getrlimit(RLIMIT_NOFILE, &limit);
  limit.rlim_cur = limit.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &limit);
  ::getrlimit(RLIMIT_NOFILE, &limit);
  return limit.rlim_cur;
}

int StatusOf(const std::string& answer) {
  int status = 0;
  if (answer.rfind("HTTP/1.1 ", 0) == 0) absl::SimpleAtoi(answer.substr(9, 3), &status);
  return status;
}

// What a legitimate delivery got.
struct Delivery {
  int status = 0;
  std::string answer;
  milliseconds took{0};
};

// inspection-gateway with its webhook receiver on free loopback ports, an SQLite log in a
// temporary folder, and no vendor (none is called here).
class IngressGateway {
 public:
  explicit IngressGateway(std::vector<std::string> flags) {
    std::vector<std::string> argv =
        LoopbackGatewayArgv(GATEWAY_BINARY, "http://127.0.0.1:9", temp_.File("events.db"));
    for (std::string& flag : flags) argv.push_back(std::move(flag));
    process_ = std::make_unique<Subprocess>(
        argv, std::vector<std::string>{"INSPECTION_API_KEY=hostile-suite-vendor-key",
                                       std::string("INSPECTION_WEBHOOK_KEY=") + kWebhookKey});
    const ServingPorts ports = WaitUntilServing(*process_, kDeadline);
    webhook_port_ = ports.webhook;
    admin_port_ = ports.admin;
  }

  bool ok() const { return webhook_port_ > 0 && admin_port_ > 0; }
  int webhook_port() const { return webhook_port_; }
  int admin_port() const { return admin_port_; }
  Subprocess& process() { return *process_; }

  // A correctly keyed delivery with a body of its own (never a duplicate), on a new
  // connection from 127.0.0.1; its head leaves `head_after` after the connect (a vendor
  // across a network: its request arrives a round trip after its connection).
  Delivery Deliver(milliseconds head_after = milliseconds(0)) {
    const std::string body =
        absl::StrCat(R"({"event":"createReport","inspectionId":"legit-)", ++deliveries_, R"("})");
    const auto start = Clock::now();
    Delivery delivery;
    const int fd = ConnectToLoopback(webhook_port_);
    if (fd < 0) return delivery;
    if (head_after.count() > 0) std::this_thread::sleep_for(head_after);  // the network's pace
    SendAll(fd,
            absl::StrCat("POST /webhooks/v2 HTTP/1.1\r\nHost: gateway\r\nx-api-key: ", kWebhookKey,
                         "\r\nContent-Type: application/json\r\nContent-Length: ", body.size(),
                         "\r\nConnection: close\r\n\r\n", body));
    delivery.answer = ReadToEnd(fd, kDeadline);
    delivery.took = std::chrono::duration_cast<milliseconds>(Clock::now() - start);
    delivery.status = StatusOf(delivery.answer);
    ::close(fd);
    return delivery;
  }

  // GET on the admin port; the whole answer.
  std::string Admin(const std::string& path) {
    const int fd = ConnectToLoopback(admin_port_);
    if (fd < 0) return "";
    SendAll(fd, absl::StrCat("GET ", path, " HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"));
    std::string answer = ReadToEnd(fd, kDeadline);
    ::close(fd);
    return answer;
  }

  double Metric(const std::string& series) { return PrometheusSample(Admin("/metrics"), series); }

 private:
  TempDir temp_;  // before process_: removed after the process stopped
  std::unique_ptr<Subprocess> process_;
  int webhook_port_ = 0;
  int admin_port_ = 0;
  int deliveries_ = 0;
};

// The largest VmRSS of a process while it lives (sampled every 2 ms).
class RssPeak {
 public:
  explicit RssPeak(const Subprocess& process) : process_(process) {
    sampler_ = std::thread([this] {
      while (!done_.load()) {
        peak_ = std::max<int64_t>(peak_.load(), process_.ResidentKiB());
        std::this_thread::sleep_for(milliseconds(2));
      }
    });
  }
  ~RssPeak() { Stop(); }
  int64_t Stop() {
    done_ = true;
    if (sampler_.joinable()) sampler_.join();
    return std::max<int64_t>(peak_.load(), process_.ResidentKiB());
  }

 private:
  const Subprocess& process_;
  std::atomic<bool> done_{false};
  std::atomic<int64_t> peak_{0};
  std::thread sampler_;
};

class HostileIngressTest : public ::testing::Test {
 protected:
  // Starts the gateway and warms it up (a few deliveries, so that the threads and the log
  // have made their one-time allocations), then reads the baseline RSS.
  void Start(std::vector<std::string> flags = {}) {
    gateway_ = std::make_unique<IngressGateway>(std::move(flags));
    ASSERT_TRUE(gateway_->ok()) << gateway_->process().output();
    for (int i = 0; i < 20; ++i) ASSERT_EQ(gateway_->Deliver().status, 200);
    baseline_kib_ = gateway_->process().ResidentKiB();
    ASSERT_GT(baseline_kib_, 0);
  }

  // A legitimate delivery during the attack: stored (200, "stored", not a duplicate) and
  // answered within 1 s.
  void ExpectLegitimateDeliveryGoesThrough(const std::string& during,
                                           milliseconds head_after = milliseconds(0)) {
    const Delivery delivery = gateway_->Deliver(head_after);
    EXPECT_EQ(delivery.status, 200) << during << ": " << delivery.answer;
    EXPECT_NE(delivery.answer.find(R"("status":"stored")"), std::string::npos) << during;
    EXPECT_NE(delivery.answer.find(R"("duplicate":false)"), std::string::npos) << during;
    EXPECT_LT(delivery.took, kLegitimateAnswerWithin) << during;
    ++legitimate_;
  }

  // RSS growth over the baseline stays under `bound_kib`; the figure is printed.
  void ExpectGrowthBelow(int64_t peak_kib, int64_t bound_kib, const std::string& what) {
    const int64_t growth = peak_kib - baseline_kib_;
    std::cout << what << ": gateway RSS +" << growth << " KiB (bound " << bound_kib << " KiB)\n";
    ::testing::Test::RecordProperty("rss_growth_kib", static_cast<int>(growth));
    EXPECT_RSS_GROWTH_LT(growth, bound_kib) << what;
  }

  // Every legitimate delivery of the test was appended: the warm-up's and those during
  // the attack.
  void ExpectEveryLegitimateDeliveryStored() {
    EXPECT_EQ(gateway_->Metric("inspection_event_log_appends_total"), 20 + legitimate_);
  }

  std::unique_ptr<IngressGateway> gateway_;
  int64_t baseline_kib_ = 0;
  int legitimate_ = 0;
};

// Sends `head` then `chunk` repeatedly (up to `total` bytes) until the server stops taking
// it; returns the server's answer (every answer of the webhook port has a JSON body, so it
// is complete at its last '}'), or what came before the server closed.
std::string Flood(int port, const std::string& source, const std::string& head,
                  const std::string& chunk, size_t total) {
  const int fd = ConnectToLoopbackFrom(source, port);
  if (fd < 0) return "";
  SendAll(fd, head);
  for (size_t sent = 0; sent < total && SendAll(fd, chunk); sent += chunk.size()) {
  }
  std::string answer = ReadUntil(fd, "}", kDeadline);
  ::close(fd);
  return answer;
}

std::string Attacker(int i) { return absl::StrCat("127.0.", 2 + i / 200, ".", 2 + i % 200); }

// ---------------------------------------------------------------------------------------

TEST_F(HostileIngressTest, TenThousandIdleConnectionsCostNoThreadAndDeliveriesGoOn) {
  ASSERT_GE(RaiseOpenFileLimit(), 11000u) << "this test holds 10,000 sockets open";
  // Room for all of them: spread over 40 addresses (250 each, under the 256 per address),
  // and a head timeout longer than the test.
  Start({"--webhook-max-connections=12000", "--webhook-head-timeout-ms=120000"});
  const int threads_before = gateway_->process().ThreadCount();
  RssPeak peak(gateway_->process());
  std::vector<int> idle;
  for (int i = 0; i < 10000; ++i) {
    const int fd =
        ConnectToLoopbackFrom(absl::StrCat("127.0.1.", 1 + i / 250), gateway_->webhook_port());
    ASSERT_GE(fd, 0) << "connection " << i;
    idle.push_back(fd);
  }
  ASSERT_TRUE(WaitUntil([&] { return gateway_->Metric("inspection_webhook_connections") >= 10000; },
                        kDeadline));
  EXPECT_EQ(gateway_->process().ThreadCount(), threads_before);
  ExpectLegitimateDeliveryGoesThrough("10,000 idle connections open");
  ExpectGrowthBelow(peak.Stop(), 40 * kMiB, "10,000 idle connections");
  for (int fd : idle) ::close(fd);
  EXPECT_TRUE(WaitUntil([&] { return gateway_->Metric("inspection_webhook_connections") <= 1; },
                        kDeadline));
  ExpectEveryLegitimateDeliveryStored();
}

// Issue 31, finding 7: connections that never send a byte, spread over addresses so that
// none is over its per-address limit, filled webhook.max_connections, and the vendor's next
// delivery got 503 until their head timeouts ran out. Now the one that has waited longest
// without a complete head is closed for each newcomer. (2,000 connections against a limit
// of 2,000: the mechanism is the same at the default of 10,000, in a fifth of the time.)
TEST_F(HostileIngressTest, SilentConnectionsAtTheLimitMakeRoomForTheVendor) {
  ASSERT_GE(RaiseOpenFileLimit(), 3000u);
  Start({"--webhook-max-connections=2000", "--webhook-head-timeout-ms=120000"});
  RssPeak peak(gateway_->process());
  std::vector<int> silent;
  for (int i = 0; i < 2000; ++i) {
    const int fd = ConnectToLoopbackFrom(Attacker(i), gateway_->webhook_port());
    ASSERT_GE(fd, 0) << "connection " << i;
    silent.push_back(fd);
  }
  ASSERT_TRUE(WaitUntil([&] { return gateway_->Metric("inspection_webhook_connections") >= 2000; },
                        kDeadline));
  const std::string closed_for_room =
      R"(inspection_webhook_http_refusals_total{reason="awaiting_head_closed_for_room"})";
  ExpectLegitimateDeliveryGoesThrough("2,000 silent connections at the limit");
  EXPECT_EQ(gateway_->Metric(closed_for_room), 1);
  EXPECT_TRUE(PeerCloses(silent[0], kDeadline)) << "the longest waiting is the one closed";
  EXPECT_FALSE(PeerCloses(silent[1], milliseconds(0)));
  // The attacker fills the place again (the delivery's connection has closed): the next
  // delivery takes the place of the one that now has waited longest, not of the newest.
  ASSERT_TRUE(WaitUntil([&] { return gateway_->Metric("inspection_webhook_connections") <= 1999; },
                        kDeadline));
  silent.push_back(ConnectToLoopbackFrom(Attacker(2000), gateway_->webhook_port()));
  ASSERT_TRUE(WaitUntil([&] { return gateway_->Metric("inspection_webhook_connections") >= 2000; },
                        kDeadline));
  ExpectLegitimateDeliveryGoesThrough("the port filled again");
  EXPECT_EQ(gateway_->Metric(closed_for_room), 2);
  EXPECT_TRUE(PeerCloses(silent[1], kDeadline));
  EXPECT_FALSE(PeerCloses(silent.back(), milliseconds(0)));
  EXPECT_EQ(gateway_->Metric(R"(inspection_webhook_http_refusals_total{reason="max_connections"})"),
            0);
  ExpectGrowthBelow(peak.Stop(), 16 * kMiB, "2,000 silent connections");
  for (int fd : silent) ::close(fd);
  ExpectEveryLegitimateDeliveryStored();
}

// Outside review of issue 31: 40 connections over 4 addresses (10 each, the per-address
// limit), each pipelining `GET /x` with a 4 KiB receive window and never reading: every
// connection is stuck writing an answer (no key is needed for a 405), and at
// webhook.max_connections 64 of 121 deliveries got 503. Now the connection that has been
// writing the longest is closed for the newcomer.
TEST_F(HostileIngressTest, ClientsThatDoNotReadTheirAnswersMakeRoomForTheVendor) {
  Start({"--webhook-max-connections=40", "--webhook-max-connections-per-client=10",
         "--webhook-write-timeout-ms=120000"});
  RssPeak peak(gateway_->process());
  std::vector<int> unread;
  for (int i = 0; i < 40; ++i) {
    const int fd = ConnectToLoopbackFrom(absl::StrCat("127.0.3.", 10 + i / 10),
                                         gateway_->webhook_port(), /*receive_buffer=*/4096);
    ASSERT_GE(fd, 0) << "connection " << i;
    ASSERT_TRUE(
        PipelineUntilTheServerStopsReading(fd, "GET /x HTTP/1.1\r\nHost: a\r\n\r\n", kDeadline))
        << "connection " << i;
    unread.push_back(fd);
  }
  ASSERT_TRUE(WaitUntil([&] { return gateway_->Metric("inspection_webhook_connections") >= 40; },
                        kDeadline));
  for (int i = 0; i < 5; ++i) ExpectLegitimateDeliveryGoesThrough("40 connections not reading");
  EXPECT_GE(gateway_->Metric(
                R"(inspection_webhook_http_refusals_total{reason="answering_closed_for_room"})"),
            1);
  EXPECT_EQ(gateway_->Metric(R"(inspection_webhook_http_refusals_total{reason="max_connections"})"),
            0);
  ExpectGrowthBelow(peak.Stop(), 16 * kMiB, "40 connections not reading their answers");
  for (int fd : unread) ::close(fd);
  ExpectEveryLegitimateDeliveryStored();
}

// Second outside review of issue 31: every connection but the vendor's stuck on unread
// answers, and the attacker connecting again every few milliseconds. Heads were closed
// before answers whatever their age, so the vendor's connection, waiting 20 ms for its head,
// was the one closed for each newcomer: 0 of 30 deliveries answered. The connection stuck
// the longest goes instead.
TEST_F(HostileIngressTest, ReconnectingNonReadersDoNotCloseTheVendorBeforeItsHead) {
  Start({"--webhook-max-connections=40", "--webhook-write-timeout-ms=120000"});
  RssPeak peak(gateway_->process());
  std::atomic<bool> attacking{true};
  std::atomic<int> opened{0};
  std::thread attacker([&] {
    std::string pipelined;
    for (int i = 0; i < 2000; ++i) pipelined += "GET /x HTTP/1.1\r\nHost: a\r\n\r\n";
    std::deque<int> held;
    while (attacking.load()) {
      const int fd = ConnectToLoopbackFrom("127.0.0.2", gateway_->webhook_port(),
                                           /*receive_buffer=*/2048);
      if (fd >= 0) {
        ::send(fd, pipelined.data(), pipelined.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
        held.push_back(fd);
        ++opened;
      }
      while (held.size() > 200) {
        ::close(held.front());
        held.pop_front();
      }
      std::this_thread::sleep_for(milliseconds(5));  // the attack's pace, not a wait
    }
    for (int fd : held) ::close(fd);
  });
  // The port is full of the attacker's connections before the vendor comes.
  const bool full = WaitUntil(
      [&] { return gateway_->Metric("inspection_webhook_connections") >= 40; }, kDeadline);
  EXPECT_TRUE(full);
  for (int i = 0; i < 10 && full; ++i) {
    ExpectLegitimateDeliveryGoesThrough("non-readers reconnecting", milliseconds(20));
  }
  attacking = false;
  attacker.join();
  std::cout << "the attacker opened " << opened.load() << " connections\n";
  EXPECT_GT(gateway_->Metric(
                R"(inspection_webhook_http_refusals_total{reason="answering_closed_for_room"})"),
            0);
  ExpectGrowthBelow(peak.Stop(), 16 * kMiB, "non-readers reconnecting");
  ExpectEveryLegitimateDeliveryStored();
}

TEST_F(HostileIngressTest, ConnectionsOverThePerAddressLimitAreShedAtOnce) {
  ASSERT_GE(RaiseOpenFileLimit(), 3000u);
  Start();  // defaults: 256 per address
  RssPeak peak(gateway_->process());
  std::vector<int> held;
  int shed = 0;
  for (int i = 0; i < 2000; ++i) {
    const int fd = ConnectToLoopbackFrom("127.0.0.2", gateway_->webhook_port());
    ASSERT_GE(fd, 0);
    if (i < 256) {
      held.push_back(fd);
      continue;
    }
    std::string answer;
    // Shed at once: 503, then the close, without the client sending anything.
    if (PeerCloses(fd, kDeadline, &answer) && StatusOf(answer) == 503) ++shed;
    ::close(fd);
  }
  EXPECT_EQ(shed, 2000 - 256);
  ExpectLegitimateDeliveryGoesThrough("256 connections held by one address");
  ExpectGrowthBelow(peak.Stop(), 16 * kMiB, "2,000 connections from one address");
  EXPECT_EQ(gateway_->Metric(
                R"(inspection_webhook_http_refusals_total{reason="max_connections_per_client"})"),
            2000 - 256);
  for (int fd : held) ::close(fd);
  ExpectEveryLegitimateDeliveryStored();
}

TEST_F(HostileIngressTest, SlowlorisHeadsAreCutAtTheHeadTimeout) {
  Start({"--webhook-head-timeout-ms=2000"});
  RssPeak peak(gateway_->process());
  constexpr int kSlow = 200;
  std::vector<int> slow;
  for (int i = 0; i < kSlow; ++i) {
    slow.push_back(ConnectToLoopbackFrom("127.0.0.2", gateway_->webhook_port()));
    ASSERT_GE(slow.back(), 0);
  }
  // One byte every 100 ms on each: every read is prompt, the head never completes.
  const std::string head = "POST /webhooks/v2 HTTP/1.1\r\nX-Slow: " + std::string(1000, 'a');
  const auto start = Clock::now();
  std::vector<bool> closed(kSlow, false);
  int open = kSlow;
  bool delivered = false;
  for (size_t byte = 0; byte < head.size() && open > 0; ++byte) {
    for (int i = 0; i < kSlow; ++i) {
      if (!closed[i] &&
          (!SendAll(slow[i], std::string(1, head[byte])) || PeerCloses(slow[i], milliseconds(0)))) {
        closed[i] = true;
        --open;
      }
    }
    if (!delivered && Clock::now() - start > milliseconds(1000)) {
      ExpectLegitimateDeliveryGoesThrough("200 slowloris heads");
      delivered = true;
    }
    std::this_thread::sleep_for(milliseconds(100));  // the attack's pace, not a wait
  }
  EXPECT_EQ(open, 0) << "slow heads still open after " << head.size() << " bytes";
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(10));
  EXPECT_TRUE(delivered);
  ExpectGrowthBelow(peak.Stop(), 16 * kMiB, "200 slowloris heads");
  EXPECT_EQ(gateway_->Metric(R"(inspection_webhook_http_refusals_total{reason="head_timeout"})"),
            kSlow);
  for (int fd : slow) ::close(fd);
  ExpectEveryLegitimateDeliveryStored();
}

TEST_F(HostileIngressTest, SlowlorisBodiesGet408AtTheMinimumRate) {
  Start({"--webhook-body-grace-ms=500"});  // and 1,024 B/s, the default
  RssPeak peak(gateway_->process());
  constexpr int kSlow = 100;
  std::vector<int> slow;
  for (int i = 0; i < kSlow; ++i) {
    const int fd = ConnectToLoopbackFrom("127.0.0.2", gateway_->webhook_port());
    ASSERT_GE(fd, 0);
    // Correctly keyed: a body is only ever read after the key check.
    SendAll(fd, absl::StrCat("POST /webhooks/v2 HTTP/1.1\r\nx-api-key: ", kWebhookKey,
                             "\r\nContent-Length: 100000\r\n\r\n"));
    slow.push_back(fd);
  }
  std::vector<std::string> answers(kSlow);
  std::vector<bool> closed(kSlow, false);
  int open = kSlow;
  const auto start = Clock::now();
  bool delivered = false;
  // 10 bytes every 100 ms: 100 B/s.
  while (open > 0 && Clock::now() - start < std::chrono::seconds(20)) {
    for (int i = 0; i < kSlow; ++i) {
      if (closed[i]) continue;
      SendAll(slow[i], std::string(10, '['));
      if (PeerCloses(slow[i], milliseconds(0), &answers[i])) {
        closed[i] = true;
        --open;
      }
    }
    if (!delivered && Clock::now() - start > milliseconds(300)) {
      ExpectLegitimateDeliveryGoesThrough("100 slowloris bodies");
      delivered = true;
    }
    std::this_thread::sleep_for(milliseconds(100));  // the attack's pace
  }
  EXPECT_EQ(open, 0);
  for (int i = 0; i < kSlow; ++i) EXPECT_EQ(StatusOf(answers[i]), 408) << answers[i];
  ExpectGrowthBelow(peak.Stop(), 16 * kMiB, "100 slowloris bodies");
  EXPECT_EQ(gateway_->Metric(R"(inspection_webhook_http_refusals_total{reason="body_timeout"})"),
            kSlow);
  for (int fd : slow) ::close(fd);
  ExpectEveryLegitimateDeliveryStored();
}

TEST_F(HostileIngressTest, KeptAliveHogsMakeRoomForTheVendor) {
  Start({"--webhook-max-connections=300"});
  RssPeak peak(gateway_->process());
  // 299 connections that each made a request (405: GET) and now idle, kept alive; one
  // more that sent nothing. The port is full.
  std::vector<int> hogs;
  for (int i = 0; i < 299; ++i) {
    const int fd = ConnectToLoopbackFrom(Attacker(i), gateway_->webhook_port());
    ASSERT_GE(fd, 0);
    SendAll(fd, "GET /webhooks/v2 HTTP/1.1\r\nHost: h\r\n\r\n");
    ASSERT_EQ(StatusOf(ReadUntil(fd, "}", kDeadline)), 405);
    hogs.push_back(fd);
  }
  hogs.push_back(ConnectToLoopbackFrom(Attacker(299), gateway_->webhook_port()));
  ASSERT_TRUE(WaitUntil([&] { return gateway_->Metric("inspection_webhook_connections") >= 300; },
                        kDeadline));
  ExpectLegitimateDeliveryGoesThrough("300 connections held, 299 of them idle kept-alive");
  // Room was made by closing one idle kept-alive connection; the silent one (never made a
  // request) is not idle in that sense and stays.
  EXPECT_EQ(
      gateway_->Metric(R"(inspection_webhook_http_refusals_total{reason="idle_closed_for_room"})"),
      1);
  int closed = 0;
  for (int fd : hogs) closed += PeerCloses(fd, milliseconds(0)) ? 1 : 0;
  EXPECT_EQ(closed, 1);
  EXPECT_FALSE(PeerCloses(hogs.back(), milliseconds(0)));
  // The delivery's connection has closed again: the next one is admitted without that.
  ExpectLegitimateDeliveryGoesThrough("the next one");
  ExpectGrowthBelow(peak.Stop(), 16 * kMiB, "300 kept-alive hogs");
  for (int fd : hogs) ::close(fd);
  ExpectEveryLegitimateDeliveryStored();
}

TEST_F(HostileIngressTest, AnUnterminated64MiBHeaderLineIs431) {
  Start();
  RssPeak peak(gateway_->process());
  std::string answer;
  std::thread attack([&] {
    answer = Flood(gateway_->webhook_port(), "127.0.0.2",
                   "POST /webhooks/v2 HTTP/1.1\r\nX-Long: ", std::string(64 * 1024, 'a'),
                   size_t{64} << 20);
  });
  ExpectLegitimateDeliveryGoesThrough("an endless header line");
  attack.join();
  EXPECT_EQ(StatusOf(answer), 431) << answer;
  ExpectGrowthBelow(peak.Stop(), 8 * kMiB, "a 64 MiB header line");
  ExpectEveryLegitimateDeliveryStored();
}

// 64 connections from one address each send a request line and then header lines of
// 16,000 bytes, one line per write a few ms apart, and never the blank line (issue 31,
// finding 5). Beast consumes each complete line as it arrives, so its own byte limit,
// which counts only what it holds unparsed, never saw more than one line: the lines piled
// up in each request's headers (47-100 MiB of RSS for 99 lines per connection) until the
// header count stopped them. The server counts the whole head now. Returns each
// connection's answer.
std::vector<std::string> TrickleHeaderLines(int port, const std::string& request_line) {
  std::vector<int> fds;
  for (int i = 0; i < 64; ++i) {
    const int fd = ConnectToLoopbackFrom("127.0.0.2", port);
    if (fd < 0) break;
    SendAll(fd, request_line + "\r\nX");
    fds.push_back(fd);
  }
  const std::string line = "-i: " + std::string(16000, 'a') + "\r\nX";
  std::vector<bool> answered(fds.size(), false);
  for (int round = 0; round < 99; ++round) {
    bool any = false;
    for (size_t i = 0; i < fds.size(); ++i) {
      // A connection that has an answer waiting is left alone, so that the answer is read
      // rather than lost to a reset.
      char byte;
      answered[i] = answered[i] || ::recv(fds[i], &byte, 1, MSG_PEEK | MSG_DONTWAIT) >= 0;
      if (answered[i] || !SendAll(fds[i], line)) {
        answered[i] = true;
        continue;
      }
      any = true;
    }
    if (!any) break;
    // The attack's own pacing (each line its own read on the server), not a wait.
    std::this_thread::sleep_for(milliseconds(2));
  }
  std::vector<std::string> answers;
  for (int fd : fds) {
    answers.push_back(ReadToEnd(fd, kDeadline));
    ::close(fd);
  }
  return answers;
}

TEST_F(HostileIngressTest, HeaderLinesTrickledInAre431AtTheHeadLimit) {
  Start();
  RssPeak peak(gateway_->process());
  std::vector<std::string> answers;
  std::thread attack([&] {
    answers = TrickleHeaderLines(gateway_->webhook_port(), "POST /webhooks/v2 HTTP/1.1");
  });
  ExpectLegitimateDeliveryGoesThrough("64 connections trickling header lines");
  attack.join();
  ASSERT_EQ(answers.size(), 64u);
  for (const std::string& answer : answers) EXPECT_EQ(StatusOf(answer), 431) << answer;
  EXPECT_EQ(gateway_->Metric(R"(inspection_webhook_http_refusals_total{reason="head_too_large"})"),
            64);
  ExpectGrowthBelow(peak.Stop(), 8 * kMiB, "64 connections trickling header lines");
  ExpectEveryLegitimateDeliveryStored();
}

TEST_F(HostileIngressTest, HeaderLinesTrickledInOnTheAdminPortAre431) {
  Start();
  RssPeak peak(gateway_->process());
  const std::vector<std::string> answers =
      TrickleHeaderLines(gateway_->admin_port(), "GET /metrics HTTP/1.1");
  ASSERT_EQ(answers.size(), 64u);
  for (const std::string& answer : answers) EXPECT_EQ(StatusOf(answer), 431) << answer;
  EXPECT_EQ(StatusOf(gateway_->Admin("/healthz")), 200);
  ExpectGrowthBelow(peak.Stop(), 8 * kMiB, "64 admin connections trickling header lines");
}

TEST_F(HostileIngressTest, AHundredThousandHeadersAre431) {
  Start();
  RssPeak peak(gateway_->process());
  std::string headers;
  for (int i = 0; i < 100000; ++i) absl::StrAppend(&headers, "X-", i, ": v\r\n");
  std::string answer;
  std::thread attack([&] {
    answer = Flood(gateway_->webhook_port(), "127.0.0.2", "POST /webhooks/v2 HTTP/1.1\r\n", headers,
                   headers.size());
  });
  ExpectLegitimateDeliveryGoesThrough("100,000 headers");
  attack.join();
  EXPECT_EQ(StatusOf(answer), 431) << answer;
  ExpectGrowthBelow(peak.Stop(), 8 * kMiB, "100,000 headers");
  ExpectEveryLegitimateDeliveryStored();
}

TEST_F(HostileIngressTest, AnHttp2PrefaceWithAHugeBodyIsRefusedUnread) {
  Start();
  RssPeak peak(gateway_->process());
  std::string answer;
  std::thread attack([&] {
    answer = Flood(gateway_->webhook_port(), "127.0.0.2", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
                   std::string(64 * 1024, 'x'), size_t{64} << 20);
  });
  ExpectLegitimateDeliveryGoesThrough("PRI with a huge body");
  attack.join();
  EXPECT_EQ(StatusOf(answer), 400) << answer;
  ExpectGrowthBelow(peak.Stop(), 8 * kMiB, "PRI with 64 MiB");
  ExpectEveryLegitimateDeliveryStored();
}

TEST_F(HostileIngressTest, AChunkExtensionFloodIs400) {
  Start();
  RssPeak peak(gateway_->process());
  std::string answer;
  std::thread attack([&] {
    answer = Flood(gateway_->webhook_port(), "127.0.0.2",
                   absl::StrCat("POST /webhooks/v2 HTTP/1.1\r\nx-api-key: ", kWebhookKey,
                                "\r\nTransfer-Encoding: chunked\r\n\r\n1;ext="),
                   std::string(64 * 1024, 'e'), size_t{64} << 20);
  });
  ExpectLegitimateDeliveryGoesThrough("a chunk extension flood");
  attack.join();
  EXPECT_EQ(StatusOf(answer), 400) << answer;
  ExpectGrowthBelow(peak.Stop(), 8 * kMiB, "a 64 MiB chunk extension");
  ExpectEveryLegitimateDeliveryStored();
}

TEST_F(HostileIngressTest, DeepJsonAfterAValidKeyIsRefusedWhileParsing) {
  Start();
  RssPeak peak(gateway_->process());
  const std::string body(8 * 1024 * 1024 - 1, '[');  // just under webhook.max_body_bytes
  std::string answer;
  std::thread attack([&] {
    answer = Flood(gateway_->webhook_port(), "127.0.0.2",
                   absl::StrCat("POST /webhooks/v2 HTTP/1.1\r\nx-api-key: ", kWebhookKey,
                                "\r\nContent-Length: ", body.size(), "\r\n\r\n"),
                   body, body.size());
  });
  ExpectLegitimateDeliveryGoesThrough("8 MiB of [[[[");
  attack.join();
  EXPECT_EQ(StatusOf(answer), 400) << answer;
  EXPECT_NE(answer.find("json_too_complex"), std::string::npos) << answer;
  // The body itself is held (8 MiB, twice while it is read); no DOM is built from it.
  ExpectGrowthBelow(peak.Stop(), 40 * kMiB, "8 MiB of nested arrays");
  EXPECT_EQ(gateway_->Metric(R"(inspection_webhook_deliveries_total{outcome="json_too_complex"})"),
            1);
  ExpectEveryLegitimateDeliveryStored();
}

TEST_F(HostileIngressTest, AConnectFloodLeavesDeliveriesAndReadinessAlone) {
  Start();
  RssPeak peak(gateway_->process());
  std::atomic<bool> stop{false};
  std::atomic<int> connects{0};
  std::thread flood([&] {
    // Connect and drop at once, as fast as one thread can, from 40 addresses.
    for (int i = 0; i < 20000 && !stop.load(); ++i) {
      const int fd = ConnectToLoopbackFrom(Attacker(i % 40), gateway_->webhook_port());
      if (fd >= 0) {
        ++connects;
        ::close(fd);
      }
    }
  });
  ASSERT_TRUE(WaitUntil([&] { return connects.load() >= 1000; }, kDeadline));
  for (int i = 0; i < 5; ++i) ExpectLegitimateDeliveryGoesThrough("a connect flood");
  EXPECT_EQ(StatusOf(gateway_->Admin("/readyz")), 200);
  stop = true;
  flood.join();
  ExpectGrowthBelow(peak.Stop(), 16 * kMiB, "a connect flood");
  EXPECT_EQ(gateway_->Metric("inspection_webhook_listener_accepting"), 1);
  ExpectEveryLegitimateDeliveryStored();
}

TEST_F(HostileIngressTest, SlowClientsOnTheAdminPortDoNotFailTheProbes) {
  Start();
  RssPeak peak(gateway_->process());
  // Every connection one address may hold, each stuck mid-head.
  std::vector<int> slow;
  for (int i = 0; i < 64; ++i) {
    const int fd = ConnectToLoopbackFrom("127.0.0.2", gateway_->admin_port());
    ASSERT_GE(fd, 0);
    SendAll(fd, "GET /metrics HTTP/1.1\r\nX-Slow: a");
    slow.push_back(fd);
  }
  // A POST announcing 1 GiB: refused at once, its body never read.
  const int post = ConnectToLoopbackFrom("127.0.0.3", gateway_->admin_port());
  SendAll(post, "POST /metrics HTTP/1.1\r\nContent-Length: 1073741824\r\n\r\n");
  std::string refused;
  EXPECT_TRUE(PeerCloses(post, kDeadline, &refused));
  EXPECT_EQ(StatusOf(refused), 405) << refused;
  ::close(post);
  // The probes and the scrape still answer at once.
  for (const char* path : {"/healthz", "/readyz", "/metrics"}) {
    const auto start = Clock::now();
    EXPECT_EQ(StatusOf(gateway_->Admin(path)), 200) << path;
    EXPECT_LT(Clock::now() - start, kLegitimateAnswerWithin) << path;
  }
  ExpectLegitimateDeliveryGoesThrough("64 slow admin clients");
  ExpectGrowthBelow(peak.Stop(), 8 * kMiB, "64 slow admin clients");
  for (int fd : slow) ::close(fd);
  ExpectEveryLegitimateDeliveryStored();
}

int OpenFiles(pid_t pid) {
  int count = 0;
  if (DIR* dir = ::opendir(absl::StrCat("/proc/", pid, "/fd").c_str())) {
    while (dirent* entry = ::readdir(dir)) {
      if (entry->d_name[0] != '.') ++count;
    }
    ::closedir(dir);
  }
  return count;
}

// Out of file descriptors, accept() fails (EMFILE). The listener must not give up: it
// retries with a backoff, and once files can be opened again it accepts as before.
TEST_F(HostileIngressTest, TheListenerOutlivesRunningOutOfFileDescriptors) {
  Start();
  const pid_t pid = gateway_->process().pid();
  // Accepting before. This scrape also runs every call the one below makes while the files
  // are out: under UBSan (make test-sanitize) the vptr check of a member call reads the
  // vtable through a pipe() when its small type cache misses, and with no descriptor left
  // that pipe() fails and the check reports an invalid vptr (seen on the vendor transport's
  // buffered-bytes gauge) and halts the gateway. Made once with files to spare, those
  // checks are cached.
  ASSERT_EQ(gateway_->Metric("inspection_webhook_listener_accepting"), 1);
  rlimit saved{};
  ASSERT_EQ(::prlimit(pid, RLIMIT_NOFILE, nullptr, &saved), 0);
  // An admin connection accepted before the files run out, to ask /readyz and /metrics
  // while they are out (a new one could not be accepted either).
  const int admin = ConnectToLoopback(gateway_->admin_port());
  ASSERT_GE(admin, 0);
  SendAll(admin, "GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n");  // accepted, kept alive
  ASSERT_EQ(StatusOf(ReadUntil(admin, "ok\n", kDeadline)), 200);
  const int open_before = OpenFiles(pid);
  ASSERT_GT(open_before, 0);
  rlimit tight = saved;
  tight.rlim_cur = static_cast<rlim_t>(open_before + 4);
  ASSERT_EQ(::prlimit(pid, RLIMIT_NOFILE, &tight, nullptr), 0);
  // The kernel completes every handshake (the backlog); the gateway can take only 4.
  std::vector<int> attackers;
  for (int i = 0; i < 20; ++i) {
    attackers.push_back(ConnectToLoopbackFrom(Attacker(i), gateway_->webhook_port()));
  }
  const bool saturated = WaitUntil([&] { return OpenFiles(pid) >= open_before + 4; }, kDeadline);
  // With 16 more connections waiting in the backlog, the accept() after the last file is
  // taken fails at once, and is retried meanwhile: not ready, and the metric says why.
  SendAll(admin,
          "GET /readyz HTTP/1.1\r\nHost: a\r\n\r\n"
          "GET /metrics HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
  const std::string during = ReadToEnd(admin, kDeadline);
  ::close(admin);
  ASSERT_EQ(::prlimit(pid, RLIMIT_NOFILE, &saved, nullptr), 0);
  EXPECT_TRUE(saturated);
  EXPECT_EQ(StatusOf(during), 503) << during.substr(0, 300);
  EXPECT_NE(during.find("webhook listener is not accepting"), std::string::npos);
  EXPECT_EQ(PrometheusSample(during, "inspection_webhook_listener_accepting"), 0);
  for (int fd : attackers) ::close(fd);
  // Accepting again (within the retry backoff, at most 1 s), and it says so.
  EXPECT_TRUE(WaitUntil(
      [&] { return gateway_->Metric("inspection_webhook_listener_accepting") == 1; }, kDeadline));
  EXPECT_GE(gateway_->Metric("inspection_webhook_accept_errors_total"), 1);
  EXPECT_EQ(StatusOf(gateway_->Admin("/readyz")), 200);
  ExpectLegitimateDeliveryGoesThrough("after running out of file descriptors");
  ExpectEveryLegitimateDeliveryStored();
}

}  // namespace
}  // namespace inspection::testing
