#include "gateway/webhooks/webhook_receiver_settings.h"

#include <ratio>

namespace inspection::webhooks {

using settings::kDayMs;
using settings::kNoMax;

settings::Schema<WebhookReceiverOptions> WebhookReceiverSchema() {
  return {{
      settings::HostPort<WebhookReceiverOptions>(
          "webhook_addr", [](auto& o) -> auto& { return o.host; },
          [](auto& o) -> auto& { return o.port; },
          "Listen address of the webhook receiver (HTTP; started when a webhook key is set): an "
          "IP address or localhost, like grpc_addr."),
      settings::String<WebhookReceiverOptions>(
          kPathKey, [](auto& o) -> auto& { return o.path; }, settings::AbsolutePath, "PATH",
          "HTTP path of the webhook receiver."),
      settings::Integer<WebhookReceiverOptions>(
          "webhook.max_body_bytes", [](auto& o) -> auto& { return o.limits.max_body_bytes; }, 1,
          1 << 30, "BYTES", "Largest webhook body accepted (larger: 413)."),
      settings::Duration<std::milli, WebhookReceiverOptions>(
          "webhook.head_timeout_ms", [](auto& o) -> auto& { return o.limits.head_timeout; }, 1,
          kDayMs, "MS",
          "Time a client has to send a whole request head, counted from the connection (or, "
          "kept alive, from its next request's first byte), however slowly it trickles; then "
          "the connection is closed."),
      settings::Duration<std::milli, WebhookReceiverOptions>(
          "webhook.keep_alive_timeout_ms",
          [](auto& o) -> auto& { return o.limits.keep_alive_timeout; }, 1, kDayMs, "MS",
          "An idle kept-alive connection is closed after this (keep it above an ingress's "
          "upstream keep-alive timeout)."),
      settings::Integer<WebhookReceiverOptions>(
          "webhook.min_body_bytes_per_second",
          [](auto& o) -> auto& { return o.limits.min_body_bytes_per_second; }, 1, kNoMax, "BYTES",
          "Slowest average rate a webhook body may arrive at (after body_grace_ms); slower: "
          "408 and the connection ends."),
      settings::Duration<std::milli, WebhookReceiverOptions>(
          "webhook.body_grace_ms", [](auto& o) -> auto& { return o.limits.body_grace; }, 0, kDayMs,
          "MS", "Slack before the minimum body rate applies."),
      settings::Duration<std::milli, WebhookReceiverOptions>(
          "webhook.write_timeout_ms", [](auto& o) -> auto& { return o.limits.write_timeout; }, 1,
          kDayMs, "MS",
          "Time a client has to take an answer; a client that does not read is "
          "disconnected."),
      settings::Integer<WebhookReceiverOptions>(
          "webhook.max_head_bytes", [](auto& o) -> auto& { return o.limits.max_head_bytes; }, 256,
          1 << 20, "BYTES", "Request line and headers together; larger: 431."),
      settings::Integer<WebhookReceiverOptions>(
          "webhook.max_header_count", [](auto& o) -> auto& { return o.limits.max_header_count; }, 1,
          10000, "N", "Header lines of one request; more: 431."),
      settings::Integer<WebhookReceiverOptions>(
          "webhook.max_connections", [](auto& o) -> auto& { return o.limits.max_connections; }, 1,
          1000000, "N",
          "Open connections to the webhook port; past it an idle kept-alive connection is "
          "closed to make room, or the new one is answered 503 and closed at once."),
      settings::Integer<WebhookReceiverOptions>(
          "webhook.max_connections_per_client",
          [](auto& o) -> auto& { return o.limits.max_connections_per_client; }, 1, 1000000, "N",
          "Open connections from one client address; more: 503 and closed at once. Behind an "
          "ingress every connection comes from its address: raise it to its pool size."),
      settings::Integer<WebhookReceiverOptions>(
          "webhook.max_requests_in_flight",
          [](auto& o) -> auto& { return o.limits.max_requests_in_flight; }, 1, 1000000, "N",
          "Authenticated deliveries being read or stored at once; more: 503 with "
          "Retry-After before the body is read (bounds body memory to this times "
          "max_body_bytes)."),
      settings::Integer<WebhookReceiverOptions>(
          "webhook.max_json_depth", [](auto& o) -> auto& { return o.json_limits.max_depth; }, 1,
          10000, "N", "Nesting of objects and arrays in a webhook body; deeper: 400."),
      settings::Integer<WebhookReceiverOptions>(
          "webhook.max_json_elements", [](auto& o) -> auto& { return o.json_limits.max_elements; },
          1, 100000000, "N", "JSON values in a webhook body; more: 400."),
      settings::Integer<WebhookReceiverOptions>(
          "webhook.threads", [](auto& o) -> auto& { return o.threads; }, 1, 1024, "N",
          "Threads parsing and storing deliveries (sockets need none: an idle or slow "
          "connection costs no thread)."),
      settings::String<WebhookReceiverOptions>(
          "webhook.event_name_pointer", [](auto& o) -> auto& { return o.event_name_pointer; },
          settings::JsonPointer, "POINTER", "JSON pointer to the event name in a webhook body."),
      settings::String<WebhookReceiverOptions>(
          "webhook.inspection_id_pointer", [](auto& o) -> auto& { return o.inspection_id_pointer; },
          settings::JsonPointer, "POINTER", "JSON pointer to the inspection id in a webhook body."),
      settings::String<WebhookReceiverOptions>(
          "webhook.token_id_pointer", [](auto& o) -> auto& { return o.token_id_pointer; },
          settings::JsonPointer, "POINTER",
          "JSON pointer to the token id (uid) in a webhook body."),
      settings::String<WebhookReceiverOptions>(
          "webhook.vehicle_id_pointer", [](auto& o) -> auto& { return o.vehicle_id_pointer; },
          settings::JsonPointer, "POINTER", "JSON pointer to the vehicle id in a webhook body."),
  }};
}

}  // namespace inspection::webhooks
