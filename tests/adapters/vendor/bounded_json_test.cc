// ParseBoundedJson: nlohmann's DOM, stopped at a depth or value-count limit while parsing.
#include "adapters/vendor/bounded_json.h"

#include <string>

#include <gtest/gtest.h>

namespace inspection::vendor {
namespace {

using nlohmann::json;

std::string Nested(int depth) { return std::string(depth, '[') + std::string(depth, ']'); }

TEST(BoundedJsonTest, ParsesWithinTheLimitsExactlyAsNlohmannDoes) {
  const std::string text = R"({"event":"createReport","n":[1,2.5,-3,true,null,"x"],"o":{}})";
  json parsed;
  ASSERT_EQ(ParseBoundedJson(text, JsonLimits{}, &parsed), BoundedParseResult::kOk);
  EXPECT_EQ(parsed, json::parse(text));
}

TEST(BoundedJsonTest, DepthIsCountedFromTheTopLevelContainer) {
  JsonLimits limits;
  limits.max_depth = 4;
  json parsed;
  EXPECT_EQ(ParseBoundedJson(Nested(4), limits, &parsed), BoundedParseResult::kOk);
  EXPECT_EQ(ParseBoundedJson(Nested(5), limits, &parsed), BoundedParseResult::kTooDeep);
  EXPECT_EQ(ParseBoundedJson(R"({"a":{"b":{"c":{"d":1}}}})", limits, &parsed),
            BoundedParseResult::kOk);
  EXPECT_EQ(ParseBoundedJson(R"({"a":{"b":{"c":{"d":{}}}}})", limits, &parsed),
            BoundedParseResult::kTooDeep);
}

TEST(BoundedJsonTest, AHugeNestingStopsAtTheLimitNotAtTheEnd) {
  // Unbalanced on purpose: the parse must stop at depth 65 long before it could see that
  // the text is not JSON.
  const std::string text(8 * 1024 * 1024, '[');
  json parsed;
  EXPECT_EQ(ParseBoundedJson(text, JsonLimits{}, &parsed), BoundedParseResult::kTooDeep);
}

TEST(BoundedJsonTest, ValuesAreCountedWhateverTheirKind) {
  JsonLimits limits;
  limits.max_elements = 5;  // the array itself and four items
  json parsed;
  EXPECT_EQ(ParseBoundedJson("[1,\"a\",null,{}]", limits, &parsed), BoundedParseResult::kOk);
  EXPECT_EQ(ParseBoundedJson("[1,\"a\",null,{},2]", limits, &parsed),
            BoundedParseResult::kTooManyElements);
  EXPECT_EQ(ParseBoundedJson(R"({"a":1,"b":2,"c":3,"d":4,"e":5})", limits, &parsed),
            BoundedParseResult::kTooManyElements);
}

TEST(BoundedJsonTest, InvalidTextIsInvalid) {
  json parsed;
  for (const char* text : {"", "{", "not json", "[1,]", "{\"a\":1} trailing", "\xff"}) {
    EXPECT_EQ(ParseBoundedJson(text, JsonLimits{}, &parsed), BoundedParseResult::kInvalid) << text;
  }
}

}  // namespace
}  // namespace inspection::vendor
