#ifndef TESTS_SUPPORT_RSS_BOUNDS_H_
#define TESTS_SUPPORT_RSS_BOUNDS_H_

#include <gtest/gtest.h>

// The hostile tests bound the memory an attack costs by the RSS it adds (VmRSS from /proc).
// That measures our code in the builds `make test` runs. Under a sanitizer it measures the
// sanitizer: AddressSanitizer gives every allocation redzones and keeps freed blocks in a
// quarantine (256 MiB by default) so that a use after free is caught, and ThreadSanitizer
// keeps shadow memory for every byte touched. `make test-sanitize` and `make test-tsan` run
// the same attacks and every other assertion of those tests, looking for memory errors and
// races; the RSS bounds are asserted by `make test` (BUILD.md, "Sanitizers").

extern "C" {
// Defined by the sanitizer runtimes only; null in a build without them.
void __asan_init() __attribute__((weak));
void __tsan_init() __attribute__((weak));
}

namespace inspection::testing {

// False in a sanitizer build (its runtime is linked in), where RSS bounds do not apply.
inline bool RssBoundsApply() { return __asan_init == nullptr && __tsan_init == nullptr; }

}  // namespace inspection::testing

// EXPECT_LT(growth, bound) where RSS bounds apply (RssBoundsApply); nothing under a
// sanitizer. Takes a message with << like EXPECT_LT.
#define EXPECT_RSS_GROWTH_LT(growth, bound)         \
  switch (0)                                        \
  case 0:                                           \
  default:                                          \
    if (!::inspection::testing::RssBoundsApply()) { \
    } else /* NOLINT(readability/braces) */         \
      EXPECT_LT(growth, bound)

#endif  // TESTS_SUPPORT_RSS_BOUNDS_H_
