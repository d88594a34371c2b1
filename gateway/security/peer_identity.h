#ifndef GATEWAY_SECURITY_PEER_IDENTITY_H_
#define GATEWAY_SECURITY_PEER_IDENTITY_H_

#include <string>

#include <grpcpp/security/auth_context.h>

#include "gateway/security/authz_policy.h"

namespace inspection::security {

// The peer of a call as gRPC's authorization engine reads it from the auth context
// (EvaluateArgs::PerChannelArgs in gRPC's evaluate_args.cc): "transport_security_type"
// ("ssl" or "tls": authenticated), every "peer_uri" and "peer_dns" value (gRPC 1.51 fills
// them from the client certificate's URI and DNS SANs), and "x509_subject" (the subject in
// RFC 2253 form). A single-valued property present more than once counts as absent, as in
// gRPC. Null `auth` (no auth context): not authenticated.
AuthzPeer PeerOf(const grpc::AuthContext* auth);

// The identity the gateway names a caller by in logs, audit lines, spans and per-caller
// limits: the first URI SAN (the SPIFFE ID), else the first DNS SAN, else the whole
// subject ("CN=claims-api,O=corp"), the order in which the policy tries them; "" for a
// peer that is not authenticated or has no certificate. Never a bare common name: a
// certificate whose CN reads like another caller's SPIFFE ID is named "CN=spiffe://...",
// which no URI SAN can equal.
std::string CallerIdentityOf(const AuthzPeer& peer);

}  // namespace inspection::security

#endif  // GATEWAY_SECURITY_PEER_IDENTITY_H_
