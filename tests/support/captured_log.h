#ifndef TESTS_SUPPORT_CAPTURED_LOG_H_
#define TESTS_SUPPORT_CAPTURED_LOG_H_

// Captures a logger's lines (by default the process logger, logging::DefaultLogger) while
// it lives, and finds them by `msg`. One at a time per logger.

#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gateway/logging/log.h"
#include "nlohmann/json.hpp"

namespace inspection::testing {

class CapturedLog {
 public:
  explicit CapturedLog(logging::Level level = logging::Level::kInfo,
                       logging::Logger& logger = logging::DefaultLogger())
      : logger_(logger) {
    logger_.SetLevel(level);
    logger_.SetSink([this](absl::string_view line) {
      absl::MutexLock lock(&mu_);
      lines_.emplace_back(line);
    });
  }
  ~CapturedLog() {
    logger_.SetSink(logging::Logger::StderrSink());
    logger_.SetLevel(logging::Level::kInfo);
  }
  CapturedLog(const CapturedLog&) = delete;
  CapturedLog& operator=(const CapturedLog&) = delete;

  // The lines whose "msg" is `msg`, parsed, in order.
  std::vector<nlohmann::json> With(const std::string& msg) {
    absl::MutexLock lock(&mu_);
    std::vector<nlohmann::json> out;
    for (const std::string& line : lines_) {
      nlohmann::json parsed = nlohmann::json::parse(line, nullptr, false);
      if (!parsed.is_discarded() && parsed.value("msg", "") == msg) out.push_back(parsed);
    }
    return out;
  }
  // Every line, concatenated (to look for what must not be there).
  std::string All() {
    absl::MutexLock lock(&mu_);
    std::string out;
    for (const std::string& line : lines_) out += line;
    return out;
  }

 private:
  logging::Logger& logger_;
  absl::Mutex mu_;
  std::vector<std::string> lines_;
};

}  // namespace inspection::testing

#endif  // TESTS_SUPPORT_CAPTURED_LOG_H_
