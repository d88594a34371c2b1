// gateway/settings/setting.h: the helpers a component declares its keys with store into
// its own field types and show the value back in the unit of the key.
#include "gateway/settings/setting.h"

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace inspection::settings {
namespace {

using ::testing::HasSubstr;

struct Inner {
  std::chrono::milliseconds timeout{1500};
  absl::Duration max_age = absl::Hours(48);
  std::chrono::seconds refresh{60};
  double ratio = 0.2;
  double rate = 0;
  size_t bytes = 1024;
  std::string host = "0.0.0.0";
  int port = 8080;
  std::string url;
};

struct Outer {
  Inner inner;
  bool flag = false;
};

Schema<Inner> InnerSchema() {
  Schema<Inner> schema;
  schema.keys = {
      Duration<std::milli, Inner>(
          "inner.timeout_ms", [](auto& o) -> auto& { return o.timeout; }, 1, kDayMs, "MS", "t"),
      Duration<std::ratio<3600>, Inner>(
          "inner.max_age_hours", [](auto& o) -> auto& { return o.max_age; }, 1, 1000, "HOURS", "a"),
      Duration<std::ratio<1>, Inner>(
          "inner.refresh_seconds", [](auto& o) -> auto& { return o.refresh; }, 1, 86400, "SECONDS",
          "r"),
      Percent<Inner>(
          "inner.percent", [](auto& o) -> auto& { return o.ratio; }, 0, 100, "p"),
      Integer<Inner>(
          "inner.rate", [](auto& o) -> auto& { return o.rate; }, 0, 1000, "N", "rate"),
      Integer<Inner>(
          "inner.bytes", [](auto& o) -> auto& { return o.bytes; }, 1024, kNoMax, "BYTES", "b"),
      HostPort<Inner>(
          "inner.addr", [](auto& o) -> auto& { return o.host; },
          [](auto& o) -> auto& { return o.port; }, "addr"),
      UrlWithPassword(String<Inner>(
          "inner.url", [](auto& o) -> auto& { return o.url; }, OptionalPath, "URL", "u")),
  };
  schema.rules.push_back([](const Inner& o) {
    return o.refresh > o.timeout ? absl::OkStatus() : absl::InvalidArgumentError("refresh");
  });
  return schema;
}

const Setting<Outer>* Find(const Schema<Outer>& schema, const std::string& key) {
  for (const Setting<Outer>& setting : schema.keys) {
    if (setting.key == key) return &setting;
  }
  return nullptr;
}

TEST(SettingTest, ALiftedSchemaStoresIntoTheComponentsFieldsInTheirOwnTypes) {
  Schema<Outer> schema = Within<Outer>(
      InnerSchema(), [](auto& o) -> auto& { return o.inner; });
  schema.Add({{Bool<Outer>(
                  "flag", [](auto& o) -> auto& { return o.flag; }, "f")},
              {}});
  ASSERT_EQ(schema.keys.size(), 9u);
  ASSERT_EQ(schema.rules.size(), 1u);
  Outer o;
  auto store = [&](const std::string& key, const json& value) {
    const Setting<Outer>* setting = Find(schema, key);
    EXPECT_NE(setting, nullptr) << key;
    return setting == nullptr ? absl::NotFoundError(key) : setting->store(value, o);
  };
  ASSERT_TRUE(store("inner.timeout_ms", 250).ok());
  ASSERT_TRUE(store("inner.max_age_hours", 3).ok());
  ASSERT_TRUE(store("inner.refresh_seconds", 7).ok());
  ASSERT_TRUE(store("inner.percent", 35).ok());
  ASSERT_TRUE(store("inner.rate", 12).ok());
  ASSERT_TRUE(store("inner.addr", "[::1]:9000").ok());
  ASSERT_TRUE(store("flag", true).ok());
  EXPECT_EQ(o.inner.timeout, std::chrono::milliseconds(250));
  EXPECT_EQ(o.inner.max_age, absl::Hours(3));
  EXPECT_EQ(o.inner.refresh, std::chrono::seconds(7));
  EXPECT_DOUBLE_EQ(o.inner.ratio, 0.35);
  EXPECT_DOUBLE_EQ(o.inner.rate, 12);
  EXPECT_EQ(o.inner.host, "::1");
  EXPECT_EQ(o.inner.port, 9000);
  EXPECT_TRUE(o.flag);
  // Shown back in the key's unit and shape, as --print-config has it.
  EXPECT_EQ(Find(schema, "inner.timeout_ms")->show(o), 250);
  EXPECT_EQ(Find(schema, "inner.max_age_hours")->show(o), 3);
  EXPECT_EQ(Find(schema, "inner.refresh_seconds")->show(o), 7);
  EXPECT_EQ(Find(schema, "inner.percent")->show(o), 35);
  EXPECT_EQ(Find(schema, "inner.rate")->show(o).dump(), "12");  // an integer, not 12.0
  EXPECT_EQ(Find(schema, "inner.addr")->show(o), "[::1]:9000");
  EXPECT_TRUE(Find(schema, "inner.url")->url_may_hold_password);
  EXPECT_FALSE(Find(schema, "inner.addr")->url_may_hold_password);
  // The lifted rule sees the component's part.
  EXPECT_TRUE(schema.rules[0](o).ok());
  o.inner.refresh = std::chrono::seconds(0);
  EXPECT_FALSE(schema.rules[0](o).ok());
}

TEST(SettingTest, OutOfRangeAndMalformedValuesAreRefusedAndNothingIsStored) {
  Inner o;
  Schema<Inner> schema = InnerSchema();
  auto find = [&](const std::string& key) -> const Setting<Inner>& {
    for (const Setting<Inner>& s : schema.keys) {
      if (s.key == key) return s;
    }
    ADD_FAILURE() << key;
    return schema.keys.front();
  };
  absl::Status status = find("inner.timeout_ms").store(0, o);
  EXPECT_THAT(std::string(status.message()), HasSubstr("must be an integer in 1..86400000"));
  status = find("inner.bytes").store(json(std::uint64_t{1} << 63), o);
  EXPECT_THAT(std::string(status.message()), HasSubstr("must be an integer >= 1024"));
  status = find("inner.percent").store(101, o);
  EXPECT_FALSE(status.ok());
  status = find("inner.addr").store("no-port", o);
  EXPECT_FALSE(status.ok());
  EXPECT_EQ(o.timeout, std::chrono::milliseconds(1500));
  EXPECT_EQ(o.bytes, 1024u);
  EXPECT_DOUBLE_EQ(o.ratio, 0.2);
  EXPECT_EQ(o.host, "0.0.0.0");
  EXPECT_EQ(o.port, 8080);
}

}  // namespace
}  // namespace inspection::settings
