#ifndef ADAPTERS_VENDOR_CODES_H_
#define ADAPTERS_VENDOR_CODES_H_

#include <string_view>

#include "inspection/v1/common.pb.h"

namespace inspection::vendor {

// Decoders for the vendor codes the spec leaves undecoded, per the shared
// reference/codes.md (next to the vendor spec). They are facts to decode with, not guarantees: an
// unknown code is reported as unknown (empty), never as an error. All functions are
// pure, allocation-free apart from the returned proto, and thread-safe.

// Splits a part code into a three-letter family and a location suffix.
// - `code` is always the input, unchanged.
// - `family` / `family_name` are set when the first three characters are a known family
//   (`PRT` -> `door`), even if the suffix is unknown.
// - `location` / `location_name` are set only when the whole remainder is a known
//   suffix (`AVD` -> `front right`); a bare family (`CPT`) has no location.
// - An unknown family leaves everything but `code` empty.
// Matching is exact and case-sensitive (the vendor writes codes in upper case).
inspection::v1::PartCode DecodePartCode(std::string_view code);

// The shot described by a numeric angle code 0..17 (`0` -> `front`,
// `1` -> `front, close inspection`, ...); empty for any other code.
std::string_view AngleCodeName(int code);

// The meaning of a damage severity `SEV0`..`SEV5` (`SEV3` -> `paint`; `SEV0` ->
// `unknown`); empty for any other string.
std::string_view SeverityName(std::string_view severity);

}  // namespace inspection::vendor

#endif  // ADAPTERS_VENDOR_CODES_H_
