#ifndef SANDBOX_ANALYSIS_LICENCE_PLATE_H_
#define SANDBOX_ANALYSIS_LICENCE_PLATE_H_

#include <string>
#include <vector>

namespace inspection::sandbox {

// The licence plate the sandbox "reads" on a vehicle photographed in `urls` (the spec
// says visible plates are included in damage results). A URL that carries
// `plate=<PLATE>` or `plate-<PLATE>` (letters, digits and dashes, 4-12 characters,
// upper-cased) shows that plate, so a user can choose it and then search for it;
// otherwise a French-style plate `AB-123-CD` derived from the first URL's hash.
std::string PlateForImages(const std::vector<std::string>& urls);

}  // namespace inspection::sandbox

#endif  // SANDBOX_ANALYSIS_LICENCE_PLATE_H_
