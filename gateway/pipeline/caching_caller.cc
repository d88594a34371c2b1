#include "gateway/pipeline/caching_caller.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "nlohmann/json.hpp"

namespace inspection::pipeline {
namespace {

// The vendor's failure as it travels through the fetcher to every coalesced caller: the
// VendorResult itself, typed, never re-encoded.
class CachedFailure final : public cache::FailureDetail {
 public:
  explicit CachedFailure(upstream::VendorResult result) : result(std::move(result)) {}
  const upstream::VendorResult result;
};

// The failure a fetcher result stands for: the vendor's, or (a fetch dropped unrun, a bug)
// the fetcher's own status as INTERNAL.
upstream::VendorResult FailureOf(const absl::Status& status,
                                 const std::shared_ptr<const cache::FailureDetail>& detail) {
  if (const auto* failure = dynamic_cast<const CachedFailure*>(detail.get()); failure != nullptr) {
    return failure->result;
  }
  upstream::VendorResult result;
  errors::ApiError error;
  error.code = status.code();
  error.message = std::string(status.message());
  error.reason = std::string(errors::kReasonInternal);
  result.error = std::move(error);
  return result;
}

// What glibc malloc takes for a request of `bytes`: an 8-byte header, rounded up to 16.
size_t Allocation(size_t bytes) { return (bytes + 8 + 15) / 16 * 16; }

size_t StringHeap(const std::string& text) {
  return text.capacity() > 15 ? Allocation(text.capacity() + 1) : 0;  // else stored inline
}

// The memory a parsed body holds (the shared tree and its control block), estimated from
// nlohmann::json's containers (std::map, std::vector, std::string) and glibc's allocation
// sizes. It is what the cache charges for keeping the tree next to the bytes, so that
// cache.max_bytes bounds both. Iterative: a body nested a million levels deep must not
// overflow the stack.
size_t JsonFootprint(const nlohmann::json& root) {
  size_t bytes = Allocation(sizeof(nlohmann::json) + 16);  // make_shared's block
  std::vector<const nlohmann::json*> pending = {&root};
  while (!pending.empty()) {
    const nlohmann::json& value = *pending.back();
    pending.pop_back();
    switch (value.type()) {
      case nlohmann::json::value_t::object: {
        const auto& object = value.get_ref<const nlohmann::json::object_t&>();
        bytes += Allocation(sizeof(object));
        for (const auto& [key, child] : object) {
          // A red-black tree node: four words of links and colour, then the pair.
          bytes += Allocation(32 + sizeof(nlohmann::json::object_t::value_type)) + StringHeap(key);
          pending.push_back(&child);
        }
        break;
      }
      case nlohmann::json::value_t::array: {
        const auto& array = value.get_ref<const nlohmann::json::array_t&>();
        bytes += Allocation(sizeof(array));
        if (array.capacity() > 0) bytes += Allocation(array.capacity() * sizeof(nlohmann::json));
        for (const nlohmann::json& child : array) pending.push_back(&child);
        break;
      }
      case nlohmann::json::value_t::string: {
        const auto& text = value.get_ref<const nlohmann::json::string_t&>();
        bytes += Allocation(sizeof(text)) + StringHeap(text);
        break;
      }
      case nlohmann::json::value_t::binary: {
        const auto& binary = value.get_ref<const nlohmann::json::binary_t&>();
        bytes += Allocation(sizeof(binary)) + Allocation(binary.capacity());
        break;
      }
      default:  // null, boolean, numbers: inside the value itself
        break;
    }
  }
  return bytes;
}

// A vendor answer as the cache keeps it: its status, its body as the vendor sent it and the
// body parsed, which every hit shares (none parses the bytes again).
class CachedAnswer final : public cache::CacheEntry {
 public:
  CachedAnswer(int status, std::string body, std::shared_ptr<const nlohmann::json> parsed,
               size_t parsed_bytes)
      : status(status),
        body(std::move(body)),
        parsed(std::move(parsed)),
        parsed_bytes_(parsed_bytes) {}
  // What it holds: itself (make_shared's block), the body as allocated (its capacity, which a
  // transport that grew it by doubling leaves up to twice its size) and the tree, so that
  // cache.max_bytes bounds all of it.
  size_t charge() const override {
    return Allocation(sizeof(CachedAnswer) + 16) + StringHeap(body) + parsed_bytes_;
  }

  const int status;
  const std::string body;
  const std::shared_ptr<const nlohmann::json> parsed;  // null for an empty body

 private:
  const size_t parsed_bytes_;
};

// A cached answer back into a result; a value the pipeline did not store (a bug) is an
// INTERNAL error, never a guess.
upstream::VendorResult AnswerOf(const cache::CachedValue& value) {
  const auto* answer = dynamic_cast<const CachedAnswer*>(value.get());
  if (answer == nullptr) {
    return FailureOf(absl::InternalError("the response cache holds an entry of another type"),
                     nullptr);
  }
  upstream::VendorResult result;
  result.response.status = answer->status;
  result.response.body = answer->body;
  result.body = answer->parsed;
  return result;
}

// The same request always yields the same bytes: parameters in order, body dumped with
// nlohmann's sorted keys. Each part is length-prefixed so no two requests collide.
std::string CanonicalRequest(const vendor::VendorRequest& request) {
  std::string out;
  auto add = [&out](std::string_view part) {
    out += std::to_string(part.size());
    out += ':';
    out.append(part.data(), part.size());
  };
  for (const auto& [name, value] : request.path_params) {
    add("p");
    add(name);
    add(value);
  }
  for (const auto& [name, value] : request.query) {
    add("q");
    add(name);
    add(value);
  }
  if (request.body.has_value()) {
    add("b");
    add(request.body->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  }
  return out;
}

// A route's cache tag template with `{name}` replaced by the request's path parameter
// `name` ("inspection:{inspectionId}" -> "inspection:<id>", i.e. cache::InspectionTag).
std::string ExpandTag(const std::string& tag, const vendor::VendorRequest& request) {
  std::string out = tag;
  for (const auto& [name, value] : request.path_params) {
    out = absl::StrReplaceAll(out, {{absl::StrCat("{", name, "}"), value}});
  }
  return out;
}

// What a failure may be replaced by a stale answer for: the vendor could not answer
// (down, slow, rate limiting us). Its answers about the request (4xx) are never hidden.
bool AllowsStale(absl::StatusCode code) {
  return code == absl::StatusCode::kUnavailable || code == absl::StatusCode::kDeadlineExceeded ||
         code == absl::StatusCode::kResourceExhausted;
}

}  // namespace

// One caller of Call on a cacheable route: answered once, by the fetch or by its deadline.
struct CachingCaller::Waiter {
  explicit Waiter(upstream::VendorCallback done_in) : done(std::move(done_in)) {}
  absl::Mutex mu;
  upstream::VendorCallback done ABSL_GUARDED_BY(mu);
  bool answered ABSL_GUARDED_BY(mu) = false;
  timers::Scheduler::TaskId timer ABSL_GUARDED_BY(mu) = 0;
};

CachingCaller::CachingCaller(upstream::VendorCaller* next, CachingOptions options)
    : next_(next),
      options_(std::move(options)),
      cache_(cache::CacheOptions{options_.max_bytes, options_.stale_if_error}),
      fetcher_(&cache_, options_.clock) {}

std::string CachingCaller::ScopeOf(const std::string& account) const {
  return options_.account_scope ? options_.account_scope(account) : account;
}

absl::Duration CachingCaller::TtlOf(const routes::Route& route) const {
  if (!options_.enabled || !route.cacheable) return absl::ZeroDuration();
  if (route.image_analysis) {
    if (!options_.image_analysis) return absl::ZeroDuration();
    if (options_.image_analysis_ttl.has_value()) return *options_.image_analysis_ttl;
  }
  return absl::FromChrono(route.cache_ttl);
}

namespace {

// What the cache keeps of a vendor call's result: the answer for `ttl`, or the failure (with
// whether it may be answered from a stale entry).
cache::FetchResult FetchResultOf(upstream::VendorResult result, absl::Duration ttl) {
  if (result.ok()) {
    const size_t parsed_bytes = result.body == nullptr ? 0 : JsonFootprint(*result.body);
    return cache::FetchResult::Success(std::make_shared<const CachedAnswer>(
                                           result.response.status, std::move(result.response.body),
                                           std::move(result.body), parsed_bytes),
                                       ttl);
  }
  const bool stale_ok = AllowsStale(result.error->code);
  absl::Status status(result.error->code, result.error->message);
  return cache::FetchResult::Failure(std::move(status), stale_ok,
                                     std::make_shared<const CachedFailure>(std::move(result)));
}

}  // namespace

void CachingCaller::Call(routes::RouteId route_id, const vendor::VendorRequest& request,
                         std::chrono::system_clock::time_point deadline,
                         const upstream::CallOptions& options, upstream::VendorCallback done) {
  const routes::Route& route = routes::GetRoute(route_id);
  if (!route.invalidates.empty()) {
    std::vector<std::string> tags;
    for (routes::RouteId other : route.invalidates) {
      tags.push_back(
          cache::RouteTag(ScopeOf(options.account), routes::GetRoute(other).metric_label));
    }
    CallAndInvalidate(route_id, request, deadline, options, std::move(done), std::move(tags));
    return;
  }
  const absl::Duration ttl = TtlOf(route);
  if (ttl <= absl::ZeroDuration()) {
    next_->Call(route_id, request, deadline, options, std::move(done));
    return;
  }

  cache::CacheKey key{ScopeOf(options.account), std::string(route.metric_label),
                      CanonicalRequest(request)};
  cache::GetOptions get;
  get.bypass = options.bypass_cache;
  for (const std::string& tag : route.cache_tags) get.tags.push_back(ExpandTag(tag, request));

  // Only the leader's fetch runs (a hit never gets here). It is shared, so it runs with the
  // later of the leader's deadline and the route's timeout: an impatient leader must not
  // fail its followers.
  // The vendor attempts of this call's own fetch (not of a fetch it joined), for its log line.
  auto attempts = std::make_shared<std::atomic<int>>(0);
  auto fetch = [this, route_id, request, deadline, timeout = route.timeout, options, ttl,
                attempts](cache::CachedFetcher::Complete complete) mutable {
    const auto fetch_deadline = std::max(deadline, std::chrono::system_clock::now() + timeout);
    next_->Call(
        route_id, request, fetch_deadline, options,
        [complete = std::move(complete), ttl, attempts](upstream::VendorResult result) mutable {
          attempts->store(result.attempts, std::memory_order_relaxed);
          std::move(complete)(FetchResultOf(std::move(result), ttl));
        });
  };
  RouteMetrics* route_metrics =
      options_.metrics == nullptr
          ? nullptr
          : &options_.metrics->ForRoute(static_cast<size_t>(route_id),
                                        options_.metrics->AccountIndex(options.account));
  const bool bypass = options.bypass_cache;
  auto waiter = std::make_shared<Waiter>(std::move(done));
  fetcher_.GetOrFetch(
      key, get, std::move(fetch),
      [this, waiter, route_metrics, bypass, attempts](cache::GetResult got) mutable {
        upstream::VendorResult result;
        if (got.ok()) {
          result = AnswerOf(got.value);
        } else {
          result = FailureOf(got.status, got.error_detail);
        }
        if (got.source != cache::Source::kFreshHit && !got.coalesced) {
          result.attempts = attempts->load(std::memory_order_relaxed);
        }
        switch (got.source) {
          case cache::Source::kFreshHit:
            result.cache = upstream::CacheStatus::kHit;
            if (route_metrics != nullptr) route_metrics->RecordCacheHit();
            break;
          case cache::Source::kStaleAfterError:
            result.cache = upstream::CacheStatus::kStale;
            result.stale_cause = FailureOf(got.stale_cause, got.error_detail).error->reason;
            if (route_metrics != nullptr) route_metrics->RecordCacheStaleServed();
            break;
          case cache::Source::kFetched:
            if (got.coalesced) {
              result.cache = upstream::CacheStatus::kCoalesced;
              if (route_metrics != nullptr) route_metrics->RecordCacheCoalesced();
            } else {
              result.cache = bypass ? upstream::CacheStatus::kBypass : upstream::CacheStatus::kMiss;
              if (route_metrics != nullptr) route_metrics->RecordCacheMiss();
            }
            break;
        }
        PublishGauges();
        Deliver(waiter, std::move(result));
      });

  // Still waiting (not a fresh hit): stop waiting at the caller's own deadline.
  if (options_.timers == nullptr || deadline == std::chrono::system_clock::time_point::max()) {
    return;
  }
  absl::MutexLock lock(&waiter->mu);
  if (waiter->answered) return;
  const absl::Duration left = absl::FromChrono(deadline - std::chrono::system_clock::now());
  // RunAfter never runs the task before it returns, so holding the waiter's lock is safe.
  waiter->timer = options_.timers->RunAfter(left, [this, waiter, route_id, route_metrics] {
    errors::ApiError error;
    error.code = absl::StatusCode::kDeadlineExceeded;
    error.reason = std::string(errors::kReasonCallerDeadlineExceeded);
    const std::string label(routes::GetRoute(route_id).metric_label);
    error.metadata["route"] = label;
    error.message = absl::StrCat(
        "the call's deadline passed while it waited for the vendor's answer to a call shared "
        "with identical requests (",
        label, "); that call goes on, and its answer will be cached for the next request");
    upstream::VendorResult result;
    result.error = std::move(error);
    if (route_metrics != nullptr) route_metrics->RecordCacheWaiterDeadline();
    Deliver(waiter, std::move(result));
  });
}

void CachingCaller::Deliver(const std::shared_ptr<Waiter>& waiter, upstream::VendorResult result) {
  upstream::VendorCallback done;
  timers::Scheduler::TaskId timer = 0;
  {
    absl::MutexLock lock(&waiter->mu);
    if (waiter->answered) return;  // the other of result and deadline came first
    waiter->answered = true;
    done = std::move(waiter->done);
    timer = waiter->timer;
  }
  if (timer != 0) options_.timers->Cancel(timer);
  std::move(done)(std::move(result));
}

void CachingCaller::CallAndInvalidate(routes::RouteId route, const vendor::VendorRequest& request,
                                      std::chrono::system_clock::time_point deadline,
                                      const upstream::CallOptions& options,
                                      upstream::VendorCallback done,
                                      std::vector<std::string> tags) {
  // Also when the write failed: a timeout or 5xx may still have changed the vendor's
  // configuration, and one extra read is cheaper than a wrong answer.
  next_->Call(route, request, deadline, options,
              [this, tags = std::move(tags),
               done = std::move(done)](upstream::VendorResult result) mutable {
                if (options_.enabled) {
                  for (const std::string& tag : tags) cache_.InvalidateTag(tag);
                  PublishGauges();
                }
                std::move(done)(std::move(result));
              });
}

void CachingCaller::OnInspectionEvent(const std::string& inspection_id) {
  if (!options_.enabled) return;
  if (!inspection_id.empty()) cache_.InvalidateTag(cache::InspectionTag(inspection_id));
  cache_.InvalidateTag(kSearchResultsTag);
  PublishGauges();
}

void CachingCaller::PublishGauges() {
  if (options_.metrics == nullptr) return;
  const cache::CacheStats stats = cache_.stats();
  absl::MutexLock lock(&metrics_mu_);
  if (stats.evictions > reported_evictions_) {
    options_.metrics->RecordCacheEvictions(stats.evictions - reported_evictions_);
    reported_evictions_ = stats.evictions;
  }
  options_.metrics->SetCacheBytes(stats.bytes);
}

}  // namespace inspection::pipeline
