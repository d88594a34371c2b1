// The settings of the reconciler (ReconcilerOptions), declared beside it.

#ifndef GATEWAY_RECONCILE_RECONCILER_SETTINGS_H_
#define GATEWAY_RECONCILE_RECONCILER_SETTINGS_H_

#include "gateway/reconcile/reconciler.h"
#include "gateway/settings/setting.h"

namespace inspection::reconcile {

// The key of the lease, which the server checks against a poll's deadline.
inline constexpr char kLeaseKey[] = "reconcile.lease_ms";

// When and how often the reconciler polls, and what it forgets.
settings::Schema<ReconcilerOptions> ReconcilerSchema();

}  // namespace inspection::reconcile

#endif  // GATEWAY_RECONCILE_RECONCILER_SETTINGS_H_
