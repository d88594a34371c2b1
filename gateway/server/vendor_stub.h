#ifndef GATEWAY_SERVER_VENDOR_STUB_H_
#define GATEWAY_SERVER_VENDOR_STUB_H_

// The decorated vendor stub: the one place the call pipeline is composed. Per vendor
// account, a VendorClient (HTTP + codec) under a retry loop with its circuit breaker and
// retry budget; an account router over those; the response cache over the router.
// Idempotency keys sit above it, in the call core (services/unary_call.h).

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "adapters/http/http_transport.h"
#include "gateway/pipeline/account_router.h"
#include "gateway/pipeline/caching_caller.h"
#include "gateway/pipeline/pipeline_metrics.h"
#include "gateway/pipeline/retrying_caller.h"
#include "gateway/server/server_options.h"
#include "gateway/timers/scheduler.h"
#include "gateway/token_watch/token_status_poller.h"
#include "gateway/tracing/span.h"

namespace inspection::server {

// The part of the pipeline that is per vendor account: below the cache, which is shared and
// scoped by each account's API key hash.
struct AccountPipeline {
  std::string name;  // "" for the default account
  std::unique_ptr<upstream::VendorClient> client;
  std::unique_ptr<resilience::RetryBudget> budget;
  std::unique_ptr<resilience::CircuitBreaker> breaker;
  std::unique_ptr<pipeline::RetryingCaller> retrying;
  // WatchTokenStatus's poller of this account; set once the services' dependencies exist
  // (its polls go through the call core).
  std::unique_ptr<token_watch::TokenStatusPoller> poller;
};

struct VendorStub {
  // The default account first, then the named ones in configuration order (the order of
  // the metrics' `upstream` label values).
  std::vector<std::unique_ptr<AccountPipeline>> accounts;
  std::unique_ptr<pipeline::AccountRouter> router;
  // The outermost caller: what every RPC and background call goes through.
  std::unique_ptr<pipeline::CachingCaller> caching;

  // The account named `name` ("" = the default one); aborts when there is none (the
  // accessors that use it take configured names only).
  const AccountPipeline& Account(const std::string& name) const;
};

// What the stub is built on; each must outlive it.
struct VendorStubParts {
  http::HttpTransport* transport = nullptr;
  pipeline::PipelineMetrics* metrics = nullptr;
  timers::TimerThreadScheduler* scheduler = nullptr;
  tracing::SpanSink* spans = nullptr;  // null: no spans
};

// The transport `options.http_client` names (ChooseHttpClient), or the injected one.
absl::StatusOr<std::shared_ptr<http::HttpTransport>> MakeTransport(
    const GatewayServerOptions& options);

// Builds the stub for the default account and every named one. Fails on an invalid retry,
// budget or breaker setting, or a duplicate, empty or "default" account name.
absl::StatusOr<VendorStub> MakeVendorStub(const GatewayServerOptions& options,
                                          const VendorStubParts& parts);

// The `upstream` label of a named account's breaker: "vendor.<name>", '-' shown as '_'
// (label values are [A-Za-z0-9_.], which keeps ids such as UUIDs out of them). Two names
// differing only there are refused by PipelineMetrics::Create as a duplicate label.
std::string UpstreamLabel(const std::string& account);

}  // namespace inspection::server

#endif  // GATEWAY_SERVER_VENDOR_STUB_H_
