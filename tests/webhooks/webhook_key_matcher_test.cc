#include "gateway/webhooks/webhook_key_matcher.h"

#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/status/status.h"

namespace inspection::webhooks {
namespace {

TEST(WebhookKeyMatcherTest, MatchesOnlyTheCurrentKeyWithoutRotation) {
  const absl::StatusOr<WebhookKeyMatcher> matcher = WebhookKeyMatcher::Create("secret-1", "");
  ASSERT_TRUE(matcher.ok());
  EXPECT_TRUE(matcher->Matches("secret-1"));
  EXPECT_FALSE(matcher->Matches(""));
  EXPECT_FALSE(matcher->Matches("secret-"));
  EXPECT_FALSE(matcher->Matches("secret-12"));
  EXPECT_FALSE(matcher->Matches("SECRET-1"));
  EXPECT_FALSE(matcher->Matches(std::string("secret-1\0", 9)));
}

TEST(WebhookKeyMatcherTest, MatchesBothKeysDuringRotation) {
  const absl::StatusOr<WebhookKeyMatcher> matcher =
      WebhookKeyMatcher::Create("secret-2", "secret-1");
  ASSERT_TRUE(matcher.ok());
  EXPECT_TRUE(matcher->Matches("secret-2"));
  EXPECT_TRUE(matcher->Matches("secret-1"));
  EXPECT_FALSE(matcher->Matches("secret-3"));
  EXPECT_FALSE(matcher->Matches(""));
}

TEST(WebhookKeyMatcherTest, RefusesToExistWithoutACurrentKey) {
  for (const std::string& previous : {std::string(""), std::string("old-secret")}) {
    const absl::StatusOr<WebhookKeyMatcher> matcher = WebhookKeyMatcher::Create("", previous);
    ASSERT_FALSE(matcher.ok());
    EXPECT_EQ(matcher.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(std::string(matcher.status().message()), ::testing::HasSubstr("webhook key"));
    EXPECT_THAT(std::string(matcher.status().message()),
                ::testing::Not(::testing::HasSubstr("old-secret")));
  }
}

}  // namespace
}  // namespace inspection::webhooks
