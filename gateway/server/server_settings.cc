#include "gateway/server/server_settings.h"

#include <ratio>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "adapters/redis/redis_url.h"
#include "gateway/idempotency/redis_idempotency_store.h"
#include "gateway/pipeline/pipeline_settings.h"
#include "gateway/reconcile/reconciler_settings.h"
#include "gateway/resilience/resilience_settings.h"
#include "gateway/security/caller_limits_settings.h"
#include "gateway/server/event_pipeline.h"
#include "gateway/services/endpoint_settings.h"
#include "gateway/streaming/stream_settings.h"
#include "gateway/token_watch/token_watch_settings.h"
#include "gateway/tracing/otlp_exporter_settings.h"
#include "gateway/upstream/vendor_client_settings.h"
#include "gateway/webhooks/webhook_receiver_settings.h"

namespace inspection::server {
namespace {

using Options = GatewayServerOptions;
using settings::kDayMs;
using settings::kMaxInt;

// A Redis URL is parsed here, where a bad one stops start-up with the key named, rather
// than when the store is opened; a form the parser refuses (a password without its ':') is
// refused before anything could print it. The parser's messages never hold the URL.
absl::StatusOr<std::string> EventLogUrl(std::string value) {
  if (absl::StartsWith(value, "sqlite:") && value.size() > 7) return value;
  if (redis::IsRedisUrl(value)) {
    if (absl::Status parsed = redis::ParseRedisUrl(value).status(); !parsed.ok()) return parsed;
    return value;
  }
  return absl::InvalidArgumentError(
      "must be sqlite:<path>, redis://host:port[/db] or "
      "redis+sentinel://host:port[,host:port...]/MASTER_NAME[/db]");
}

absl::StatusOr<std::string> WorkLedgerUrl(std::string value) {
  if (value.empty()) return value;
  return EventLogUrl(std::move(value));
}

absl::StatusOr<std::string> IdempotencyStoreUrl(std::string value) {
  if (value == "memory" || value == kIdempotencyStoreEventLog) return value;
  if (redis::IsRedisUrl(value)) {
    if (absl::Status parsed = pipeline::ParseRedisIdempotencyUrl(value).status(); !parsed.ok()) {
      return parsed;
    }
    return value;
  }
  return absl::InvalidArgumentError(
      "must be memory, event_log, redis://host:port[/db] or "
      "redis+sentinel://host:port[,host:port...]/MASTER_NAME[/db]");
}

}  // namespace

std::string ResolveIdempotencyStoreUrl(const std::string& idempotency_store,
                                       const std::string& event_log) {
  if (idempotency_store != kIdempotencyStoreEventLog) return idempotency_store;
  if (!redis::IsRedisUrl(event_log)) return "memory";
  // The event log's URL without its ?stream= (the store's keys take the default prefix,
  // which the stream's name does not start with unless chosen so). The query starts at the
  // first '?' after the credentials, which end at the last '@'.
  const size_t at = event_log.rfind('@');
  return event_log.substr(0, event_log.find('?', at == std::string::npos ? 0 : at + 1));
}

namespace {

// What every Redis-backed store (event_log, reconcile.ledger, idempotency_store) does with
// the primary: how it is found and what an acknowledged write waits for.
std::vector<settings::Setting<Options>> RedisKeys() {
  return {
      settings::Integer<GatewayServerOptions>(
          "redis.min_replicas_acked", [](auto& o) -> auto& { return o.redis.min_replicas_acked; },
          -1, 16, "N",
          "Replicas of the Redis primary that must confirm a write before it counts as stored "
          "(WAIT n after it): a webhook is answered 200 only then, a work-ledger record is "
          "retried until then, an idempotency key's claim and outcome wait too, and event "
          "log reads hand out only events that many replicas hold. "
          "-1 = auto: 1 while the primary has a connected replica (looked at when a "
          "connection opens, every second after, and when a WAIT falls short), else 0: a "
          "replica that drops its link leaves writes to the primary's word. 0 = the "
          "primary's word alone (a primary that dies before its replica copied the write "
          "loses it). Set 1 with two or more replicas for writes that survive a failover. A "
          "webhook not confirmed in time gets 503 and is delivered again."),
      settings::Duration<std::milli, GatewayServerOptions>(
          "redis.replica_ack_timeout_ms",
          [](auto& o) -> auto& { return o.redis.replica_ack_timeout; }, 1, 60000, "MS",
          "How long a write waits for redis.min_replicas_acked replicas before it is refused "
          "as not acknowledged."),
  };
}

// The web application's address, and where the gRPC server and the admin endpoint listen.
std::vector<settings::Setting<Options>> ListenKeys() {
  return {
      settings::String<GatewayServerOptions>(
          "webapp_url", [](auto& o) -> auto& { return o.webapp_url; }, settings::BaseUrl, "URL",
          "Base address of the customer web application (absolute http(s); a trailing '/' is "
          "dropped).",
          /*required=*/true),
      settings::String<GatewayServerOptions>(
          "grpc_addr", [](auto& o) -> auto& { return o.grpc_addr; }, settings::ListenAddress,
          "HOST:PORT",
          "Listen address of the gRPC server: an IPv4 address, a bracketed IPv6 address or "
          "localhost (not a host name), and a port (0: any free port)."),
      settings::HostPort<GatewayServerOptions>(
          "admin_addr", [](auto& o) -> auto& { return o.admin_host; },
          [](auto& o) -> auto& { return o.admin_port; },
          "Listen address of the admin endpoint (/metrics, /healthz, /readyz): an IP address or "
          "localhost, like grpc_addr."),
  };
}

// The vendor HTTP client and the limits of a vendor answer (adapters/http).
std::vector<settings::Setting<Options>> TransportKeys() {
  return {
      settings::Duration<std::milli, GatewayServerOptions>(
          "upstream.connect_timeout_ms", [](auto& o) -> auto& { return o.connect_timeout; }, 1,
          kDayMs, "MS", "Connect timeout (TCP and TLS) of a vendor connection."),
      settings::Integer<GatewayServerOptions>(
          "upstream.max_connections", [](auto& o) -> auto& { return o.max_connections; }, 1,
          kMaxInt, "N", "Most connections open to the vendor at once."),
      settings::String<GatewayServerOptions>(
          "upstream.ca_file", [](auto& o) -> auto& { return o.upstream_ca_file; },
          settings::OptionalPath, "PATH",
          "PEM file of the certificate authorities trusted for an https:// vendor (a private "
          "CA, a TLS-inspecting proxy); empty: the system's bundle."),
      settings::Enum<GatewayServerOptions, VendorHttpClient>(
          "upstream.http_client", [](auto& o) -> auto& { return o.http_client; },
          {{"auto", VendorHttpClient::kAuto},
           {"beast", VendorHttpClient::kBeast},
           {"curl", VendorHttpClient::kCurl}},
          "HTTP client of vendor calls. beast: HTTP/1.1 keep-alive pool (Boost.Beast), the "
          "lowest overhead per call, no proxy, no HTTP/2. curl: libcurl, HTTP/2 over TLS "
          "where the vendor offers it, proxy variables (https_proxy...). auto: beast when "
          "every vendor URL is http:// and no http_proxy/all_proxy is set, else curl."),
      settings::Integer<GatewayServerOptions>(
          "upstream.max_response_bytes", [](auto& o) -> auto& { return o.max_response_bytes; },
          1024, int64_t{1} << 40, "BYTES",
          "Largest answer one vendor call reads (the body; with curl the head too); larger: the "
          "call fails with RESOURCE_EXHAUSTED, VENDOR_RESPONSE_TOO_LARGE (not retried)."),
      settings::Integer<GatewayServerOptions>(
          "upstream.max_response_head_bytes",
          [](auto& o) -> auto& { return o.max_response_head_bytes; }, 1024, int64_t{16} << 20,
          "BYTES",
          "Largest head (status line and headers, interim answers included; the trailers of a "
          "chunked answer count on their own) of one vendor answer; larger: the call fails "
          "with RESOURCE_EXHAUSTED, VENDOR_RESPONSE_TOO_LARGE (not retried)."),
      settings::Integer<GatewayServerOptions>(
          "upstream.max_response_header_count",
          [](auto& o) -> auto& { return o.max_response_header_count; }, 1, 100000, "COUNT",
          "Header fields of one vendor answer (trailers and interim answers included); more: "
          "the call fails with RESOURCE_EXHAUSTED, VENDOR_RESPONSE_TOO_LARGE (not retried)."),
      settings::Integer<GatewayServerOptions>(
          "upstream.max_buffered_response_bytes",
          [](auto& o) -> auto& { return o.max_buffered_response_bytes; }, 0, int64_t{1} << 40,
          "BYTES",
          "Memory the answers of all vendor calls being read may hold together; a call whose "
          "answer would cross it fails with VENDOR_CONNECTION_LOST. 0: unlimited."),
      settings::Integer<GatewayServerOptions>(
          "upstream.guaranteed_response_bytes",
          [](auto& o) -> auto& { return o.guaranteed_response_bytes; }, 0, int64_t{1} << 30,
          "BYTES",
          "Each answer's first bytes, which may use all of upstream.max_buffered_response_bytes; "
          "the bytes past them may hold three quarters of it, so a few huge or endless answers "
          "cannot make the ordinary ones fail. 0: every byte competes for the whole budget."),
  };
}

// The gRPC listener: limits, TLS, the authorization policy, health.
std::vector<settings::Setting<Options>> GrpcKeys() {
  return {
      settings::Integer<GatewayServerOptions>(
          "grpc.max_receive_message_bytes",
          [](auto& o) -> auto& { return o.grpc_limits.max_receive_message_bytes; }, 1024, 1 << 30,
          "BYTES", "Largest gRPC request message; larger: RESOURCE_EXHAUSTED before parsing."),
      settings::Integer<GatewayServerOptions>(
          "grpc.max_concurrent_streams",
          [](auto& o) -> auto& { return o.grpc_limits.max_concurrent_streams; }, 1, 1000000, "N",
          "Calls open at once on one client connection (streams included)."),
      settings::Integer<GatewayServerOptions>(
          "grpc.keepalive_min_client_interval_ms",
          [](auto& o) -> auto& { return o.grpc_limits.keepalive_min_client_interval_ms; }, 1000,
          kDayMs, "MS", "A client pinging more often than this gets GOAWAY (after two strikes)."),
      settings::Integer<GatewayServerOptions>(
          "grpc.keepalive_time_ms",
          [](auto& o) -> auto& { return o.grpc_limits.keepalive_time_ms; }, 1000, kDayMs, "MS",
          "The server pings a connection idle this long ..."),
      settings::Integer<GatewayServerOptions>(
          "grpc.keepalive_timeout_ms",
          [](auto& o) -> auto& { return o.grpc_limits.keepalive_timeout_ms; }, 1000, kDayMs, "MS",
          "... and closes it when the ping is not answered within this."),
      settings::String<GatewayServerOptions>(
          "grpc.tls.cert_file", [](auto& o) -> auto& { return o.tls.cert_file; },
          settings::OptionalPath, "PATH",
          "PEM certificate chain of the gRPC listener; set: TLS (with grpc.tls.key_file), "
          "reloaded without restart. Unset: plaintext (a warning on a non-loopback address)."),
      settings::String<GatewayServerOptions>(
          "grpc.tls.key_file", [](auto& o) -> auto& { return o.tls.key_file; },
          settings::OptionalPath, "PATH", "PEM private key of grpc.tls.cert_file."),
      settings::String<GatewayServerOptions>(
          "grpc.tls.client_ca_file", [](auto& o) -> auto& { return o.tls.client_ca_file; },
          settings::OptionalPath, "PATH",
          "PEM CA bundle: set, every client must present a certificate it signs (mTLS)."),
      settings::Duration<std::ratio<1>, GatewayServerOptions>(
          "grpc.tls.refresh_interval_seconds",
          [](auto& o) -> auto& { return o.tls.refresh_interval; }, 1, 86400, "SECONDS",
          "How often the TLS files are read again (a rotated certificate is served from the next "
          "handshake on)."),
      settings::String<GatewayServerOptions>(
          "grpc.authz_policy_file", [](auto& o) -> auto& { return o.authz_policy_file; },
          settings::OptionalPath, "PATH",
          "Authorization policy in gRPC's authz policy JSON (allow/deny rules on principals "
          "such as the spiffe:// ID of a client certificate, paths, and headers such as "
          "x-vendor-account), read again without restart. Unset: every caller may call every "
          "RPC (a start-up warning)."),
      settings::Duration<std::ratio<1>, GatewayServerOptions>(
          "grpc.authz_refresh_interval_seconds",
          [](auto& o) -> auto& { return o.authz_refresh_interval; }, 1, 86400, "SECONDS",
          "How often grpc.authz_policy_file is read again."),
      settings::Duration<std::milli, GatewayServerOptions>(
          "grpc.health_check_interval_ms", [](auto& o) -> auto& { return o.health_check_interval; },
          100, kDayMs, "MS",
          "How often the health service's per-service status is updated: "
          "inspection.v1.EventService is NOT_SERVING while the event log refuses writes."),
  };
}

// Logging of refused calls.
std::vector<settings::Setting<Options>> LogKeys() {
  return {
      settings::Integer<GatewayServerOptions>(
          "log.rejected_lines_per_second",
          [](auto& o) -> auto& { return o.rejected_log_lines_per_second; }, 0, 1000000, "N",
          "Lines per second (a burst of as many) about calls refused by the authorization "
          "policy or the per-caller limits and about rejected webhook deliveries; the next "
          "line written counts the suppressed ones (`suppressed`), the metrics count all. "
          "0: none are logged."),
  };
}

// The event log: where, how long, duplicates; where events come from.
std::vector<settings::Setting<Options>> EventLogKeys() {
  return {
      settings::Duration<std::ratio<3600>, GatewayServerOptions>(
          "webhook.dedupe_window_hours", [](auto& o) -> auto& { return o.retention.dedupe_window; },
          1, 24 * 366, "HOURS",
          "A delivery byte-identical to one received within this window is a duplicate "
          "(answered 200, stored once); an identical one after it is a new event."),
      settings::Enum<GatewayServerOptions, bool>(
          "webhook.mode", [](auto& o) -> auto& { return o.webhook_less; },
          {{"webhook", false}, {"poll", true}},
          "Where stream events come from: webhook (the vendor's webhooks, received when a "
          "webhook key is set; reports whose webhook is lost are still recovered, see "
          "reconcile.*) or poll (no webhook receiver and no public endpoint: Subscribe and "
          "StreamDamageResults carry what this gateway started, polled at the vendor). Without "
          "a webhook key the gateway polls in either mode."),
      settings::UrlWithPassword(settings::String<GatewayServerOptions>(
          "event_log", [](auto& o) -> auto& { return o.event_log_url; }, EventLogUrl, "URL",
          "Where events are stored: sqlite:<path> (one process), "
          "redis://[[user]:password@]host:port[/db][?stream=name] or, following the primary "
          "through Redis Sentinel, redis+sentinel://[[user]:password@]host:port[,host:port...]/"
          "MASTER_NAME[/db][?stream=name] (replicas share it; see redis.*).")),
      settings::Duration<std::ratio<3600>, GatewayServerOptions>(
          "event_log_retention.max_age_hours", [](auto& o) -> auto& { return o.retention.max_age; },
          1, 24 * 366, "HOURS", "Events older than this are removed."),
      settings::Integer<GatewayServerOptions>(
          "event_log_retention.max_events", [](auto& o) -> auto& { return o.retention.max_events; },
          1, 1000000000, "N", "At most this many events are kept (the oldest go first)."),
  };
}

// Whether the reconciler runs.
std::vector<settings::Setting<Options>> ReconcileKeys() {
  return {
      settings::Bool<GatewayServerOptions>(
          "reconcile.enabled", [](auto& o) -> auto& { return o.reconcile.enabled; },
          "Record every damage submission and created token, and poll the vendor for a report "
          "whose createReport webhook does not come (a damagesReport event of the gateway's "
          "own). Off: results depend on webhooks alone."),
  };
}

// Where the reconciler's work is recorded.
std::vector<settings::Setting<Options>> LedgerKeys() {
  return {
      settings::UrlWithPassword(settings::String<GatewayServerOptions>(
          "reconcile.ledger", [](auto& o) -> auto& { return o.reconcile.ledger_url; },
          WorkLedgerUrl, "URL",
          "Where recorded work is kept: sqlite:<path>, redis://... or redis+sentinel://... as "
          "for event_log (replicas share it and split the polls). Empty: beside event_log "
          "(<path>.work, or the same Redis).")),
  };
}

// The idempotency store.
std::vector<settings::Setting<Options>> IdempotencyKeys() {
  return {
      settings::Duration<std::ratio<3600>, GatewayServerOptions>(
          "idempotency.ttl_hours", [](auto& o) -> auto& { return o.idempotency_ttl; }, 1, 24 * 30,
          "HOURS",
          "How long the first outcome of a CreateToken/DetectDamage idempotency key is kept."),
      settings::Integer<GatewayServerOptions>(
          "idempotency.max_bytes", [](auto& o) -> auto& { return o.idempotency_memory_max_bytes; },
          1 << 20, int64_t{1} << 40, "BYTES",
          "Memory the in-memory idempotency store may hold; past it the oldest finished "
          "outcomes are forgotten first, and with only keys in flight a new key gets "
          "UNAVAILABLE. With a Redis store: the outcomes answered but not saved yet (Redis "
          "unreachable; retried); past it a new key gets UNAVAILABLE."),
      settings::Integer<GatewayServerOptions>(
          "idempotency.redis_threads", [](auto& o) -> auto& { return o.idempotency_redis_threads; },
          1, 64, "N",
          "Threads that ask a Redis idempotency store about a keyed call's key (never gRPC's "
          "threads: calls without a key never wait for Redis)."),
      settings::Integer<GatewayServerOptions>(
          "idempotency.max_queued_begins",
          [](auto& o) -> auto& { return o.idempotency_max_queued_begins; }, 1, 1000000, "N",
          "Keyed calls that may wait for those threads; past it (Redis slow) a keyed call "
          "gets UNAVAILABLE at once. After Redis failed to answer, keyed calls get "
          "UNAVAILABLE without trying for 500 ms."),
      settings::UrlWithPassword(settings::String<GatewayServerOptions>(
          "idempotency_store", [](auto& o) -> auto& { return o.idempotency_store_url; },
          IdempotencyStoreUrl, "memory|URL",
          "Where idempotency keys are kept: memory (this process), "
          "redis://[[user]:password@]host:port[/db][?prefix=name] or "
          "redis+sentinel://...[?prefix=name] (replicas share them; see redis.*), or "
          "event_log: the event log's Redis (its server or sentinels, credentials and db; "
          "keys under the default prefix) when event_log is Redis, else memory.")),
  };
}

// The server's own keys, as a schema to compose with the components'.
settings::Schema<Options> Own(std::vector<settings::Setting<Options>> keys) {
  settings::Schema<Options> schema;
  schema.keys = std::move(keys);
  return schema;
}

// A component's schema, for the part of the options that `part` reaches.
template <typename Inner, typename Part>
settings::Schema<Options> Lift(settings::Schema<Inner> schema, Part part) {
  return settings::Within<Options>(std::move(schema), part);
}

absl::Status CheckTls(const Options& o) {
  if (o.tls.cert_file.empty() != o.tls.key_file.empty()) {
    return absl::InvalidArgumentError(
        "`grpc.tls.cert_file` and `grpc.tls.key_file` go together: set both for TLS, or neither");
  }
  if (!o.tls.client_ca_file.empty() && o.tls.cert_file.empty()) {
    return absl::InvalidArgumentError(
        "`grpc.tls.client_ca_file` (mTLS) needs TLS: set `grpc.tls.cert_file` and "
        "`grpc.tls.key_file` too");
  }
  return absl::OkStatus();
}

// A lease that ends while its poll may still be at the vendor lets a second replica claim
// and poll the same item (issue 31).
absl::Status CheckReconcileLease(const Options& o) {
  const absl::Duration poll = ReconcilePollDeadline();
  const absl::Duration lease = o.reconcile.reconciler.lease;
  if (!o.reconcile.enabled || lease > poll) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "`", reconcile::kLeaseKey, "` (", absl::ToInt64Milliseconds(lease),
      ") must be longer than a reconcile poll's vendor call may take: ",
      absl::ToInt64Milliseconds(poll), " ms, its deadline (retries included; `",
      upstream::kAttemptTimeoutKey,
      "` shortens each attempt, not the call). A shorter lease lets another replica claim and "
      "poll an item whose poll is still in flight"));
}

// gRPC counts server streams among the calls a connection may hold: at or above that limit,
// the per-connection stream limit never answers (CONNECTION_STREAM_LIMIT), and a client's
// streams can take every call slot of its connection, queueing its unary calls.
std::string WarnStreamsPerConnection(const Options& o) {
  const int streams = o.stream_slots.max_per_connection;
  const int calls = o.grpc_limits.max_concurrent_streams;
  if (streams == 0 || streams < calls) return "";
  return absl::StrCat(
      "`", streaming::kMaxPerConnectionKey, "` (", streams,
      ") is not below `grpc.max_concurrent_streams` (", calls,
      "): a connection's server streams can hold every call it may have open, so its unary "
      "calls wait, and the per-connection stream limit never answers; keep it below");
}

}  // namespace

settings::Schema<GatewayServerOptions> ServerSchema() {
  auto part = [](auto member) {
    return [member](auto& o) -> auto& { return o.*member; };
  };
  settings::Schema<Options> schema;
  schema.Add(Lift(upstream::VendorClientSchema(), part(&Options::vendor)))
      .Add(Own(ListenKeys()))
      .Add(Own(TransportKeys()))
      .Add(Lift(services::MapperSchema(), part(&Options::mapper)))
      .Add(Lift(services::ValidationSchema(), part(&Options::limits)))
      .Add(Own(GrpcKeys()))
      .Add(Lift(security::CallerLimitsSchema(), part(&Options::caller_limits)))
      .Add(Own(LogKeys()))
      .Add(Lift(webhooks::WebhookReceiverSchema(), part(&Options::webhook)))
      .Add(Own(EventLogKeys()))
      .Add(Lift(streaming::StreamQueueSchema(), part(&Options::stream_queue)))
      .Add(Lift(streaming::EventHubSchema(), part(&Options::hub)))
      .Add(Lift(streaming::StreamSlotSchema(), part(&Options::stream_slots)))
      .Add(Lift(token_watch::TokenStatusPollerSchema(), part(&Options::token_watch)))
      .Add(Own(ReconcileKeys()))
      .Add(Lift(
          reconcile::ReconcilerSchema(), [](auto& o) -> auto& { return o.reconcile.reconciler; }))
      .Add(Own(LedgerKeys()))
      .Add(Lift(tracing::OtlpExporterSchema(), part(&Options::tracing)))
      .Add(Own(IdempotencyKeys()))
      .Add(Own(RedisKeys()))
      .Add(Lift(pipeline::RetrySchema(), part(&Options::retry)))
      .Add(Lift(resilience::RetryBudgetSchema(), part(&Options::retry_budget)))
      .Add(Lift(resilience::CircuitBreakerSchema(), part(&Options::circuit_breaker)))
      .Add(Lift(pipeline::CachingSchema(), part(&Options::cache)));
  schema.rules.push_back(CheckTls);
  schema.rules.push_back(CheckReconcileLease);
  schema.warnings.push_back(WarnStreamsPerConnection);
  return schema;
}

}  // namespace inspection::server
