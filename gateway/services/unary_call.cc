#include "gateway/services/unary_call.h"

#include "gateway/services/idempotent_call.h"

#include <iterator>
#include <random>
#include <utility>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "adapters/eventlog/event_log.h"
#include "adapters/hashing/sha256.h"
#include "adapters/http/http_server.h"
#include "gateway/logging/log.h"
#include "gateway/security/peer_identity.h"

namespace inspection::services {

std::optional<std::string_view> SingleMetadata(const grpc::ServerContextBase& context,
                                               std::string_view key) {
  const auto& metadata = context.client_metadata();
  const auto [first, last] = metadata.equal_range(grpc::string_ref(key.data(), key.size()));
  if (first == last || std::next(first) != last) return std::nullopt;
  return std::string_view(first->second.data(), first->second.size());
}

std::optional<errors::ApiError> RefuseRepeatedMetadata(const grpc::ServerContextBase& context) {
  validation::Violations violations;
  for (std::string_view key : kSingleValuedMetadata) {
    const size_t count = context.client_metadata().count(grpc::string_ref(key.data(), key.size()));
    if (count > 1) {
      violations.push_back(
          {std::string(key), absl::StrCat("metadata sent ", count, " times; send it once")});
    }
  }
  if (violations.empty()) return std::nullopt;
  return errors::ApiError::InvalidRequest(std::move(violations));
}

std::string RequestIdFor(const grpc::CallbackServerContext& context) {
  const std::optional<std::string_view> sent = SingleMetadata(context, "x-request-id");
  if (sent.has_value() && !sent->empty() && sent->size() <= 64) {
    bool plain = true;
    for (char c : *sent) {
      plain = plain && (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' ||
                        c == '.' || c == ':');
    }
    if (plain) return std::string(*sent);
  }
  // 64 random bits as hex: unique enough to find one call in the logs.
  thread_local std::mt19937_64 rng{std::random_device{}()};
  static constexpr char kHex[] = "0123456789abcdef";
  uint64_t bits = rng();
  std::string id(16, '0');
  for (int i = 15; i >= 0; --i, bits >>= 4) id[i] = kHex[bits & 0xF];
  return id;
}

std::string IdempotencyKeyFor(const grpc::CallbackServerContext& context,
                              const std::string& field_value) {
  if (!field_value.empty()) return field_value;
  return std::string(SingleMetadata(context, "idempotency-key").value_or(""));
}

std::string ScopedIdempotencyKey(const std::string& caller_identity, const std::string& key) {
  if (key.empty()) return key;
  if (caller_identity.empty()) {
    const bool reserved = absl::StartsWith(key, "c:") || absl::StartsWith(key, "a:");
    return reserved ? absl::StrCat("a:", key) : key;
  }
  return absl::StrCat("c:", hashing::Sha256Hex(caller_identity).substr(0, 16), ":", key);
}

std::string RequestFingerprint(const google::protobuf::Message& request) {
  std::unique_ptr<google::protobuf::Message> copy(request.New());
  copy->CopyFrom(request);
  // The key itself is not a parameter of the operation.
  if (const auto* field = copy->GetDescriptor()->FindFieldByName("idempotency_key")) {
    copy->GetReflection()->ClearField(copy.get(), field);
  }
  std::string bytes;
  google::protobuf::io::StringOutputStream stream(&bytes);
  google::protobuf::io::CodedOutputStream coded(&stream);
  coded.SetSerializationDeterministic(true);
  copy->SerializeToCodedStream(&coded);
  coded.Trim();
  return hashing::Sha256Hex(bytes);
}

bool VendorNotReached(const errors::ApiError& error) {
  return !error.failure.MayHaveReachedVendor();
}

std::string CallerIdentity(const grpc::ServerContextBase& context) {
  return security::CallerIdentityOf(security::PeerOf(context.auth_context().get()));
}

namespace {

std::optional<errors::ApiError> Authorize(const grpc::CallbackServerContext& context,
                                          const AdmissionDeps& deps, std::string_view grpc_method) {
  if (deps.authz == nullptr) return std::nullopt;
  security::AuthzRequest request;
  request.path = std::string(grpc_method);
  request.peer = security::PeerOf(context.auth_context().get());
  // By key, and for one key in arrival order (a multimap keeps equal keys in insertion
  // order): the order gRPC joins repeated values in.
  for (const auto& [key, value] : context.client_metadata()) {
    request.headers.emplace_back(std::string(key.data(), key.size()),
                                 std::string(value.data(), value.size()));
  }
  const security::AuthzDecision decision = deps.authz->Evaluate(request);
  if (decision.allowed) return std::nullopt;
  if (deps.on_denied) deps.on_denied(grpc_method);
  errors::ApiError error;
  error.code = absl::StatusCode::kPermissionDenied;
  error.reason = std::string(errors::kReasonPermissionDeniedByPolicy);
  error.message =
      absl::StrCat("the authorization policy does not let this caller make this call (",
                   std::string(grpc_method), ", its metadata such as x-vendor-account)");
  if (!decision.rule.empty()) error.metadata["deny_rule"] = decision.rule;
  return error;
}

}  // namespace

std::string CallerKeyOf(const std::string& identity, const std::string& peer) {
  if (!identity.empty()) return identity;
  absl::string_view address = peer;
  if (absl::ConsumePrefix(&address, "ipv4:") || absl::ConsumePrefix(&address, "ipv6:")) {
    address = address.substr(0, address.rfind(':'));  // the port
    if (!absl::ConsumePrefix(&address, "[")) absl::ConsumePrefix(&address, "%5B");
    if (!absl::ConsumeSuffix(&address, "]")) absl::ConsumeSuffix(&address, "%5D");
  }
  return absl::StrCat("peer:", http::ClientKey(std::string(address)));
}

std::string CallerKey(const grpc::CallbackServerContext& context) {
  return CallerKeyOf(CallerIdentity(context), context.peer());
}

namespace {

std::optional<errors::ApiError> Throttle(const grpc::CallbackServerContext& context,
                                         const AdmissionDeps& deps) {
  if (deps.limiter == nullptr) return std::nullopt;
  absl::Duration wait;
  if (deps.limiter->TryCall(CallerKey(context), &wait)) return std::nullopt;
  errors::ApiError error;
  error.code = absl::StatusCode::kResourceExhausted;
  error.reason = std::string(errors::kReasonCallerRateLimited);
  error.message =
      "this caller is over its rate of calls (grpc.per_caller.requests_per_second); retry later";
  error.retry_delay =
      std::chrono::milliseconds(std::max<int64_t>(1, absl::ToInt64Milliseconds(wait) + 1));
  return error;
}

std::optional<errors::ApiError> OpenStreamSlot(const grpc::CallbackServerContext& context,
                                               const AdmissionDeps& deps,
                                               std::shared_ptr<void>* slot) {
  std::shared_ptr<void> capped;
  if (deps.stream_slots != nullptr) {
    streaming::StreamSlots::Refusal refusal = streaming::StreamSlots::Refusal::kNone;
    capped = deps.stream_slots->TryOpen(context.peer(), &refusal);
    if (capped == nullptr) {
      errors::ApiError error;
      error.code = absl::StatusCode::kResourceExhausted;
      error.retry_delay = std::chrono::milliseconds(1000);
      if (refusal == streaming::StreamSlots::Refusal::kTotal) {
        error.reason = std::string(errors::kReasonStreamLimit);
        error.message = absl::StrCat(
            "this gateway replica holds as many streams as it may (streams.max_total = ",
            deps.stream_slots->options().max_total, "); retry later or on another replica");
      } else {
        error.reason = std::string(errors::kReasonConnectionStreamLimit);
        error.message = absl::StrCat(
            "this connection holds as many streams as it may (streams.max_per_connection = ",
            deps.stream_slots->options().max_per_connection,
            "); close one, or open streams on another channel");
      }
      return error;
    }
  }
  if (deps.limiter == nullptr) {
    *slot = std::move(capped);
    return std::nullopt;
  }
  std::shared_ptr<void> caller_slot = deps.limiter->TryOpenStream(CallerKey(context));
  if (caller_slot != nullptr) {
    // One guard for both: the stream holds them until it is done.
    *slot = std::make_shared<std::pair<std::shared_ptr<void>, std::shared_ptr<void>>>(
        std::move(capped), std::move(caller_slot));
    return std::nullopt;
  }
  errors::ApiError error;
  error.code = absl::StatusCode::kResourceExhausted;
  error.reason = std::string(errors::kReasonCallerStreamLimit);
  // A hint, not a promise: a slot frees when one of the caller's streams ends.
  error.retry_delay = std::chrono::milliseconds(1000);
  error.message =
      "this caller holds as many streams as it may (grpc.per_caller.max_streams); close one "
      "first";
  return error;
}

}  // namespace

namespace {

// A refused call is outside input: its line is rate-limited (ServiceDeps::rejected_lines).
void LogRefused(const grpc::CallbackServerContext& context, const AdmissionDeps& deps,
                std::string_view grpc_method, const errors::ApiError& error,
                const tracing::TraceContext* trace) {
  uint64_t suppressed = 0;
  if (deps.rejected_lines == nullptr || !deps.rejected_lines->Admit(&suppressed)) return;
  const std::string trace_id =
      trace != nullptr ? trace->TraceIdHex() : TraceFor(context).TraceIdHex();
  const auto rule = error.metadata.find("deny_rule");
  logging::Warn("call refused", {{"method", std::string(grpc_method)},
                                 {"reason", error.reason},
                                 {"grpc_code", static_cast<int>(error.code)},
                                 {"peer", context.peer()},
                                 {"caller", CallerIdentity(context)},
                                 {"deny_rule", rule == error.metadata.end() ? "" : rule->second},
                                 {"trace_id", trace_id},
                                 {"suppressed", suppressed}});
}

}  // namespace

std::optional<errors::ApiError> AdmitCall(const grpc::CallbackServerContext& context,
                                          const AdmissionDeps& deps, std::string_view grpc_method,
                                          const tracing::TraceContext* trace) {
  // Repeated metadata first: no later than the policy, so such a call never reaches the
  // vendor whatever the policy says.
  std::optional<errors::ApiError> refused = RefuseRepeatedMetadata(context);
  if (!refused.has_value()) refused = Authorize(context, deps, grpc_method);
  if (!refused.has_value()) refused = Throttle(context, deps);
  if (refused.has_value()) LogRefused(context, deps, grpc_method, *refused, trace);
  return refused;
}

std::optional<errors::ApiError> RefuseLargeStreamRequest(const AdmissionDeps& deps,
                                                         size_t held_bytes) {
  if (deps.stream_slots == nullptr) return std::nullopt;
  const size_t limit = deps.stream_slots->options().max_request_bytes;
  if (held_bytes <= limit) return std::nullopt;
  return errors::ApiError::InvalidRequest(
      {{"", absl::StrCat("a stream's request may hold at most ", limit,
                         " bytes (streams.max_request_bytes; StreamDamageResults: beyond its "
                         "URLs), gRPC keeps it while the stream is open; this one holds ",
                         held_bytes)}});
}

std::optional<errors::ApiError> AdmitStream(const grpc::CallbackServerContext& context,
                                            const AdmissionDeps& deps, std::string_view grpc_method,
                                            size_t request_bytes, std::shared_ptr<void>* slot) {
  if (auto denied = AdmitCall(context, deps, grpc_method); denied.has_value()) return denied;
  std::optional<errors::ApiError> refused = RefuseLargeStreamRequest(deps, request_bytes);
  if (!refused.has_value()) refused = OpenStreamSlot(context, deps, slot);
  if (refused.has_value()) LogRefused(context, deps, grpc_method, *refused, nullptr);
  return refused;
}

std::optional<errors::ApiError> AdmitHealthCheck(const grpc::CallbackServerContext& context,
                                                 const AdmissionDeps& deps,
                                                 std::string_view grpc_method,
                                                 std::shared_ptr<void>* slot,
                                                 size_t request_bytes) {
  std::optional<errors::ApiError> refused = Authorize(context, deps, grpc_method);
  if (!refused.has_value() && slot != nullptr) {
    refused = RefuseLargeStreamRequest(deps, request_bytes);
  }
  if (!refused.has_value() && slot != nullptr) refused = OpenStreamSlot(context, deps, slot);
  if (refused.has_value()) LogRefused(context, deps, grpc_method, *refused, nullptr);
  return refused;
}

std::string AuditResource(const google::protobuf::Message& request) {
  const google::protobuf::Descriptor* descriptor = request.GetDescriptor();
  const google::protobuf::Reflection* reflection = request.GetReflection();
  std::string out;
  auto append = [&out](absl::string_view name, absl::string_view value) {
    absl::StrAppend(&out, out.empty() ? "" : ", ", name, "=", value.substr(0, 256));
  };
  for (const char* name :
       {"inspection_id", "uid", "webhook_url_v2", "event_name", "event_name_raw", "urls"}) {
    const google::protobuf::FieldDescriptor* field = descriptor->FindFieldByName(name);
    if (field == nullptr) continue;
    if (field->is_repeated()) {
      const int count = reflection->FieldSize(request, field);
      if (count > 0) append(name, absl::StrCat(count));
    } else if (field->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_ENUM) {
      const int value = reflection->GetEnumValue(request, field);
      if (value != 0) append(name, reflection->GetEnum(request, field)->name());
    } else if (field->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_STRING) {
      const std::string value = reflection->GetString(request, field);
      if (!value.empty()) append(name, value);
    }
  }
  return out;
}

tracing::TraceContext TraceFor(const grpc::ServerContextBase& context) {
  const auto& metadata = context.client_metadata();
  std::optional<std::string_view> traceparent;
  std::optional<std::string_view> tracestate;
  // More than one traceparent is invalid (a new trace); several tracestate values are one
  // list, but a caller that splits it is rare enough to drop: only a single one is kept.
  if (metadata.count("traceparent") == 1) {
    const auto it = metadata.find("traceparent");
    traceparent = std::string_view(it->second.data(), it->second.size());
  }
  if (metadata.count("tracestate") == 1) {
    const auto it = metadata.find("tracestate");
    tracestate = std::string_view(it->second.data(), it->second.size());
  }
  return tracing::TraceContext::FromHeaders(traceparent, tracestate);
}

namespace {

uint64_t UnixNanos(std::chrono::system_clock::time_point t) {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count());
}

// The gateway's span of one call: a server span for an RPC, an internal one for the
// gateway's own work (origin other than "rpc"/"stream").
tracing::Span ServerSpan(const RpcRecord& record) {
  tracing::Span span;
  span.trace_id = record.trace.trace_id;
  span.span_id = record.trace.span_id;
  span.parent_span_id = record.trace.parent_span_id;
  span.tracestate = record.trace.tracestate;
  const bool rpc = record.origin == "rpc" || record.origin == "stream";
  std::string method = record.route != nullptr ? record.route->grpc_method : "";
  if (!method.empty() && method.front() == '/') method.erase(0, 1);
  span.name = rpc ? method
                  : absl::StrCat(absl::string_view(record.origin.data(), record.origin.size()), " ",
                                 method);
  span.kind = rpc ? tracing::SpanKind::kServer : tracing::SpanKind::kInternal;
  span.start_unix_nano = UnixNanos(record.started_at);
  span.end_unix_nano = span.start_unix_nano + static_cast<uint64_t>(record.duration.count()) * 1000;
  span.status = record.code == grpc::StatusCode::OK ? tracing::SpanStatus::kUnset
                                                    : tracing::SpanStatus::kError;
  span.status_message = record.reason;
  const size_t slash = method.find('/');
  span.attributes = {
      {"rpc.system", std::string("grpc")},
      {"rpc.service", method.substr(0, slash)},
      {"rpc.method", slash == std::string::npos ? std::string() : method.substr(slash + 1)},
      {"rpc.grpc.status_code", static_cast<int64_t>(record.code)},
      {"inspection.origin", std::string(record.origin)},
      {"inspection.account", record.account.empty() ? std::string("default") : record.account},
      {"inspection.request_id", record.request_id},
      {"inspection.attempts", static_cast<int64_t>(record.attempts)},
  };
  if (record.cache != upstream::CacheStatus::kNotCached) {
    span.attributes.emplace_back("inspection.cache",
                                 std::string(upstream::CacheStatusName(record.cache)));
  }
  if (!record.reason.empty()) span.attributes.emplace_back("inspection.reason", record.reason);
  if (!record.caller.empty()) span.attributes.emplace_back("inspection.caller", record.caller);
  return span;
}

}  // namespace

void NotifyFinished(const CallDeps& deps, RpcRecord& record,
                    std::chrono::steady_clock::time_point start) {
  record.duration = std::chrono::duration_cast<std::chrono::microseconds>(
      std::chrono::steady_clock::now() - start);
  if (deps.spans != nullptr && record.trace.sampled() && !tracing::IsZero(record.trace.span_id)) {
    deps.spans->Record(ServerSpan(record));
  }
  if (deps.observer != nullptr) deps.observer->OnRpcFinished(record);
}

std::optional<errors::ApiError> CallOptionsFor(const grpc::CallbackServerContext& context,
                                               const AdmissionDeps& deps, std::string request_id,
                                               upstream::CallOptions* out) {
  out->request_id = std::move(request_id);
  // AdmitCall refused these already; a caller that did not ask it still never gets the
  // default account for "default, preprod".
  if (auto refused = RefuseRepeatedMetadata(context); refused.has_value()) return refused;
  if (auto sent = SingleMetadata(context, "x-vendor-account"); sent.has_value()) {
    std::string account(*sent);
    if (account == kDefaultAccountName) account.clear();
    if (!account.empty() && deps.vendor_accounts.count(account) == 0) {
      return errors::ApiError::UnknownVendorAccount();
    }
    out->account = std::move(account);
  }
  // cache-control is a list: sent as one value or several, any no-cache/no-store counts.
  const auto [first, last] = context.client_metadata().equal_range("cache-control");
  for (auto it = first; it != last; ++it) {
    const std::string_view value(it->second.data(), it->second.size());
    if (value.find("no-cache") != std::string_view::npos ||
        value.find("no-store") != std::string_view::npos) {
      out->bypass_cache = true;
    }
  }
  return std::nullopt;
}

void AddCacheMetadata(ResponseMetadata* metadata, upstream::CacheStatus cache,
                      const std::string& stale_cause) {
  if (cache == upstream::CacheStatus::kNotCached) return;
  metadata->emplace_back("x-cache", std::string(upstream::CacheStatusName(cache)));
  if (cache == upstream::CacheStatus::kStale) {
    metadata->emplace_back("x-cache-stale-cause", stale_cause);
  }
}

void FinishUnary(grpc::CallbackServerContext* context, grpc::ServerUnaryReactor* reactor,
                 const grpc::Status& status, const ResponseMetadata& metadata) {
  for (const auto& [key, value] : metadata) {
    if (status.ok()) {
      context->AddInitialMetadata(key, value);
    } else {
      context->AddTrailingMetadata(key, value);
    }
  }
  reactor->Finish(status);
}

void RefuseUnary(grpc::CallbackServerContext* context, grpc::ServerUnaryReactor* reactor,
                 const CallDeps& deps, RpcRecord& record,
                 std::chrono::steady_clock::time_point start, const errors::ApiError& error,
                 const ResponseMetadata& metadata) {
  record.code = static_cast<grpc::StatusCode>(error.code);
  record.reason = error.reason;
  NotifyFinished(deps, record, start);
  FinishUnary(context, reactor, error.ToGrpcStatus(), metadata);
}

std::optional<errors::ApiError> CheckIdempotencyKey(const std::string& key) {
  if (key.empty() || pipeline::ValidIdempotencyKey(key)) return std::nullopt;
  return errors::ApiError::InvalidRequest(
      {{"idempotency_key",
        absl::StrCat("an idempotency key (field idempotency_key or metadata idempotency-key) "
                     "is 1 to ",
                     pipeline::kMaxIdempotencyKeyLength,
                     " visible ASCII characters (no spaces or control characters); this one has ",
                     key.size(), " characters or others.")}});
}

}  // namespace inspection::services

namespace inspection::services {

void CallVendor(const CallDeps& deps, const Endpoint& endpoint,
                std::shared_ptr<const google::protobuf::Message> request,
                google::protobuf::Message* response, std::chrono::system_clock::time_point deadline,
                upstream::CallOptions call, std::string idempotency_key, RpcRecord record,
                std::chrono::steady_clock::time_point start,
                absl::AnyInvocable<void(CallOutcome) &&> done) {
  record.route = &routes::GetRoute(endpoint.route);
  const std::string account = call.account;
  // Every vendor call belongs to a trace: the RPC's, or one started for the gateway's own
  // work (stream submissions, token polls, reconciliation, start-up registration).
  if (!call.trace.has_value()) {
    if (tracing::IsZero(record.trace.span_id)) {
      record.trace = tracing::TraceContext::NewRoot();
    }
    call.trace = record.trace;
  }
  vendor::VendorRequest vendor_request = endpoint.encode(*request);
  deps.vendor->Call(
      endpoint.route, vendor_request, deadline, call,
      [&deps, &endpoint, request, response, idempotency_key = std::move(idempotency_key), account,
       record = std::move(record), start,
       done = std::move(done)](upstream::VendorResult result) mutable {
        record.http_status = result.response.status;
        record.attempts = result.attempts;
        record.cache = result.cache;
        CallOutcome out;
        out.cache = result.cache;
        out.stale_cause = result.stale_cause;
        if (!result.ok()) {
          out.error = errors::OutcomeOf(*record.route, *result.error);
        } else if (absl::Status decoded = endpoint.decode(result.json_body(), *request, response,
                                                          &record.decode_report);
                   !decoded.ok()) {
          out.error = errors::OutcomeOf(*record.route, errors::ApiError::FromBadVendorBody(
                                                           *record.route, result.response,
                                                           errors::kReasonVendorUnexpectedResponse,
                                                           std::string(decoded.message())));
        }
        if (out.error.has_value()) {
          response->Clear();  // never a half-filled message
          record.reason = out.error->reason;
          record.code = static_cast<grpc::StatusCode>(out.error->code);
        } else {
          record.code = grpc::StatusCode::OK;
        }
        NotifyFinished(deps, record, start);
        if (out.ok() && endpoint.on_success) endpoint.on_success(*response, account);
        if (idempotency_key.empty() || deps.idempotency == nullptr) {
          std::move(done)(std::move(out));  // the common case: no continuation to build
          return;
        }
        // The answer waits for the idempotency outcome to be saved: what a caller is
        // given is what a repeat replays.
        const bool vendor_not_reached = !result.ok() && VendorNotReached(*result.error);
        const std::optional<errors::ApiError> error = out.error;
        CompleteKeyedCall(deps, account, idempotency_key, error, *response, vendor_not_reached,
                          [done = std::move(done), out = std::move(out)]() mutable {
                            std::move(done)(std::move(out));
                          });
      });
}

}  // namespace inspection::services
