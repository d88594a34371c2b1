#ifndef SANDBOX_EMULATOR_ADMIN_API_H_
#define SANDBOX_EMULATOR_ADMIN_API_H_

#include <string>
#include <vector>

#include "sandbox/clock.h"
#include "sandbox/emulator/reply.h"
#include "sandbox/emulator/sandbox_state.h"
#include "sandbox/faults/fault_injector.h"
#include "sandbox/webhooks/webhook_dispatcher.h"

namespace inspection::sandbox {

// The sandbox's own API under /_sandbox/: a development tool, with no API key, that plays
// the customer and drives the emulator. Never expose a sandbox to untrusted networks.
//
//   POST   /_sandbox/tokens/<uid>/<step>   step: open, start-shooting, finish-shooting,
//                                          fast-track, complete, chase-up, expire
//                                          -> the token status body; 404, 409 wrong order
//   GET    /_sandbox/clock                 -> {"now": iso, "offsetSeconds": n}
//   POST   /_sandbox/clock/advance         {"seconds": N >= 0} -> as GET /_sandbox/clock
//   GET    /_sandbox/faults                -> {"rules": [...]}
//   POST   /_sandbox/faults                one rule or an array (ParseFaultRules) -> rules
//   DELETE /_sandbox/faults                -> {"rules": []}
//   GET    /_sandbox/webhooks/deliveries   -> {"deliveries": [...], "pending": n}
//   GET    /_sandbox/state                 -> tokens, inspections, configs (debugging)
// Errors use the vendor endpoints' error body (reply.h).
struct AdminContext {
  SandboxState* state;
  SandboxClock* clock;
  FaultInjector* faults;
  WebhookDispatcher* webhooks;
};

// Handles one admin request; `path` starts with "/_sandbox". Events caused by a step are
// appended to `events` for the caller to enqueue.
Reply HandleAdminRequest(const AdminContext& context, const std::string& method,
                         const std::string& path, const std::string& body,
                         std::vector<WebhookEvent>* events);

}  // namespace inspection::sandbox

#endif  // SANDBOX_EMULATOR_ADMIN_API_H_
