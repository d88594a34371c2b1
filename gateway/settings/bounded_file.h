#ifndef INSPECTION_GATEWAY_SETTINGS_BOUNDED_FILE_H_
#define INSPECTION_GATEWAY_SETTINGS_BOUNDED_FILE_H_

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"

namespace inspection::settings {

// The most the gateway reads of one file it is pointed at. Anything past these is a mistake
// (a wrong path, /dev/zero, a log file), refused before it can exhaust memory. The bounds
// are in the README ("Configuration") and --help.
inline constexpr std::size_t kMaxConfigFileBytes = std::size_t{4} << 20;  // 4 MiB of JSON
// A secret file holds a line; a private key (grpc.tls.key_file) a PEM block of a few KiB
// (an RSA-8192 key is about 6.5 KiB).
inline constexpr std::size_t kMaxSecretFileBytes = std::size_t{64} << 10;  // 64 KiB
inline constexpr std::size_t kMaxKeyFileBytes = std::size_t{64} << 10;     // 64 KiB
// A certificate chain or CA bundle (grpc.tls.cert_file, client_ca_file: Mozilla's whole
// bundle is about 220 KiB) and the authorization policy (grpc.authz_policy_file).
inline constexpr std::size_t kMaxCertificateFileBytes = std::size_t{1} << 20;  // 1 MiB
inline constexpr std::size_t kMaxPolicyFileBytes = std::size_t{1} << 20;       // 1 MiB

// "4194304 bytes (4 MiB)", "65536 bytes (64 KiB)".
std::string ByteBound(std::size_t bytes);

// Reads a whole regular file of at most `max_bytes`. Anything else is an error, without
// waiting: a FIFO, a device or a socket ("not a regular file"; it is opened with O_NONBLOCK so
// a FIFO without a writer does not block the open), a larger file or one that grows past the
// bound while read (ResourceExhausted "larger than N bytes (...)"), or the OS's reason ("No
// such file or directory"). The messages never hold the path or the contents.
absl::StatusOr<std::string> ReadBoundedFile(const std::string& path, std::size_t max_bytes);

// Whether `status` is ReadBoundedFile's "larger than" error.
bool IsTooLarge(const absl::Status& status);

}  // namespace inspection::settings

#endif  // INSPECTION_GATEWAY_SETTINGS_BOUNDED_FILE_H_
