#include "adapters/http/http_transport.h"

namespace inspection::http {

const char* TransportErrorName(TransportError error) {
  switch (error) {
    case TransportError::kNone:
      return "none";
    case TransportError::kConnect:
      return "connect";
    case TransportError::kTimeout:
      return "timeout";
    case TransportError::kSend:
      return "send";
    case TransportError::kReceive:
      return "receive";
    case TransportError::kOther:
      return "other";
  }
  return "other";
}

}  // namespace inspection::http
