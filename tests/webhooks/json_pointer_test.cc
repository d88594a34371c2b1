#include "gateway/webhooks/json_pointer.h"

#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/status/status.h"
#include "nlohmann/json.hpp"

namespace inspection::webhooks {
namespace {

using nlohmann::json;

// The example document of RFC 6901 section 5.
const json& Rfc6901Document() {
  static const json* const document = new json(json::parse(R"({
      "foo": ["bar", "baz"], "": 0, "a/b": 1, "c%d": 2, "e^f": 3, "g|h": 4, "i\\j": 5,
      "k\"l": 6, " ": 7, "m~n": 8})"));
  return *document;
}

const json* Resolve(const std::string& pointer, const json& document = Rfc6901Document()) {
  absl::StatusOr<JsonPointer> parsed = JsonPointer::Parse(pointer);
  EXPECT_TRUE(parsed.ok()) << pointer << ": " << parsed.status();
  return parsed.ok() ? parsed->Resolve(document) : nullptr;
}

TEST(JsonPointerTest, ResolvesTheRfc6901Examples) {
  const json& document = Rfc6901Document();
  EXPECT_EQ(Resolve(""), &document);
  EXPECT_EQ(*Resolve("/foo"), json({"bar", "baz"}));
  EXPECT_EQ(*Resolve("/foo/0"), "bar");
  EXPECT_EQ(*Resolve("/"), 0);
  EXPECT_EQ(*Resolve("/a~1b"), 1);
  EXPECT_EQ(*Resolve("/c%d"), 2);
  EXPECT_EQ(*Resolve("/e^f"), 3);
  EXPECT_EQ(*Resolve("/g|h"), 4);
  EXPECT_EQ(*Resolve("/i\\j"), 5);
  EXPECT_EQ(*Resolve("/k\"l"), 6);
  EXPECT_EQ(*Resolve("/ "), 7);
  EXPECT_EQ(*Resolve("/m~0n"), 8);
}

TEST(JsonPointerTest, TildeEscapesDecodeInOrder) {
  const json document = json::parse(R"({"~1": "tilde-one", "/": "slash"})");
  EXPECT_EQ(*Resolve("/~01", document), "tilde-one");  // not "/"
  EXPECT_EQ(*Resolve("/~1", document), "slash");
}

TEST(JsonPointerTest, MissingValuesAreNullNotErrors) {
  EXPECT_EQ(Resolve("/nope"), nullptr);
  EXPECT_EQ(Resolve("/foo/2"), nullptr);   // out of range
  EXPECT_EQ(Resolve("/foo/-"), nullptr);   // past the end
  EXPECT_EQ(Resolve("/foo/01"), nullptr);  // leading zero
  EXPECT_EQ(Resolve("/foo/+1"), nullptr);
  EXPECT_EQ(Resolve("/foo/x"), nullptr);
  EXPECT_EQ(Resolve("/foo/99999999999999999999999"), nullptr);
  EXPECT_EQ(Resolve("/foo/0/deeper"), nullptr);  // into a string
  EXPECT_EQ(Resolve("//x"), nullptr);            // into the number at ""
}

TEST(JsonPointerTest, IdAtReadsStringsAndIntegersOnly) {
  const json document = json::parse(R"({"s": "insp-1", "u": 18446744073709551615, "i": -42,
                                        "f": 1.5, "n": null, "o": {"id": "x"}, "b": true})");
  const auto id_at = [&](const std::string& text) {
    absl::StatusOr<JsonPointer> pointer = JsonPointer::Parse(text);
    EXPECT_TRUE(pointer.ok()) << text;
    return pointer->IdAt(document);
  };
  EXPECT_EQ(id_at("/s"), "insp-1");
  EXPECT_EQ(id_at("/u"), "18446744073709551615");
  EXPECT_EQ(id_at("/i"), "-42");
  EXPECT_EQ(id_at("/f"), "");  // fractional: no id
  EXPECT_EQ(id_at("/n"), "");
  EXPECT_EQ(id_at("/o"), "");
  EXPECT_EQ(id_at("/b"), "");
  EXPECT_EQ(id_at("/missing"), "");
  EXPECT_EQ(id_at("/o/id"), "x");
}

TEST(JsonPointerTest, RejectsInvalidSyntax) {
  for (const char* text : {"event", "~0", "/a~", "/a~2", "/~x"}) {
    const absl::StatusOr<JsonPointer> parsed = JsonPointer::Parse(text);
    ASSERT_FALSE(parsed.ok()) << text;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(parsed.status().message()), ::testing::HasSubstr(text));
  }
}

}  // namespace
}  // namespace inspection::webhooks
