#include "gateway/logging/log.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/civil_time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace inspection::logging {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using json = nlohmann::json;

// A logger writing into `lines`, with the clock fixed at 2024-01-02T03:04:05.678Z.
class LogTest : public ::testing::Test {
 protected:
  LogTest()
      : logger_([this](absl::string_view line) { lines_.emplace_back(line); },
                [] {
                  return absl::FromCivil(absl::CivilSecond(2024, 1, 2, 3, 4, 5),
                                         absl::UTCTimeZone()) +
                         absl::Milliseconds(678);
                }) {}

  // The only line written, parsed; fails the test if it is not one JSON object per line.
  json OnlyLine() {
    EXPECT_EQ(lines_.size(), 1u);
    if (lines_.empty()) return json();
    const std::string& line = lines_.back();
    EXPECT_FALSE(line.empty());
    EXPECT_EQ(line.back(), '\n');
    EXPECT_EQ(line.find('\n'), line.size() - 1) << "one object per line";
    json parsed = json::parse(line, nullptr, /*allow_exceptions=*/false);
    EXPECT_TRUE(parsed.is_object()) << line;
    return parsed;
  }

  std::vector<std::string> lines_;
  Logger logger_;
};

TEST_F(LogTest, LineIsJsonWithTimestampLevelMessageAndTypedFields) {
  const std::string request_id = "req-42";
  logger_.Log(Level::kInfo, "rpc finished",
              {{"rpc", "CreateToken"},
               {"grpc_code", 0},
               {"request_id", request_id},
               {"latency_ms", 1.5},
               {"cached", true},
               {"bytes", std::uint64_t{18446744073709551615u}},
               {"delta", std::int64_t{-7}}});
  const json line = OnlyLine();
  EXPECT_EQ(line["ts"], "2024-01-02T03:04:05.678Z");
  EXPECT_EQ(line["level"], "info");
  EXPECT_EQ(line["msg"], "rpc finished");
  EXPECT_EQ(line["rpc"], "CreateToken");
  EXPECT_TRUE(line["grpc_code"].is_number_integer());
  EXPECT_EQ(line["grpc_code"], 0);
  EXPECT_EQ(line["request_id"], "req-42");
  EXPECT_EQ(line["latency_ms"], 1.5);
  EXPECT_EQ(line["cached"], true);
  EXPECT_EQ(line["bytes"].get<std::uint64_t>(), 18446744073709551615u);
  EXPECT_EQ(line["delta"], -7);
  EXPECT_EQ(lines_.back().rfind("{\"ts\":\"2024-01-02T03:04:05.678Z\",\"level\":\"info\",", 0), 0u)
      << lines_.back();
}

TEST_F(LogTest, LevelNamesInLines) {
  logger_.SetLevel(Level::kDebug);
  logger_.Debug("d");
  logger_.Info("i");
  logger_.Warn("w");
  logger_.Error("e");
  ASSERT_EQ(lines_.size(), 4u);
  const char* expected[] = {"debug", "info", "warn", "error"};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(json::parse(lines_[i])["level"], expected[i]);
  }
}

TEST_F(LogTest, LevelFilterDropsLowerLevels) {
  EXPECT_EQ(logger_.GetLevel(), Level::kInfo);
  logger_.Debug("dropped");
  logger_.Info("kept-info");
  ASSERT_EQ(lines_.size(), 1u);
  EXPECT_THAT(lines_[0], HasSubstr("kept-info"));

  logger_.SetLevel(Level::kWarn);
  EXPECT_FALSE(logger_.Enabled(Level::kInfo));
  EXPECT_TRUE(logger_.Enabled(Level::kError));
  logger_.Info("dropped");
  logger_.Warn("kept-warn");
  logger_.Error("kept-error");
  ASSERT_EQ(lines_.size(), 3u);
  EXPECT_THAT(lines_[1], HasSubstr("kept-warn"));
  EXPECT_THAT(lines_[2], HasSubstr("kept-error"));

  logger_.SetLevel(Level::kDebug);
  logger_.Debug("kept-debug");
  ASSERT_EQ(lines_.size(), 4u);
}

TEST_F(LogTest, ParseLevelRoundTrips) {
  for (Level level : {Level::kDebug, Level::kInfo, Level::kWarn, Level::kError}) {
    EXPECT_EQ(ParseLevel(LevelName(level)), level);
  }
  EXPECT_EQ(ParseLevel("INFO"), std::nullopt);
  EXPECT_EQ(ParseLevel("warning"), std::nullopt);
}

TEST_F(LogTest, RegisteredSecretsAreRedactedFromMessageAndFields) {
  const std::string secret = "sk_live_abcdef123456";
  logger_.RegisterSecret(secret);
  logger_.Info(
      "sending key " + secret + " to vendor",
      {{"header", "x-api-key: " + secret}, {"key_" + secret, "value"}, {"twice", secret + secret}});
  ASSERT_EQ(lines_.size(), 1u);
  EXPECT_THAT(lines_[0], Not(HasSubstr(secret)));
  const json line = OnlyLine();
  EXPECT_EQ(line["msg"], "sending key [redacted] to vendor");
  EXPECT_EQ(line["header"], "x-api-key: [redacted]");
  EXPECT_EQ(line["key_[redacted]"], "value");
  EXPECT_EQ(line["twice"], "[redacted][redacted]");
}

TEST_F(LogTest, NumericSecretIsRedactedFromNumberFields) {
  logger_.RegisterSecret("987654");
  logger_.Info("pin", {{"pin", 198765432}, {"ratio", 0.5}});
  ASSERT_EQ(lines_.size(), 1u);
  EXPECT_THAT(lines_[0], Not(HasSubstr("987654")));
  const json line = OnlyLine();
  EXPECT_EQ(line["pin"], "1[redacted]32");
  EXPECT_EQ(line["ratio"], 0.5);
}

TEST_F(LogTest, SecretWithJsonSpecialCharactersIsRedacted) {
  const std::string secret = "ab\"c\\d\n";
  logger_.RegisterSecret(secret);
  logger_.Info("x", {{"v", "pre" + secret + "post"}});
  const json line = OnlyLine();
  EXPECT_EQ(line["v"], "pre[redacted]post");
}

TEST_F(LogTest, LongerSecretContainingShorterOneIsRedactedWhole) {
  logger_.RegisterSecret("abcd");
  logger_.RegisterSecret("abcdefgh");
  logger_.Info("abcdefgh and abcd");
  EXPECT_EQ(OnlyLine()["msg"], "[redacted] and [redacted]");
}

TEST_F(LogTest, ShortAndEmptySecretsAreIgnored) {
  logger_.RegisterSecret("");
  logger_.RegisterSecret("abc");
  logger_.Info("abc stays");
  EXPECT_EQ(OnlyLine()["msg"], "abc stays");
}

TEST_F(LogTest, EscapesControlCharactersQuotesAndInvalidUtf8) {
  logger_.Info("line1\nline2\t\"quoted\" \\ \x01 caf\xC3\xA9 bad\xFF\xC3",
               {{"nul", std::string("a\0b", 3)}});
  const json line = OnlyLine();
  EXPECT_EQ(line["msg"],
            "line1\nline2\t\"quoted\" \\ \x01 caf\xC3\xA9 bad\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(line["nul"], std::string("a\0b", 3));
}

TEST_F(LogTest, ReservedFieldNamesDoNotClash) {
  logger_.Info("real", {{"msg", "fake"}, {"level", "fake"}, {"ts", "fake"}});
  const json line = OnlyLine();
  EXPECT_EQ(line["msg"], "real");
  EXPECT_EQ(line["level"], "info");
  EXPECT_EQ(line["_msg"], "fake");
  EXPECT_EQ(line["_level"], "fake");
  EXPECT_EQ(line["_ts"], "fake");
}

TEST_F(LogTest, NonFiniteDoubleIsNull) {
  logger_.Info("x", {{"nan", std::nan("")}, {"inf", std::numeric_limits<double>::infinity()}});
  const json line = OnlyLine();
  EXPECT_TRUE(line["nan"].is_null());
  EXPECT_TRUE(line["inf"].is_null());
}

TEST_F(LogTest, FieldsFromVector) {
  std::vector<Field> fields = {{"a", 1}, {"b", "two"}};
  logger_.Warn("v", fields);
  const json line = OnlyLine();
  EXPECT_EQ(line["a"], 1);
  EXPECT_EQ(line["b"], "two");
}

TEST(LoggerConcurrencyTest, ConcurrentLinesAreWrittenWholeOneSinkCallEach) {
  absl::Mutex mu;
  std::vector<std::string> lines;
  Logger logger([&](absl::string_view line) {
    absl::MutexLock lock(&mu);  // The logger serialises calls; this only guards `lines` reads.
    lines.emplace_back(line);
  });
  logger.RegisterSecret("topsecret");
  constexpr int kThreads = 8;
  constexpr int kLinesPerThread = 200;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&logger, t] {
      for (int i = 0; i < kLinesPerThread; ++i) {
        logger.Info("concurrent topsecret", {{"thread", t}, {"i", i}});
      }
    });
  }
  for (std::thread& thread : threads) thread.join();

  absl::MutexLock lock(&mu);
  ASSERT_EQ(lines.size(), static_cast<std::size_t>(kThreads * kLinesPerThread));
  std::vector<int> per_thread(kThreads, 0);
  for (const std::string& line : lines) {
    ASSERT_EQ(line.find('\n'), line.size() - 1);
    const json parsed = json::parse(line, nullptr, false);
    ASSERT_TRUE(parsed.is_object()) << line;
    EXPECT_EQ(parsed["msg"], "concurrent [redacted]");
    ++per_thread[parsed["thread"].get<int>()];
  }
  for (int count : per_thread) EXPECT_EQ(count, kLinesPerThread);
}

TEST(DefaultLoggerTest, FreeFunctionsUseTheDefaultLogger) {
  std::vector<std::string> lines;
  DefaultLogger().SetSink([&](absl::string_view line) { lines.emplace_back(line); });
  SetLevel(Level::kWarn);
  RegisterSecret("default-secret");
  Info("dropped");
  Warn("kept default-secret", {{"n", 1}});
  Log(Level::kError, "error");
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_THAT(lines[0], HasSubstr("\"msg\":\"kept [redacted]\""));
  EXPECT_THAT(lines[1], HasSubstr("\"level\":\"error\""));
  // Restore the process logger for any later test.
  DefaultLogger().SetSink(Logger::StderrSink());
  SetLevel(Level::kInfo);
}

}  // namespace
}  // namespace inspection::logging
