#include "gateway/server/vendor_stub.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "adapters/hashing/sha256.h"
#include "adapters/http/beast_transport.h"
#include "adapters/http/curl_transport.h"
#include "gateway/logging/log.h"

namespace inspection::server {
namespace {

// The cache scope of a vendor account: a hash of its upstream URL and API key (never the
// key itself), so accounts share no entry even when one key serves two upstreams.
std::string CacheScope(const std::string& base_url, const std::string& api_key) {
  return hashing::Sha256Hex(absl::StrCat(base_url, "\n", api_key)).substr(0, 32);
}

// Copies the limits both clients share from the options into `client`'s options.
template <class ClientOptions>
void SetResponseLimits(const GatewayServerOptions& options, ClientOptions& client) {
  client.connect_timeout = options.connect_timeout;
  client.ca_file = options.upstream_ca_file;
  client.max_response_bytes = options.max_response_bytes;
  client.max_response_head_bytes = options.max_response_head_bytes;
  client.max_response_header_count = options.max_response_header_count;
  client.max_buffered_response_bytes = options.max_buffered_response_bytes;
  client.guaranteed_response_bytes = options.guaranteed_response_bytes;
}

// Client, budget, breaker and retry loop of one account; `upstream_index` is its position
// in the metrics' `upstream` label values.
absl::StatusOr<std::unique_ptr<AccountPipeline>> MakeAccount(const GatewayServerOptions& options,
                                                             const VendorStubParts& parts,
                                                             std::string name,
                                                             upstream::VendorClientOptions vendor,
                                                             size_t upstream_index) {
  auto account = std::make_unique<AccountPipeline>();
  account->name = std::move(name);
  account->client = std::make_unique<upstream::VendorClient>(std::move(vendor), parts.transport);
  auto budget = resilience::RetryBudget::Create(options.retry_budget);
  if (!budget.ok()) return budget.status();
  account->budget = std::move(*budget);
  pipeline::PipelineMetrics* metrics = parts.metrics;
  auto breaker = resilience::CircuitBreaker::Create(
      options.circuit_breaker, options.retry.clock,
      [metrics, upstream_index](resilience::CircuitState, resilience::CircuitState to) {
        metrics->ForUpstream(upstream_index).RecordTransition(to);
      });
  if (!breaker.ok()) return breaker.status();
  account->breaker = std::move(*breaker);
  pipeline::RetryOptions retry = options.retry;
  retry.metrics = parts.metrics;
  retry.metrics_account = upstream_index;  // accounts and upstreams share their order
  account->retrying = std::make_unique<pipeline::RetryingCaller>(
      account->client.get(), std::move(retry), account->budget.get(), account->breaker.get(),
      parts.scheduler);
  return account;
}

}  // namespace

std::string UpstreamLabel(const std::string& account) {
  std::string label = absl::StrCat("vendor.", account);
  std::replace(label.begin(), label.end(), '-', '_');
  return label;
}

const AccountPipeline& VendorStub::Account(const std::string& name) const {
  for (const auto& account : accounts) {
    if (account->name == name) return *account;
  }
  std::fprintf(stderr, "GatewayServer: no vendor account named \"%s\"\n", name.c_str());
  std::abort();
}

HttpClientChoice ChooseHttpClient(const GatewayServerOptions& options,
                                  const char* (*getenv)(const char*)) {
  if (getenv == nullptr) getenv = [](const char* name) -> const char* { return std::getenv(name); };
  switch (options.http_client) {
    case VendorHttpClient::kBeast:
      return {VendorHttpClient::kBeast, "upstream.http_client is beast"};
    case VendorHttpClient::kCurl:
      return {VendorHttpClient::kCurl, "upstream.http_client is curl"};
    case VendorHttpClient::kAuto:
      break;
  }
  std::vector<std::string> urls = {options.vendor.base_url};
  for (const VendorAccountOptions& account : options.accounts) urls.push_back(account.base_url);
  for (const std::string& url : urls) {
    if (!absl::StartsWithIgnoreCase(url, "http://")) {
      return {VendorHttpClient::kCurl,
              "auto: an https:// vendor URL (HTTP/2 where the vendor offers it)"};
    }
  }
  for (const char* name : {"http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"}) {
    const char* value = getenv(name);
    if (value != nullptr && value[0] != '\0') {
      return {VendorHttpClient::kCurl, absl::StrCat("auto: ", name, " is set (a proxy)")};
    }
  }
  return {VendorHttpClient::kBeast, "auto: every vendor URL is http:// and no proxy is set"};
}

absl::StatusOr<std::shared_ptr<http::HttpTransport>> MakeTransport(
    const GatewayServerOptions& options) {
  if (options.transport != nullptr) return options.transport;
  const HttpClientChoice choice = ChooseHttpClient(options);
  logging::Info("vendor HTTP client",
                {{"client", choice.client == VendorHttpClient::kBeast ? "beast" : "curl"},
                 {"reason", choice.reason}});
  absl::StatusOr<std::unique_ptr<http::HttpTransport>> transport;
  if (choice.client == VendorHttpClient::kBeast) {
    http::BeastTransportOptions beast;
    SetResponseLimits(options, beast);
    beast.max_total_connections = static_cast<size_t>(options.max_connections);
    transport = http::BeastTransport::Create(beast);
  } else {
    http::CurlTransportOptions curl;
    SetResponseLimits(options, curl);
    curl.max_total_connections = options.max_connections;
    transport = http::CurlTransport::Create(curl);
  }
  if (!transport.ok()) return transport.status();
  return std::shared_ptr<http::HttpTransport>(std::move(*transport));
}

absl::StatusOr<VendorStub> MakeVendorStub(const GatewayServerOptions& options,
                                          const VendorStubParts& parts) {
  if (!resilience::BackoffPolicy::Create(options.retry.backoff).ok()) {
    return absl::InvalidArgumentError("invalid retry backoff settings");
  }
  VendorStub stub;
  upstream::VendorClientOptions default_vendor = options.vendor;
  default_vendor.spans = parts.spans;
  default_vendor.account_label = std::string(metrics::kDefaultAccountLabel);
  auto first = MakeAccount(options, parts, "", default_vendor, 0);
  if (!first.ok()) return first.status();
  stub.accounts.push_back(*std::move(first));
  std::map<std::string, std::string> scopes = {
      {"", CacheScope(options.vendor.base_url, options.vendor.api_key)}};
  for (size_t i = 0; i < options.accounts.size(); ++i) {
    const VendorAccountOptions& named = options.accounts[i];
    if (named.name.empty() || named.name == services::kDefaultAccountName ||
        scopes.count(named.name) > 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("vendor account names must be unique, non-empty and not \"default\": \"",
                       named.name, "\""));
    }
    upstream::VendorClientOptions vendor = default_vendor;
    vendor.base_url = named.base_url;
    vendor.api_key = named.api_key;
    vendor.account_label = named.name;
    auto account = MakeAccount(options, parts, named.name, std::move(vendor), i + 1);
    if (!account.ok()) return account.status();
    stub.accounts.push_back(*std::move(account));
    scopes[named.name] = CacheScope(named.base_url, named.api_key);
  }
  std::map<std::string, upstream::VendorCaller*> routed;
  for (const auto& account : stub.accounts) routed[account->name] = account->retrying.get();
  stub.router = std::make_unique<pipeline::AccountRouter>(std::move(routed));
  // The cache sits above the retry loop: a hit or a coalesced call costs no attempt, and
  // stale-if-error sees the final outcome of the retries. Entries are scoped by a hash of
  // the account's upstream and API key: two accounts never share one.
  pipeline::CachingOptions cache = options.cache;
  cache.metrics = parts.metrics;
  cache.clock = options.retry.clock;
  cache.timers = parts.scheduler;
  cache.account_scope = [scopes = std::move(scopes)](const std::string& account) {
    auto it = scopes.find(account);
    // The router refuses unknown accounts; their (failed) calls are never stored.
    return it == scopes.end() ? absl::StrCat("unknown:", account) : it->second;
  };
  stub.caching = std::make_unique<pipeline::CachingCaller>(stub.router.get(), std::move(cache));
  return stub;
}

}  // namespace inspection::server
