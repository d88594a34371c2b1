#include <gtest/gtest.h>

#include "adapters/eventlog/event_log.h"

namespace inspection::eventlog {
namespace {

TEST(CompareCursorsTest, SqliteCursorsOrderNumerically) {
  EXPECT_LT(*CompareCursors("s:9", "s:10"), 0);
  EXPECT_GT(*CompareCursors("s:10", "s:9"), 0);
  EXPECT_EQ(*CompareCursors("s:42", "s:42"), 0);
}

TEST(CompareCursorsTest, RedisIdsOrderByTimeThenSequence) {
  EXPECT_LT(*CompareCursors("1700000000000-5", "1700000000001-0"), 0);
  EXPECT_LT(*CompareCursors("1700000000000-5", "1700000000000-10"), 0);
  EXPECT_EQ(*CompareCursors("1-1", "1-1"), 0);
}

TEST(CompareCursorsTest, EmptySortsFirst) {
  EXPECT_LT(*CompareCursors("", "s:1"), 0);
  EXPECT_GT(*CompareCursors("1-0", ""), 0);
  EXPECT_EQ(*CompareCursors("", ""), 0);
}

TEST(CompareCursorsTest, MalformedOrMixedIsInvalid) {
  EXPECT_EQ(CompareCursors("x", "s:1").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CompareCursors("s:1", "1-1").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CompareCursors("s:-1", "s:1").status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace inspection::eventlog
