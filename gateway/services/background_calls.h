#ifndef GATEWAY_SERVICES_BACKGROUND_CALLS_H_
#define GATEWAY_SERVICES_BACKGROUND_CALLS_H_

// The vendor calls no RPC waits for: the polls of the token watch (WatchTokenStatus) and of
// the reconciler. They go through the call core like the RPCs (the pipeline, a log line
// with `origin`, the drift metrics, the error mapping) but bypass the cache: a poll wants
// the vendor's current answer, and refreshes the cache.
//
// They live here, not in token_watch/ or reconcile/, because those sit below the services
// in the build's layers (the services hand their work to them); each receives its fetch as
// a plain function and never sees the call core.

#include <string>

#include "gateway/reconcile/reconciler.h"
#include "gateway/services/unary_call.h"
#include "gateway/token_watch/token_status_poller.h"

namespace inspection::services {

// WatchTokenStatus's poll of `account`: GetTokenStatus through the pipeline (its log line
// at debug level). An error is the one GetTokenStatus answers (details included): the
// watch ends with it. `deps` must outlive every call of the returned function.
token_watch::FetchStatus TokenStatusFetch(const CallDeps* deps, std::string account);

// The reconciler's poll of one inspection's damages report: GetDamagesReport, the body kept
// as JSON text (lossless: the reconciler appends it unchanged).
reconcile::FetchReport ReportFetch(const CallDeps* deps);

// The reconciler's poll of one token: GetTokenStatus, read as completed / expired / its
// inspection.
reconcile::FetchToken TokenFetch(const CallDeps* deps);

}  // namespace inspection::services

#endif  // GATEWAY_SERVICES_BACKGROUND_CALLS_H_
