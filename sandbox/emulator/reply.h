#ifndef SANDBOX_EMULATOR_REPLY_H_
#define SANDBOX_EMULATOR_REPLY_H_

#include <string>
#include <utility>
#include <vector>

#include "adapters/vendor/request_validation.h"
#include "nlohmann/json.hpp"

namespace inspection::sandbox {

// One HTTP answer of the emulator before it is written: a status and a JSON body, plus
// extra headers. Plain data; the HTTP layer serialises it.
struct Reply {
  int status = 200;
  nlohmann::json body = nlohmann::json::object();
  std::vector<std::pair<std::string, std::string>> headers;
};

// Error bodies. The spec shows neither the vendor's error bodies nor its status codes
// ("Errors" 4.), so this shape is the sandbox's own choice, kept small and stable:
//   {"error": "<code>", "message": "<one sentence>"}
// and for rejected requests (400) also the broken rules, field paths in the vendor's JSON
// spelling:
//   {"error": "invalid_request", "message": "...",
//    "fields": [{"field": "customer.phone", "description": "..."}]}
inline Reply ErrorReply(int status, const std::string& code, const std::string& message) {
  Reply reply;
  reply.status = status;
  reply.body = {{"error", code}, {"message", message}};
  return reply;
}

inline Reply InvalidRequestReply(const validation::Violations& violations) {
  Reply reply = ErrorReply(400, "invalid_request",
                           violations.size() == 1
                               ? "The request breaks 1 rule of the API; see fields."
                               : "The request breaks " + std::to_string(violations.size()) +
                                     " rules of the API; see fields.");
  nlohmann::json fields = nlohmann::json::array();
  for (const auto& violation : violations) {
    fields.push_back({{"field", violation.field}, {"description", violation.description}});
  }
  reply.body["fields"] = std::move(fields);
  return reply;
}

inline Reply OkReply(nlohmann::json body) {
  Reply reply;
  reply.body = std::move(body);
  return reply;
}

}  // namespace inspection::sandbox

#endif  // SANDBOX_EMULATOR_REPLY_H_
