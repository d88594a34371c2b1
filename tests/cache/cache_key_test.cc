#include "gateway/cache/cache_key.h"

#include <string>

#include "gtest/gtest.h"

namespace inspection::cache {
namespace {

TEST(CacheKeyTest, EncodedIsLengthPrefixedAndStable) {
  const CacheKey key{"acct", "route", "req"};
  EXPECT_EQ(key.Encoded(), "4:acct5:route3:req");
  EXPECT_EQ(key.EncodedSize(), key.Encoded().size());
}

TEST(CacheKeyTest, PartBoundariesCannotCollide) {
  // Joined without lengths, both would read "abc" + "x" + "y".
  const CacheKey a{"ab", "cx", "y"};
  const CacheKey b{"a", "bcx", "y"};
  EXPECT_NE(a.Encoded(), b.Encoded());
  // A request containing what looks like an encoding of other parts still differs.
  const CacheKey c{"a", "b", "1:c"};
  const CacheKey d{"a", "b1:c", ""};
  EXPECT_NE(c.Encoded(), d.Encoded());
}

TEST(CacheKeyTest, EveryPartDistinguishesKeys) {
  const CacheKey base{"acct-1", "get_inspection", "id=7"};
  CacheKey other_account = base;
  other_account.account = "acct-2";
  CacheKey other_route = base;
  other_route.route = "get_damages_report";
  CacheKey other_request = base;
  other_request.request = "id=8";
  EXPECT_NE(base.Encoded(), other_account.Encoded());
  EXPECT_NE(base.Encoded(), other_route.Encoded());
  EXPECT_NE(base.Encoded(), other_request.Encoded());
  EXPECT_NE(base, other_account);
  EXPECT_EQ(base, CacheKey(base));
}

TEST(CacheKeyTest, BinaryRequestBytesArePreserved) {
  const std::string request("a\0b", 3);
  const CacheKey key{"x", "y", request};
  EXPECT_EQ(key.Encoded(), std::string("1:x1:y3:a\0b", 11));
  EXPECT_EQ(key.EncodedSize(), 11u);
}

TEST(CacheKeyTest, TagSpellings) {
  EXPECT_EQ(RouteTag("acct", "get_webhook_config"), "route:4:acctget_webhook_config");
  // The account's length keeps ("ab", "c") and ("a", "bc") apart.
  EXPECT_NE(RouteTag("ab", "c"), RouteTag("a", "bc"));
  EXPECT_EQ(InspectionTag("insp-42"), "inspection:insp-42");
}

}  // namespace
}  // namespace inspection::cache
