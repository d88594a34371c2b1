#ifndef GATEWAY_CACHE_CACHE_KEY_H_
#define GATEWAY_CACHE_CACHE_KEY_H_

// What identifies a cached vendor response, and the tags used to invalidate groups of them.
//
// A key has three parts, all of which must match for two requests to share an entry:
//   - the vendor account: a hash of the API key, never the key itself (keys live in memory
//     and in debug output, so a raw secret must not end up there). Two accounts never share
//     an entry, even for byte-identical requests, because the vendor answers per account.
//   - the route label (the route table's `metric_label`, e.g. "get_webhook_config").
//   - the canonical request bytes: the same request must always produce the same bytes
//     (e.g. deterministic proto serialization, or sorted parameters). For image analysis
//     this is the canonical (URL, parameters) pair.
//
// Tags are free-form strings attached to an entry at insertion; ResponseCache::InvalidateTag
// drops every entry carrying one. Use the helpers below so writers and invalidators agree on
// the spelling. Every entry is implicitly tagged with RouteTag(key.account, key.route).

#include <cstddef>
#include <string>
#include <string_view>

namespace inspection::cache {

struct CacheKey {
  std::string account;  // hash of the vendor API key
  std::string route;    // route label, e.g. "get_webhook_config"
  std::string request;  // canonical request bytes (may be binary)

  // A stable, unambiguous encoding of all three parts: each part is written as
  // "<decimal length>:<bytes>", so ("ab", "c") and ("a", "bc") never collide, whatever
  // bytes the parts contain. Stable across processes and versions of this code unless the
  // format is deliberately changed.
  std::string Encoded() const;

  // Bytes Encoded() returns, without building it.
  std::size_t EncodedSize() const;

  friend bool operator==(const CacheKey& a, const CacheKey& b) {
    return a.account == b.account && a.route == b.route && a.request == b.request;
  }
  friend bool operator!=(const CacheKey& a, const CacheKey& b) { return !(a == b); }
};

// "route:<len>:<account><route>": every entry of `route` for `account`. What a write
// invalidates, e.g. UpdateWebhookConfig -> RouteTag(account, "get_webhook_config").
std::string RouteTag(std::string_view account, std::string_view route);

// "inspection:<id>": entries about one inspection (its damages report, search pages listing
// it). Not scoped by account: inspection ids are the vendor's, and dropping another account's
// entry for the same id costs one extra vendor call, never a wrong answer.
std::string InspectionTag(std::string_view inspection_id);

}  // namespace inspection::cache

#endif  // GATEWAY_CACHE_CACHE_KEY_H_
