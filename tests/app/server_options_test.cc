// gateway/app/server_options: every setting reaches the component that uses it, and the
// defaults the process runs with are the components' own.
#include "gateway/app/server_options.h"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace inspection::app {
namespace {

using ::testing::ElementsAre;

// A config file in a fresh directory, removed with it.
class ConfigFile {
 public:
  explicit ConfigFile(const std::string& contents) {
    char pattern[] = "/tmp/server-options-XXXXXX";
    dir_ = mkdtemp(pattern);
    path_ = dir_ + "/gateway.json";
    std::ofstream(path_) << contents;
  }
  ~ConfigFile() {
    std::remove(path_.c_str());
    rmdir(dir_.c_str());
  }
  const std::string& path() const { return path_; }

 private:
  std::string dir_;
  std::string path_;
};

config::EnvLookup Env(std::map<std::string, std::string> env) {
  return [env](const std::string& name) -> std::optional<std::string> {
    auto it = env.find(name);
    if (it == env.end()) return std::nullopt;
    return it->second;
  };
}

absl::StatusOr<config::GatewayConfig> Load(const std::vector<std::string>& args) {
  return config::LoadConfig(
      args, Env({{"INSPECTION_API_KEY", "vendor-key"}, {"INSPECTION_WEBHOOK_KEY", "webhook-key"}}));
}

int64_t Ms(std::chrono::milliseconds d) { return d.count(); }

// With only the required settings, the server gets exactly the options its components
// declare as defaults: the conversions (percent, window, hours, HOST:PORT) lose nothing.
TEST(ServerOptionsTest, DefaultsAreTheComponentsOwn) {
  auto config = Load({"--upstream-url=http://vendor.test", "--webapp-url=http://app.test"});
  ASSERT_TRUE(config.ok()) << config.status();
  const server::GatewayServerOptions options = ServerOptions(*config);
  const server::GatewayServerOptions defaults;

  EXPECT_EQ(options.grpc_addr, defaults.grpc_addr);
  EXPECT_EQ(options.vendor.max_attempt_timeout, defaults.vendor.max_attempt_timeout);
  EXPECT_EQ(options.vendor.max_json_depth, defaults.vendor.max_json_depth);
  EXPECT_EQ(options.max_response_bytes, defaults.max_response_bytes);
  EXPECT_EQ(options.max_buffered_response_bytes, defaults.max_buffered_response_bytes);
  EXPECT_EQ(options.max_response_head_bytes, defaults.max_response_head_bytes);
  EXPECT_EQ(options.guaranteed_response_bytes, defaults.guaranteed_response_bytes);
  EXPECT_EQ(options.connect_timeout, defaults.connect_timeout);
  EXPECT_EQ(options.max_connections, defaults.max_connections);
  EXPECT_EQ(options.upstream_ca_file, defaults.upstream_ca_file);
  EXPECT_EQ(options.mapper.position_ratio_key, defaults.mapper.position_ratio_key);
  EXPECT_EQ(options.mapper.wheel_box_key, defaults.mapper.wheel_box_key);
  EXPECT_EQ(options.mapper.test_webhook_params, defaults.mapper.test_webhook_params);
  EXPECT_EQ(options.mapper.inspection_id_pointers, defaults.mapper.inspection_id_pointers);
  EXPECT_EQ(options.limits.search_max_limit, defaults.limits.search_max_limit);
  EXPECT_EQ(options.limits.max_urls, defaults.limits.max_urls);
  EXPECT_EQ(options.tls.refresh_interval, defaults.tls.refresh_interval);
  EXPECT_EQ(options.authz_refresh_interval, defaults.authz_refresh_interval);
  EXPECT_EQ(options.health_check_interval, defaults.health_check_interval);
  EXPECT_EQ(options.caller_limits.requests_per_second, defaults.caller_limits.requests_per_second);
  EXPECT_EQ(options.caller_limits.burst, defaults.caller_limits.burst);
  EXPECT_EQ(options.caller_limits.max_streams, defaults.caller_limits.max_streams);
  EXPECT_EQ(options.grpc_limits.max_receive_message_bytes,
            defaults.grpc_limits.max_receive_message_bytes);
  EXPECT_EQ(options.grpc_limits.max_concurrent_streams,
            defaults.grpc_limits.max_concurrent_streams);
  EXPECT_EQ(options.grpc_limits.keepalive_min_client_interval_ms,
            defaults.grpc_limits.keepalive_min_client_interval_ms);
  EXPECT_EQ(options.grpc_limits.keepalive_time_ms, defaults.grpc_limits.keepalive_time_ms);
  EXPECT_EQ(options.grpc_limits.keepalive_timeout_ms, defaults.grpc_limits.keepalive_timeout_ms);
  EXPECT_EQ(options.admin_host, defaults.admin_host);
  EXPECT_EQ(options.admin_port, defaults.admin_port);
  EXPECT_EQ(options.event_log_url, defaults.event_log_url);
  EXPECT_EQ(options.retention.max_age, defaults.retention.max_age);
  EXPECT_EQ(options.retention.max_events, defaults.retention.max_events);
  EXPECT_EQ(options.retention.dedupe_window, defaults.retention.dedupe_window);
  EXPECT_EQ(options.stream_queue.max_events, defaults.stream_queue.max_events);
  EXPECT_EQ(options.stream_queue.max_bytes, defaults.stream_queue.max_bytes);
  EXPECT_EQ(options.hub.catchup_events_per_turn, defaults.hub.catchup_events_per_turn);
  EXPECT_EQ(options.hub.catchup_idle_timeout, defaults.hub.catchup_idle_timeout);
  EXPECT_EQ(options.stream_slots.max_per_connection, defaults.stream_slots.max_per_connection);
  EXPECT_EQ(options.stream_slots.max_total, defaults.stream_slots.max_total);
  EXPECT_EQ(options.idempotency_ttl, defaults.idempotency_ttl);
  EXPECT_EQ(options.idempotency_memory_max_bytes, defaults.idempotency_memory_max_bytes);
  EXPECT_EQ(options.idempotency_store_url, defaults.idempotency_store_url);
  EXPECT_EQ(options.retry.backoff.base, defaults.retry.backoff.base);
  EXPECT_EQ(options.retry.backoff.cap, defaults.retry.backoff.cap);
  EXPECT_EQ(options.retry.backoff.max_attempts, defaults.retry.backoff.max_attempts);
  EXPECT_EQ(options.retry.min_attempt_time, defaults.retry.min_attempt_time);
  EXPECT_DOUBLE_EQ(options.retry_budget.ratio, defaults.retry_budget.ratio);
  EXPECT_EQ(options.retry_budget.min_retries, defaults.retry_budget.min_retries);
  EXPECT_EQ(options.circuit_breaker.consecutive_failures,
            defaults.circuit_breaker.consecutive_failures);
  EXPECT_DOUBLE_EQ(options.circuit_breaker.failure_ratio, defaults.circuit_breaker.failure_ratio);
  EXPECT_EQ(options.circuit_breaker.minimum_requests, defaults.circuit_breaker.minimum_requests);
  EXPECT_EQ(options.circuit_breaker.bucket_width, defaults.circuit_breaker.bucket_width);
  EXPECT_EQ(options.circuit_breaker.window_buckets, defaults.circuit_breaker.window_buckets);
  EXPECT_EQ(options.circuit_breaker.open_duration, defaults.circuit_breaker.open_duration);
  EXPECT_EQ(options.circuit_breaker.max_open_duration, defaults.circuit_breaker.max_open_duration);
  EXPECT_EQ(options.cache.enabled, defaults.cache.enabled);
  EXPECT_EQ(options.cache.max_bytes, defaults.cache.max_bytes);
  EXPECT_EQ(options.cache.stale_if_error, defaults.cache.stale_if_error);
  EXPECT_EQ(options.cache.image_analysis, defaults.cache.image_analysis);
  EXPECT_EQ(options.cache.image_analysis_ttl, defaults.cache.image_analysis_ttl);
  EXPECT_EQ(options.token_watch.interval, defaults.token_watch.interval);
  EXPECT_EQ(options.token_watch.max_backoff, defaults.token_watch.max_backoff);
  EXPECT_EQ(options.reconcile.enabled, defaults.reconcile.enabled);
  EXPECT_EQ(options.reconcile.reconciler.after, defaults.reconcile.reconciler.after);
  EXPECT_EQ(options.reconcile.reconciler.interval, defaults.reconcile.reconciler.interval);
  EXPECT_EQ(options.reconcile.reconciler.max_interval, defaults.reconcile.reconciler.max_interval);
  EXPECT_EQ(options.reconcile.reconciler.max_polls_per_minute,
            defaults.reconcile.reconciler.max_polls_per_minute);
  EXPECT_EQ(options.reconcile.reconciler.max_polls_per_item,
            defaults.reconcile.reconciler.max_polls_per_item);
  EXPECT_EQ(options.reconcile.reconciler.max_unrecorded,
            defaults.reconcile.reconciler.max_unrecorded);
  EXPECT_EQ(options.reconcile.reconciler.lease, defaults.reconcile.reconciler.lease);
  EXPECT_EQ(options.reconcile.reconciler.max_age, defaults.reconcile.reconciler.max_age);
  EXPECT_EQ(options.reconcile.reconciler.ready_pointers,
            defaults.reconcile.reconciler.ready_pointers);
  EXPECT_EQ(options.reconcile.reconciler.scan_interval,
            defaults.reconcile.reconciler.scan_interval);
  EXPECT_EQ(options.reconcile.ledger_url, defaults.reconcile.ledger_url);
  EXPECT_EQ(options.webhook_less, defaults.webhook_less);

  // The webhook receiver is configured (a webhook key is set), with its component defaults
  // except the address, which is the config's.
  const webhooks::WebhookReceiverOptions& webhook = options.webhook;
  EXPECT_EQ(webhook.host, defaults.webhook.host);
  EXPECT_EQ(webhook.port, defaults.webhook.port);
  EXPECT_EQ(webhook.path, defaults.webhook.path);
  EXPECT_EQ(webhook.threads, defaults.webhook.threads);
  EXPECT_EQ(webhook.limits.head_timeout, defaults.webhook.limits.head_timeout);
  EXPECT_EQ(webhook.limits.keep_alive_timeout, defaults.webhook.limits.keep_alive_timeout);
  EXPECT_EQ(webhook.limits.min_body_bytes_per_second,
            defaults.webhook.limits.min_body_bytes_per_second);
  EXPECT_EQ(webhook.limits.body_grace, defaults.webhook.limits.body_grace);
  EXPECT_EQ(webhook.limits.write_timeout, defaults.webhook.limits.write_timeout);
  EXPECT_EQ(webhook.limits.max_head_bytes, defaults.webhook.limits.max_head_bytes);
  EXPECT_EQ(webhook.limits.max_header_count, defaults.webhook.limits.max_header_count);
  EXPECT_EQ(webhook.limits.max_body_bytes, defaults.webhook.limits.max_body_bytes);
  EXPECT_EQ(webhook.limits.max_connections, defaults.webhook.limits.max_connections);
  EXPECT_EQ(webhook.limits.max_connections_per_client,
            defaults.webhook.limits.max_connections_per_client);
  EXPECT_EQ(webhook.limits.max_requests_in_flight, defaults.webhook.limits.max_requests_in_flight);
  EXPECT_EQ(webhook.json_limits.max_depth, defaults.webhook.json_limits.max_depth);
  EXPECT_EQ(webhook.json_limits.max_elements, defaults.webhook.json_limits.max_elements);
  EXPECT_EQ(webhook.event_name_pointer, defaults.webhook.event_name_pointer);
  EXPECT_EQ(webhook.inspection_id_pointer, defaults.webhook.inspection_id_pointer);
  EXPECT_EQ(webhook.token_id_pointer, defaults.webhook.token_id_pointer);
  EXPECT_EQ(webhook.vehicle_id_pointer, defaults.webhook.vehicle_id_pointer);
}

// Every setting, set to a value that is no default, arrives in the right option field: a
// key that is parsed but never handed on fails here.
TEST(ServerOptionsTest, EverySettingReachesItsComponent) {
  ConfigFile file(R"({
    "upstream_url": "http://vendor.test/api", "webapp_url": "http://app.test",
    "grpc_addr": "127.0.0.1:6001", "webhook_addr": "[::1]:6002", "admin_addr": "127.0.0.3:6003",
    "upstream": {"timeout_ms": 1234, "connect_timeout_ms": 345, "max_connections": 77,
                 "ca_file": "/etc/vendor-ca.pem", "max_json_depth": 78,
                 "max_response_bytes": 7900, "max_response_head_bytes": 7800,
                 "max_buffered_response_bytes": 8000,
                 "guaranteed_response_bytes": 300},
    "background_removal": {"position_ratio_key": "plural", "wheel_box_key": "singular"},
    "test_webhook": {"params_in": "body"},
    "damage": {"inspection_id_pointers": ["/a", "/b/c"]},
    "validation": {"max_urls": 7},
    "search": {"max_limit": 9},
    "grpc": {"max_receive_message_bytes": 70000, "max_concurrent_streams": 11,
             "keepalive_min_client_interval_ms": 1001, "keepalive_time_ms": 2002,
             "keepalive_timeout_ms": 3003, "authz_refresh_interval_seconds": 13,
             "health_check_interval_ms": 1301,
             "per_caller": {"requests_per_second": 14, "burst": 15, "max_streams": 16},
             "reflection": "on"},
    "webhook": {"mode": "poll", "path": "/hooks", "max_body_bytes": 100001, "head_timeout_ms": 1101,
                "keep_alive_timeout_ms": 1102, "min_body_bytes_per_second": 1103,
                "body_grace_ms": 1104, "write_timeout_ms": 1105, "max_head_bytes": 4096,
                "max_header_count": 17, "max_connections": 18,
                "max_connections_per_client": 19, "max_requests_in_flight": 20,
                "max_json_depth": 21, "max_json_elements": 22, "dedupe_window_hours": 23,
                "threads": 3, "event_name_pointer": "/e", "inspection_id_pointer": "/i",
                "token_id_pointer": "/t", "vehicle_id_pointer": "/v"},
    "event_log": "sqlite:/tmp/elsewhere.db",
    "event_log_retention": {"max_age_hours": 25, "max_events": 26},
    "streams": {"queue_size": 27, "queue_max_bytes": 2800, "catchup_events_per_turn": 29,
                "catchup_idle_timeout_ms": 3000, "max_per_connection": 31, "max_total": 32},
    "token_watch": {"interval_ms": 3300, "max_backoff_ms": 3400},
    "reconcile": {"enabled": false, "after_ms": 3401, "interval_ms": 3402,
                  "max_interval_ms": 3403, "max_polls_per_minute": 3404, "lease_ms": 3405,
                  "max_polls_per_item": 3408, "max_unrecorded": 3409,
                  "max_age_hours": 3406, "ready_pointers": ["/a", "/b"],
                  "scan_interval_ms": 3407, "ledger": "sqlite:/tmp/work.db"},
    "idempotency": {"ttl_hours": 35, "max_bytes": 3600000},
    "idempotency_store": "redis://127.0.0.1:1/2",
    "retry": {"base_ms": 37, "cap_ms": 3800, "max_attempts": 4, "min_attempt_ms": 39},
    "retry_budget": {"percent": 41, "min_retries": 42},
    "circuit_breaker": {"consecutive_failures": 43, "failure_ratio_percent": 44,
                        "minimum_requests": 45, "window_ms": 4600, "open_ms": 470,
                        "max_open_ms": 4800},
    "cache": {"enabled": false, "max_bytes": 4900000, "stale_if_error_ms": 5000,
              "image_analysis": false, "image_analysis_ttl_ms": 5100}
  })");
  auto config = Load({"--config", file.path()});
  ASSERT_TRUE(config.ok()) << config.status();
  const server::GatewayServerOptions o = ServerOptions(*config);

  EXPECT_EQ(o.grpc_addr, "127.0.0.1:6001");
  EXPECT_EQ(o.vendor.base_url, "http://vendor.test/api");
  EXPECT_EQ(o.vendor.api_key, "vendor-key");
  EXPECT_EQ(o.webapp_url, "http://app.test");
  EXPECT_EQ(Ms(o.vendor.max_attempt_timeout), 1234);
  EXPECT_EQ(Ms(o.connect_timeout), 345);
  EXPECT_EQ(o.max_connections, 77);
  EXPECT_EQ(o.upstream_ca_file, "/etc/vendor-ca.pem");
  EXPECT_EQ(o.vendor.max_json_depth, 78);
  EXPECT_EQ(o.max_response_bytes, 7900u);
  EXPECT_EQ(o.max_buffered_response_bytes, 8000u);
  EXPECT_EQ(o.max_response_head_bytes, 7800u);
  EXPECT_EQ(o.guaranteed_response_bytes, 300u);
  EXPECT_EQ(o.mapper.position_ratio_key, vendor::KeySpelling::kPlural);
  EXPECT_EQ(o.mapper.wheel_box_key, vendor::KeySpelling::kSingular);
  EXPECT_EQ(o.mapper.test_webhook_params, vendor::ParamsPlacement::kBody);
  EXPECT_THAT(o.mapper.inspection_id_pointers, ElementsAre("/a", "/b/c"));
  EXPECT_EQ(o.limits.max_urls, 7);
  EXPECT_EQ(o.limits.search_max_limit, 9);
  EXPECT_EQ(o.grpc_limits.max_receive_message_bytes, 70000);
  EXPECT_EQ(o.grpc_limits.max_concurrent_streams, 11);
  EXPECT_EQ(o.grpc_limits.keepalive_min_client_interval_ms, 1001);
  EXPECT_EQ(o.grpc_limits.keepalive_time_ms, 2002);
  EXPECT_EQ(o.grpc_limits.keepalive_timeout_ms, 3003);
  EXPECT_EQ(o.authz_refresh_interval, std::chrono::seconds(13));
  EXPECT_EQ(o.health_check_interval, std::chrono::milliseconds(1301));
  EXPECT_EQ(o.caller_limits.requests_per_second, 14);
  EXPECT_EQ(o.caller_limits.burst, 15);
  EXPECT_EQ(o.caller_limits.max_streams, 16);
  EXPECT_TRUE(o.reflection);
  EXPECT_EQ(o.admin_host, "127.0.0.3");
  EXPECT_EQ(o.admin_port, 6003);

  EXPECT_EQ(o.webhook.host, "::1");
  EXPECT_EQ(o.webhook.port, 6002);
  EXPECT_EQ(o.webhook.path, "/hooks");
  EXPECT_EQ(o.webhook.current_key, "webhook-key");
  EXPECT_EQ(o.webhook.limits.max_body_bytes, 100001u);
  EXPECT_EQ(Ms(o.webhook.limits.head_timeout), 1101);
  EXPECT_EQ(Ms(o.webhook.limits.keep_alive_timeout), 1102);
  EXPECT_EQ(o.webhook.limits.min_body_bytes_per_second, 1103u);
  EXPECT_EQ(Ms(o.webhook.limits.body_grace), 1104);
  EXPECT_EQ(Ms(o.webhook.limits.write_timeout), 1105);
  EXPECT_EQ(o.webhook.limits.max_head_bytes, 4096u);
  EXPECT_EQ(o.webhook.limits.max_header_count, 17u);
  EXPECT_EQ(o.webhook.limits.max_connections, 18u);
  EXPECT_EQ(o.webhook.limits.max_connections_per_client, 19u);
  EXPECT_EQ(o.webhook.limits.max_requests_in_flight, 20u);
  EXPECT_EQ(o.webhook.json_limits.max_depth, 21);
  EXPECT_EQ(o.webhook.json_limits.max_elements, 22);
  EXPECT_EQ(o.retention.dedupe_window, std::chrono::hours(23));
  EXPECT_EQ(o.webhook.threads, 3);
  EXPECT_EQ(o.webhook.event_name_pointer, "/e");
  EXPECT_EQ(o.webhook.inspection_id_pointer, "/i");
  EXPECT_EQ(o.webhook.token_id_pointer, "/t");
  EXPECT_EQ(o.webhook.vehicle_id_pointer, "/v");

  EXPECT_EQ(o.event_log_url, "sqlite:/tmp/elsewhere.db");
  EXPECT_EQ(o.retention.max_age, std::chrono::hours(25));
  EXPECT_EQ(o.retention.max_events, 26);
  EXPECT_EQ(o.stream_queue.max_events, 27u);
  EXPECT_EQ(o.stream_queue.max_bytes, 2800u);
  EXPECT_EQ(o.hub.catchup_events_per_turn, 29u);
  EXPECT_EQ(Ms(o.hub.catchup_idle_timeout), 3000);
  EXPECT_EQ(o.stream_slots.max_per_connection, 31);
  EXPECT_EQ(o.stream_slots.max_total, 32);
  EXPECT_EQ(o.token_watch.interval, absl::Milliseconds(3300));
  EXPECT_EQ(o.token_watch.max_backoff, absl::Milliseconds(3400));
  EXPECT_FALSE(o.reconcile.enabled);
  EXPECT_TRUE(o.webhook_less);
  EXPECT_EQ(o.reconcile.reconciler.after, absl::Milliseconds(3401));
  EXPECT_EQ(o.reconcile.reconciler.interval, absl::Milliseconds(3402));
  EXPECT_EQ(o.reconcile.reconciler.max_interval, absl::Milliseconds(3403));
  EXPECT_EQ(o.reconcile.reconciler.max_polls_per_minute, 3404);
  EXPECT_EQ(o.reconcile.reconciler.max_polls_per_item, 3408);
  EXPECT_EQ(o.reconcile.reconciler.max_unrecorded, 3409u);
  EXPECT_EQ(o.reconcile.reconciler.lease, absl::Milliseconds(3405));
  EXPECT_EQ(o.reconcile.reconciler.max_age, absl::Hours(3406));
  EXPECT_THAT(o.reconcile.reconciler.ready_pointers, ::testing::ElementsAre("/a", "/b"));
  EXPECT_EQ(o.reconcile.reconciler.scan_interval, absl::Milliseconds(3407));
  EXPECT_EQ(o.reconcile.ledger_url, "sqlite:/tmp/work.db");
  EXPECT_EQ(o.idempotency_ttl, absl::Hours(35));
  EXPECT_EQ(o.idempotency_memory_max_bytes, 3600000u);
  EXPECT_EQ(o.idempotency_store_url, "redis://127.0.0.1:1/2");
  EXPECT_EQ(o.retry.backoff.base, absl::Milliseconds(37));
  EXPECT_EQ(o.retry.backoff.cap, absl::Milliseconds(3800));
  EXPECT_EQ(o.retry.backoff.max_attempts, 4);
  EXPECT_EQ(o.retry.min_attempt_time, absl::Milliseconds(39));
  EXPECT_DOUBLE_EQ(o.retry_budget.ratio, 0.41);
  EXPECT_EQ(o.retry_budget.min_retries, 42);
  EXPECT_EQ(o.circuit_breaker.consecutive_failures, 43);
  EXPECT_DOUBLE_EQ(o.circuit_breaker.failure_ratio, 0.44);
  EXPECT_EQ(o.circuit_breaker.minimum_requests, 45);
  EXPECT_EQ(o.circuit_breaker.bucket_width * o.circuit_breaker.window_buckets,
            absl::Milliseconds(4600));
  EXPECT_EQ(o.circuit_breaker.open_duration, absl::Milliseconds(470));
  EXPECT_EQ(o.circuit_breaker.max_open_duration, absl::Milliseconds(4800));
  EXPECT_FALSE(o.cache.enabled);
  EXPECT_EQ(o.cache.max_bytes, 4900000u);
  EXPECT_EQ(o.cache.stale_if_error, absl::Milliseconds(5000));
  EXPECT_FALSE(o.cache.image_analysis);
  EXPECT_EQ(o.cache.image_analysis_ttl, absl::Milliseconds(5100));
}

// No webhook key: no key for the receiver (so it is not started, see event_pipeline.cc),
// whatever webhook.* says; and the image-analysis TTL left at 0 means each route's own.
TEST(ServerOptionsTest, WithoutAWebhookKeyTheReceiverIsNotConfigured) {
  auto config = config::LoadConfig({"--upstream-url=http://vendor.test",
                                    "--webapp-url=http://app.test", "--webhook-path=/elsewhere"},
                                   Env({{"INSPECTION_API_KEY", "vendor-key"}}));
  ASSERT_TRUE(config.ok()) << config.status();
  const server::GatewayServerOptions o = ServerOptions(*config);
  EXPECT_TRUE(o.webhook.current_key.empty());
  EXPECT_TRUE(o.webhook.previous_key.empty());
  EXPECT_TRUE(o.webhook.accounts.empty());
  EXPECT_FALSE(o.cache.image_analysis_ttl.has_value());
}

}  // namespace
}  // namespace inspection::app
