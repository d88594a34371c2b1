#ifndef GATEWAY_SERVICES_UNARY_CALL_H_
#define GATEWAY_SERVICES_UNARY_CALL_H_

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "adapters/vendor/json_codec.h"
#include "adapters/vendor/request_validation.h"
#include "adapters/vendor/vendor_request.h"
#include "gateway/errors/api_error.h"
#include "gateway/idempotency/idempotency_store.h"
#include "gateway/logging/line_rate_limiter.h"
#include "gateway/routes/route_table.h"
#include "gateway/security/authz_policy.h"
#include "gateway/security/caller_limits.h"
#include "gateway/streaming/event_hub.h"
#include "gateway/streaming/stream_slots.h"
#include "gateway/token_watch/token_status_poller.h"
#include "gateway/tracing/span.h"
#include "gateway/tracing/trace_context.h"
#include "gateway/upstream/vendor_client.h"

namespace inspection::services {

// `x-vendor-account: default` names the default account (as does no such metadata), for
// callers that always send the header; no configured account may take this name.
inline constexpr char kDefaultAccountName[] = "default";

// A server stream that ends at once with `status` (a call refused before it started).
template <class Response>
class FailedStream final : public grpc::ServerWriteReactor<Response> {
 public:
  explicit FailedStream(grpc::Status status) { this->Finish(std::move(status)); }
  void OnDone() override { delete this; }
};

// One finished vendor call or RPC, for the log line and metrics (RpcObserver).
struct RpcRecord {
  // Who made the vendor call: "rpc" (a unary RPC), "stream" (StreamDamageResults'
  // submission), "token_watch" (a WatchTokenStatus poll), "startup" (webhook
  // registration).
  std::string_view origin = "rpc";
  const routes::Route* route = nullptr;
  std::string request_id;
  grpc::StatusCode code = grpc::StatusCode::OK;
  std::string reason;    // ErrorInfo.reason when failed
  long http_status = 0;  // 0 when the vendor was not reached
  std::chrono::microseconds duration{0};
  vendor::DecodeReport decode_report;
  bool idempotency_replayed = false;  // answered from an idempotency key's first outcome
  // Who called: the peer certificate's first URI SAN (the SPIFFE ID), else its first DNS
  // SAN, else its whole subject, never the bare common name (CallerIdentity); "" for a
  // caller without a certificate.
  std::string caller;
  // The vendor account the call asked for (metadata x-vendor-account, at most 64
  // characters; "" for the default account).
  std::string account;
  // For audited routes (writes): which resource, from the request's identifying fields
  // (AuditResource); never customer data.
  std::string resource;
  // The gRPC peer ("ipv4:127.0.0.1:50312"); "" for the gateway's own calls.
  std::string peer;
  // Vendor attempts (retries included); 0 when the vendor was not called.
  int attempts = 0;
  upstream::CacheStatus cache = upstream::CacheStatus::kNotCached;
  // The call's trace: the caller's traceparent or one the gateway started (TraceFor). Its
  // span_id is the gateway's span of this call, the parent of every vendor attempt's span.
  tracing::TraceContext trace;
  // When the call started (the span's start time).
  std::chrono::system_clock::time_point started_at = std::chrono::system_clock::now();
};

// The trace of a call: the W3C `traceparent` and `tracestate` metadata when valid (a new span
// under the caller's), otherwise a new trace.
tracing::TraceContext TraceFor(const grpc::ServerContextBase& context);

// The identity of the caller of `context` (see RpcRecord::caller): its certificate's first
// URI SAN (the SPIFFE ID), else its first DNS SAN, else its whole subject
// ("CN=claims-api,O=corp"), never a bare common name (security::CallerIdentityOf).
std::string CallerIdentity(const grpc::ServerContextBase& context);

// The metadata the gateway reads one value of: the vendor account, the idempotency key and
// the request id. A call that sends one of them more than once is refused (AdmitCall), so
// that the gateway never acts on a value other than the one the authorization policy saw
// (the policy matches the values joined with ",").
inline constexpr std::string_view kSingleValuedMetadata[] = {"x-vendor-account", "idempotency-key",
                                                             "x-request-id"};

// The value of metadata `key` when the call sent it exactly once; nullopt when it is absent
// or repeated. Every read of kSingleValuedMetadata goes through it.
std::optional<std::string_view> SingleMetadata(const grpc::ServerContextBase& context,
                                               std::string_view key);

// INVALID_ARGUMENT (reason INVALID_REQUEST) with one field violation per key of
// kSingleValuedMetadata the call sent more than once (field: the key; description:
// "metadata sent N times; send it once"); nullopt when there is none.
std::optional<errors::ApiError> RefuseRepeatedMetadata(const grpc::ServerContextBase& context);

// "inspection_id=..., event_name=..., urls=3": the identifying fields of a write request
// that are set (inspection_id, uid, webhook_url_v2, event_name, event_name_raw, and the
// number of urls), for audit lines. Never names, phone numbers or e-mail addresses.
std::string AuditResource(const google::protobuf::Message& request);

// Told about every finished RPC. Must be thread-safe and must not block.
class RpcObserver {
 public:
  virtual ~RpcObserver() = default;
  virtual void OnRpcFinished(const RpcRecord& record) = 0;
};

class Endpoints;

// What admitting an RPC reads (AdmitCall, AdmitStream, CallOptionsFor, the stream request
// bound): the policy, the per-caller limits, the stream slots, the accounts a call may name,
// and the bounded log of refusals.
struct AdmissionDeps {
  // Named vendor accounts a call may select with `x-vendor-account` (the default
  // account, "", needs no name).
  std::set<std::string> vendor_accounts;
  // The authorization policy (grpc.authz_policy_file); null: every caller may call
  // everything.
  const security::AuthzPolicyWatcher* authz = nullptr;
  // Told about every call the policy denies, with its full method name; may be null.
  std::function<void(std::string_view grpc_method)> on_denied;
  // Bounds the lines logged about refused calls (policy, per-caller rate, stream limits):
  // log.rejected_lines_per_second. Null: such calls are not logged (the metrics and the
  // caller's error still say why).
  logging::LineRateLimiter* rejected_lines = nullptr;
  // Per-caller limits (grpc.per_caller.*); null: none.
  security::CallerLimiter* limiter = nullptr;
  // Server streams per connection and in total (streams.max_per_connection,
  // streams.max_total); null: no caps.
  streaming::StreamSlots* stream_slots = nullptr;
};

// What a call to the vendor reads (CallVendor, NotifyFinished, the idempotency keys, the
// background calls): the endpoints, the decorated vendor stub, where finished calls and
// their spans are reported, and the idempotency store.
struct CallDeps {
  // Every vendor route's endpoint (endpoints.h; its own options: EndpointOptions).
  const Endpoints* endpoints = nullptr;
  // The request pipeline (the vendor client, behind any decorators).
  upstream::VendorCaller* vendor = nullptr;
  RpcObserver* observer = nullptr;  // may be null
  // Where the server span of each call goes (tracing.otlp_endpoint); null: not recorded.
  tracing::SpanSink* spans = nullptr;
  // Idempotency keys of CreateToken and DetectDamage; null disables them.
  pipeline::IdempotencyStore* idempotency = nullptr;
};

// What the server streams read: the event fan-out, each stream's queue bounds
// (streams.queue_size, streams.queue_max_bytes) and WatchTokenStatus' pollers (one shared
// upstream poll per watched token, one poller per vendor account, "" the default one).
struct StreamDeps {
  streaming::EventHub* hub = nullptr;
  streaming::StreamQueueLimits stream_queue;
  std::map<std::string, token_watch::TokenStatusPoller*> token_pollers;
};

// All three, built once by the composition root. A function takes the part it reads.
struct ServiceDeps : AdmissionDeps, CallDeps, StreamDeps {};

// The idempotency key as the store keeps it: the caller's own key, scoped by its
// certificate identity when it has one ("c:<16 hex of its SHA-256>:<key>"). Keys were scoped
// by vendor account only, so a caller who guessed another caller's key and parameters was
// replayed that caller's outcome (a customer token, say). Without a certificate (no mTLS)
// there is no identity to scope by, and the key is kept as it is, except that a key which
// starts with "c:" or "a:" gets "a:" in front: a caller without a certificate can then never
// name a scoped key (when plaintext and mTLS gateways share one store), and keys that could
// not collide keep the form they had before.
std::string ScopedIdempotencyKey(const std::string& caller_identity, const std::string& key);

// What per-caller limits count a caller as: its certificate identity (CallerIdentity), or
// "peer:<ip>" without a certificate, an IPv6 address by its /64 (one host usually holds a
// whole /64: counting single addresses would be no limit at all).
std::string CallerKey(const grpc::CallbackServerContext& context);
// The same from the identity ("" without a certificate) and gRPC's peer text
// ("ipv4:10.0.0.1:5000", "ipv6:[2001:db8::1]:5000", with the brackets percent-encoded too).
std::string CallerKeyOf(const std::string& identity, const std::string& peer);

// Whether this call of `grpc_method` may go on, asked first in every RPC, unary or
// streaming (before validation or any vendor call): metadata of kSingleValuedMetadata sent
// more than once (INVALID_ARGUMENT, RefuseRepeatedMetadata), then the authorization policy
// (PERMISSION_DENIED, reason PERMISSION_DENIED_BY_POLICY, counted through
// ServiceDeps::on_denied), then the caller's rate (RESOURCE_EXHAUSTED, reason
// CALLER_RATE_LIMITED, with RetryInfo). nullopt: go on.
// `trace`: the call's trace, for the refusal's log line (null: read from the metadata).
std::optional<errors::ApiError> AdmitCall(const grpc::CallbackServerContext& context,
                                          const AdmissionDeps& deps, std::string_view grpc_method,
                                          const tracing::TraceContext* trace = nullptr);

// AdmitCall for a stream, which also takes a stream slot: `slot` is set (hold it until the
// stream is done), or RESOURCE_EXHAUSTED with RetryInfo when the replica holds
// streams.max_total streams (reason STREAM_LIMIT), the connection holds
// streams.max_per_connection (CONNECTION_STREAM_LIMIT), or the caller holds
// grpc.per_caller.max_streams (CALLER_STREAM_LIMIT).
// `request_bytes`: what the request the stream holds for its life costs in memory (a parsed
// request's SpaceUsedLong(), which counts unknown fields and groups as parsed, not as sent:
// 4,096 empty groups are 8 KiB on the wire and 200 KB parsed); over streams.max_request_bytes
// it is refused (RefuseLargeStreamRequest) before a slot is taken.
std::optional<errors::ApiError> AdmitStream(const grpc::CallbackServerContext& context,
                                            const AdmissionDeps& deps, std::string_view grpc_method,
                                            size_t request_bytes, std::shared_ptr<void>* slot);

// INVALID_ARGUMENT (reason INVALID_REQUEST, one field violation on "") when a stream's
// request holds more than streams.max_request_bytes (`held_bytes`: what counts of it);
// nullopt otherwise, or without stream slots.
std::optional<errors::ApiError> RefuseLargeStreamRequest(const AdmissionDeps& deps,
                                                         size_t held_bytes);

// Admission of gRPC's health service (Health/Check, and Health/Watch with `slot`): the
// authorization policy exactly as AdmitCall (same refusal, log line and on_denied), but not
// the caller's rate. Probes (a kubelet's, a load balancer's) come often and from addresses
// other callers share (a node address after SNAT): a rate limit would turn another
// caller's burst into a failed liveness probe and a restarted pod, and a Check costs less
// than the limiter's own bookkeeping. With `slot` (Watch, a stream held open) it also
// takes a stream slot as AdmitStream does, so watches are bounded by streams.max_total,
// streams.max_per_connection and grpc.per_caller.max_streams, and their request (the
// watched name, `request_bytes`) by streams.max_request_bytes.
std::optional<errors::ApiError> AdmitHealthCheck(const grpc::CallbackServerContext& context,
                                                 const AdmissionDeps& deps,
                                                 std::string_view grpc_method,
                                                 std::shared_ptr<void>* slot = nullptr,
                                                 size_t request_bytes = 0);

// How one unary RPC maps onto its vendor route, for any request type: what the generic
// unary handler (generic_unary_service.h) and the call core run. Built once, at start-up
// (endpoints.h): the generic mapping from the annotations, with the hooks of
// endpoint_overrides.cc for the few RPCs that need code.
struct Endpoint {
  routes::RouteId route;
  // The response type (a prototype: New() makes one).
  const google::protobuf::Message* response_prototype = nullptr;
  std::function<validation::Violations(const google::protobuf::Message&)> validate;
  std::function<vendor::VendorRequest(const google::protobuf::Message&)> encode;
  // Fills `response` from the vendor's 2xx JSON; InvalidArgument when the JSON does
  // not have the expected shape.
  std::function<absl::Status(const nlohmann::json&, const google::protobuf::Message& request,
                             google::protobuf::Message* response, vendor::DecodeReport*)>
      decode;
  // For operations that create something: the request's idempotency key field (the
  // metadata `idempotency-key` is used when it is empty). Null: no idempotency.
  std::function<std::string(const google::protobuf::Message&)> idempotency_key;
  // Told about every successful vendor call through the endpoint (not a replay of an
  // idempotency key) with the decoded response and the vendor account ("" = default), on
  // the call's completion thread: must not block. Null: nothing to tell.
  std::function<void(const google::protobuf::Message& response, const std::string& account)>
      on_success;
};

// The idempotency key of a call (request field, else `idempotency-key` metadata) and the
// fingerprint of its parameters (SHA-256 of the deterministic serialization without the
// key). Empty key: the call is not idempotent-keyed.
std::string IdempotencyKeyFor(const grpc::CallbackServerContext& context,
                              const std::string& field_value);
std::string RequestFingerprint(const google::protobuf::Message& request);
// True when the outcome proves nothing reached the vendor (so the key may be reused).
bool VendorNotReached(const errors::ApiError& error);

// The request id of a call: the caller's `x-request-id` metadata when it is sent once,
// short and plain, otherwise a fresh random one.
std::string RequestIdFor(const grpc::CallbackServerContext& context);

void NotifyFinished(const CallDeps& deps, RpcRecord& record,
                    std::chrono::steady_clock::time_point start);

// The pipeline options of a call, from its metadata: `x-vendor-account` (must name a
// configured account: otherwise INVALID_ARGUMENT naming the metadata key; absent, empty
// or "default": the default account, ""; read through SingleMetadata) and `cache-control`
// (skip the response cache when any of its values says no-cache or no-store). Sets `out`
// or returns the error.
std::optional<errors::ApiError> CallOptionsFor(const grpc::CallbackServerContext& context,
                                               const AdmissionDeps& deps, std::string request_id,
                                               upstream::CallOptions* out);

// Response metadata of a unary RPC: `x-request-id`, `x-cache`, `idempotency-replayed`, ...
using ResponseMetadata = std::vector<std::pair<std::string, std::string>>;

// Tells the caller how the cache answered: `x-cache` (hit, miss, coalesced, stale, bypass)
// and, for a stale answer, `x-cache-stale-cause` (the vendor failure's reason).
void AddCacheMetadata(ResponseMetadata* metadata, upstream::CacheStatus cache,
                      const std::string& stale_cause);

// Finishes a unary RPC. `metadata` goes out as initial metadata (headers) on success and
// as trailing metadata on an error, so that an error is a Trailers-Only response: a
// client's retry policy (clients/service_config.json) can retry only a call whose response
// headers it has not received.
void FinishUnary(grpc::CallbackServerContext* context, grpc::ServerUnaryReactor* reactor,
                 const grpc::Status& status, const ResponseMetadata& metadata);

// Finishes a unary RPC refused before any vendor call with `error`: the record's code and
// reason, NotifyFinished, then FinishUnary.
void RefuseUnary(grpc::CallbackServerContext* context, grpc::ServerUnaryReactor* reactor,
                 const CallDeps& deps, RpcRecord& record,
                 std::chrono::steady_clock::time_point start, const errors::ApiError& error,
                 const ResponseMetadata& metadata);

// INVALID_ARGUMENT for an idempotency key that is not 1 to kMaxIdempotencyKeyLength visible
// ASCII characters; nothing for a valid one.
std::optional<errors::ApiError> CheckIdempotencyKey(const std::string& key);

// What one vendor call through an endpoint produced (CallVendor).
struct CallOutcome {
  // None for success, else the error as the caller gets it (errors::OutcomeOf applied),
  // typed: the RPC edge turns it into a grpc::Status (ToGrpcStatus), a background caller
  // into an absl::Status (ApiError::ToStatus); nothing converts it before.
  std::optional<errors::ApiError> error;
  upstream::CacheStatus cache = upstream::CacheStatus::kNotCached;
  std::string stale_cause;  // for kStale

  bool ok() const { return !error.has_value(); }
  grpc::Status ToGrpcStatus() const { return ok() ? grpc::Status::OK : error->ToGrpcStatus(); }
};

// The call core: every vendor call of the gateway goes through it, whoever makes it (unary
// RPCs through the generic unary handler, StreamDamageResults' submission, WatchTokenStatus'
// polls, webhook registration at start-up), so each gets the same pipeline, decoding, error
// mapping (one OutcomeOf; an unreadable answer is VENDOR_UNEXPECTED_RESPONSE), idempotency
// bookkeeping, log line and metrics:
//   encode -> deps.vendor (cache, retries, breaker, vendor client) -> decode into `response`
//   -> OutcomeOf -> the idempotency key's outcome (CompleteKeyedCall; `idempotency_key`
//      comes from BeginKeyedCall, idempotent_call.h, or is "" for an unkeyed call)
//   -> NotifyFinished(record) -> done.
// `response` is cleared unless the call succeeds. `endpoint`, `deps` and `response` must
// outlive the call; `done` runs once, on any thread.
void CallVendor(const CallDeps& deps, const Endpoint& endpoint,
                std::shared_ptr<const google::protobuf::Message> request,
                google::protobuf::Message* response, std::chrono::system_clock::time_point deadline,
                upstream::CallOptions call, std::string idempotency_key, RpcRecord record,
                std::chrono::steady_clock::time_point start,
                absl::AnyInvocable<void(CallOutcome) &&> done);

// What one vendor call through an endpoint produced, typed (CallEndpoint).
template <class Response>
struct EndpointResult {
  std::optional<errors::ApiError> error;  // as in CallOutcome
  Response response;                      // decoded; empty unless OK
  upstream::CacheStatus cache = upstream::CacheStatus::kNotCached;
  std::string stale_cause;

  bool ok() const { return !error.has_value(); }
  grpc::Status ToGrpcStatus() const { return ok() ? grpc::Status::OK : error->ToGrpcStatus(); }
};

// CallVendor for code that knows its types: `endpoint` (whose response type is Response)
// must outlive the call.
template <class Request, class Response>
void CallEndpoint(const CallDeps& deps, const Endpoint& endpoint,
                  std::shared_ptr<const Request> request,
                  std::chrono::system_clock::time_point deadline, upstream::CallOptions call,
                  std::string idempotency_key, RpcRecord record,
                  std::chrono::steady_clock::time_point start,
                  absl::AnyInvocable<void(EndpointResult<Response>) &&> done) {
  auto response = std::make_shared<Response>();
  Response* filled = response.get();
  CallVendor(deps, endpoint, std::move(request), filled, deadline, std::move(call),
             std::move(idempotency_key), std::move(record), start,
             [response = std::move(response), done = std::move(done)](CallOutcome outcome) mutable {
               EndpointResult<Response> out;
               out.error = std::move(outcome.error);
               out.cache = outcome.cache;
               out.stale_cause = std::move(outcome.stale_cause);
               out.response.Swap(response.get());
               std::move(done)(std::move(out));
             });
}

}  // namespace inspection::services

#endif  // GATEWAY_SERVICES_UNARY_CALL_H_
