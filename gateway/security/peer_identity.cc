#include "gateway/security/peer_identity.h"

#include <vector>

#include <grpc/grpc_security_constants.h>

namespace inspection::security {
namespace {

std::vector<std::string> Values(const grpc::AuthContext& auth, const char* property) {
  std::vector<std::string> out;
  for (const grpc::string_ref& value : auth.FindPropertyValues(property)) {
    out.emplace_back(value.data(), value.size());
  }
  return out;
}

// gRPC's GetAuthPropertyValue: the value when there is exactly one, otherwise "".
std::string SingleValue(const grpc::AuthContext& auth, const char* property) {
  std::vector<std::string> values = Values(auth, property);
  return values.size() == 1 ? std::move(values.front()) : std::string();
}

}  // namespace

AuthzPeer PeerOf(const grpc::AuthContext* auth) {
  AuthzPeer peer;
  if (auth == nullptr) return peer;
  const std::string type = SingleValue(*auth, GRPC_TRANSPORT_SECURITY_TYPE_PROPERTY_NAME);
  peer.authenticated =
      type == GRPC_SSL_TRANSPORT_SECURITY_TYPE || type == GRPC_TLS_TRANSPORT_SECURITY_TYPE;
  peer.uri_sans = Values(*auth, GRPC_PEER_URI_PROPERTY_NAME);
  peer.dns_sans = Values(*auth, GRPC_PEER_DNS_PROPERTY_NAME);
  peer.subject = SingleValue(*auth, GRPC_X509_SUBJECT_PROPERTY_NAME);
  return peer;
}

std::string CallerIdentityOf(const AuthzPeer& peer) {
  if (!peer.authenticated) return "";
  if (!peer.uri_sans.empty()) return peer.uri_sans.front();
  if (!peer.dns_sans.empty()) return peer.dns_sans.front();
  return peer.subject;
}

}  // namespace inspection::security
