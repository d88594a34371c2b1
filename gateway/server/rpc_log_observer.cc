#include "gateway/server/rpc_log_observer.h"

#include <string>

namespace inspection::server {
namespace {

// Codes that point at the vendor or at us rather than at the caller's request.
bool IsServerSide(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::INTERNAL:
    case grpc::StatusCode::UNKNOWN:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
    case grpc::StatusCode::UNAUTHENTICATED:  // our API key, not the caller's
    case grpc::StatusCode::PERMISSION_DENIED:
      return true;
    default:
      return false;
  }
}

std::string JoinPaths(const std::vector<std::string>& paths) {
  std::string out;
  for (size_t i = 0; i < paths.size() && i < 20; ++i) {
    if (i > 0) out += ",";
    out += paths[i];
  }
  return out;
}

}  // namespace

void RpcLogObserver::OnRpcFinished(const services::RpcRecord& record) {
  const std::string route(record.route != nullptr ? record.route->metric_label : "");
  // WatchTokenStatus polls every few seconds per token: their successes are debug lines.
  const logging::Level level = IsServerSide(record.code)        ? logging::Level::kWarn
                               : record.origin == "token_watch" ? logging::Level::kDebug
                                                                : logging::Level::kInfo;
  if (logger_.Enabled(level)) {
    logger_.Log(level, "rpc finished",
                {{"request_id", record.request_id},
                 {"origin", std::string(record.origin)},
                 {"method", record.route != nullptr ? record.route->grpc_method : ""},
                 {"route", route},
                 {"peer", record.peer},
                 {"caller", record.caller},
                 {"account", record.account.empty() ? "default" : record.account},
                 {"grpc_code", static_cast<int>(record.code)},
                 {"reason", record.reason},
                 {"http_status", static_cast<int64_t>(record.http_status)},
                 {"attempts", record.attempts},
                 {"cache", std::string(upstream::CacheStatusName(record.cache))},
                 {"duration_ms", static_cast<double>(record.duration.count()) / 1000.0},
                 {"trace_id", record.trace.TraceIdHex()},
                 {"span_id", record.trace.SpanIdHex()}});
  }
  if (record.route != nullptr && record.route->audited) {
    // Always written, whatever log.level: who did what to which resource, and how it ended.
    logger_.Log(logging::Level::kAudit, "audit",
                {{"request_id", record.request_id},
                 {"caller", record.caller.empty() ? "(no client certificate)" : record.caller},
                 {"rpc", std::string(record.route->grpc_method)},
                 {"account", record.account.empty() ? "default" : record.account},
                 {"resource", record.resource},
                 {"grpc_code", static_cast<int>(record.code)},
                 {"idempotency_replayed", record.idempotency_replayed},
                 {"trace_id", record.trace.TraceIdHex()}});
  }
  const auto& report = record.decode_report;
  if (!report.unknown_paths.empty() || !report.type_mismatch_paths.empty() ||
      !report.unknown_enum_paths.empty()) {
    logger_.Warn("vendor response has fields this gateway does not model (kept in unknown_fields)",
                 {{"request_id", record.request_id},
                  {"route", route},
                  {"trace_id", record.trace.TraceIdHex()},
                  {"unknown_fields", JoinPaths(report.unknown_paths)},
                  {"type_mismatches", JoinPaths(report.type_mismatch_paths)},
                  {"unknown_enum_values", JoinPaths(report.unknown_enum_paths)}});
  }
}

}  // namespace inspection::server
