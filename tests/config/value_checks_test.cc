#include "gateway/settings/value_checks.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace inspection::settings {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(NormalizeBaseUrlTest, AcceptsAndNormalizes) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"https://vendor.example.com", "https://vendor.example.com"},
      {"https://vendor.example.com/", "https://vendor.example.com"},
      {"http://10.0.0.1:8080/api/v1/", "http://10.0.0.1:8080/api/v1"},
      {"https://vendor.example.com//", "https://vendor.example.com/"},  // Only one '/' stripped.
      {"HTTPS://Vendor.Example.com/Path", "https://Vendor.Example.com/Path"},
      {"http://[::1]:9000", "http://[::1]:9000"},
      {"http://[2001:db8::1]/x/", "http://[2001:db8::1]/x"},
      {"http://localhost", "http://localhost"},
  };
  for (const auto& [input, expected] : cases) {
    absl::StatusOr<std::string> url = NormalizeBaseUrl(input);
    ASSERT_TRUE(url.ok()) << input << ": " << url.status();
    EXPECT_EQ(*url, expected) << input;
  }
}

TEST(NormalizeBaseUrlTest, RejectsWithoutEchoingTheUrl) {
  for (const std::string input :
       {"", "vendor.example.com", "/relative", "ftp://vendor.example.com", "https://",
        "https:///path", "https://user:pa55word@vendor.example.com", "https://h/?token=pa55word",
        "https://h/#frag", "https://h:0", "https://h:65536", "https://h:", "https://h:x",
        "https://h x", "https://h\n", "https://[::1", "https://[zz]", "https://[::1]x",
        "https://bad!host"}) {
    absl::StatusOr<std::string> url = NormalizeBaseUrl(input);
    EXPECT_FALSE(url.ok()) << input;
    EXPECT_THAT(std::string(url.status().message()),
                AllOf(HasSubstr("http"), Not(HasSubstr("pa55word"))))
        << input;
  }
}

TEST(SplitHostPortTest, HostWithoutBracketsAndPort) {
  EXPECT_EQ(SplitHostPort("0.0.0.0:9464").host, "0.0.0.0");
  EXPECT_EQ(SplitHostPort("0.0.0.0:9464").port, 9464);
  EXPECT_EQ(SplitHostPort("[::1]:6002").host, "::1");
  EXPECT_EQ(SplitHostPort("[::1]:6002").port, 6002);
  EXPECT_EQ(SplitHostPort("gateway.internal:0").host, "gateway.internal");
  EXPECT_EQ(SplitHostPort("gateway.internal:0").port, 0);
}

TEST(IsLoopbackHostPortTest, OnlyAddressesThisMachineAloneReaches) {
  for (const char* addr : {"127.0.0.1:50051", "127.1.2.3:1", "[::1]:50051", "localhost:9"}) {
    EXPECT_TRUE(IsLoopbackHostPort(addr)) << addr;
  }
  for (const char* addr : {"0.0.0.0:50051", "[::]:50051", "10.0.0.5:50051", "gateway:50051",
                           "128.0.0.1:1", "[2001:db8::1]:50051"}) {
    EXPECT_FALSE(IsLoopbackHostPort(addr)) << addr;
  }
}

TEST(CheckHostPortTest, Accepts) {
  for (const char* addr :
       {"0.0.0.0:50051", "127.0.0.1:0", "localhost:65535", "[::1]:8080", "[::]:1",
        "[::ffff:10.0.0.1]:80", "255.255.255.255:1", "[2001:db8::1]:443"}) {
    EXPECT_TRUE(CheckHostPort(addr).ok()) << addr << ": " << CheckHostPort(addr);
  }
}

TEST(CheckHostPortTest, Rejects) {
  for (const char* addr :
       {"", "0.0.0.0", ":8080", "host:", "host:65536", "host:-1", "host:+1", "host:123456",
        "::1:80", "[::1]", "[::1]80", "[]:80", "[zz]:80", "bad host:80", "host:80x"}) {
    EXPECT_FALSE(CheckHostPort(addr).ok()) << addr;
  }
}

// A listener binds an address: a host name other than localhost could never be bound (the
// admin and webhook listeners refused it only when they started).
TEST(CheckHostPortTest, RejectsHostNamesAndMalformedIpAddresses) {
  for (const char* addr :
       {"my-host.internal:9464", "gateway:50051", "LOCALHOST:1", "localhost.:1", "256.0.0.1:80",
        "1.2.3:80", "1.2.3.4.5:80", "01.2.3.4:80", "1.2.3.04:80", "0x7f.0.0.1:80",
        "[fe80::1%eth0]:80", "[1:2:3:4:5:6:7:8:9]:80", "[::1::2]:80", "[127.0.0.1]:80"}) {
    const absl::Status status = CheckHostPort(addr);
    EXPECT_FALSE(status.ok()) << addr;
    EXPECT_THAT(std::string(status.message()),
                AllOf(HasSubstr("an IPv4 address, a bracketed IPv6 address ([::1]) or localhost"),
                      HasSubstr("0..65535")))
        << addr;
  }
}

TEST(ListenHostsOverlapTest, SameAddressLoopbackAndWildcards) {
  for (const auto& [a, b] :
       std::vector<std::pair<std::string, std::string>>{{"127.0.0.1", "127.0.0.1"},
                                                        {"::1", "0:0::1"},
                                                        {"0.0.0.0", "10.0.0.1"},
                                                        {"::", "10.0.0.1"},
                                                        {"::", "::1"},
                                                        {"::", "0.0.0.0"},
                                                        {"localhost", "127.0.0.1"},
                                                        {"localhost", "::1"},
                                                        {"::ffff:10.0.0.1", "10.0.0.1"},
                                                        {"0.0.0.0", "localhost"}}) {
    EXPECT_TRUE(ListenHostsOverlap(a, b)) << a << " " << b;
    EXPECT_TRUE(ListenHostsOverlap(b, a)) << b << " " << a;
  }
  for (const auto& [a, b] : std::vector<std::pair<std::string, std::string>>{
           {"127.0.0.1", "127.0.0.2"}, {"0.0.0.0", "::1"}, {"::1", "::2"}, {"10.0.0.1", "::1"}}) {
    EXPECT_FALSE(ListenHostsOverlap(a, b)) << a << " " << b;
    EXPECT_FALSE(ListenHostsOverlap(b, a)) << b << " " << a;
  }
}

TEST(CheckJsonPointerTest, AcceptsAndRejects) {
  for (const char* pointer : {"/", "/a", "/a/b", "/a~0b", "/a~1b", "/0", "/a b"}) {
    EXPECT_TRUE(CheckJsonPointer(pointer).ok()) << pointer;
  }
  for (const char* pointer : {"", "a", "a/b", "/a~", "/a~2", "#/a"}) {
    EXPECT_FALSE(CheckJsonPointer(pointer).ok()) << pointer;
  }
}

TEST(ClosestMatchTest, SuggestsOnlyPlausibleTypos) {
  const std::vector<std::string> keys = {"upstream.timeout_ms", "upstream.connect_timeout_ms",
                                         "grpc_addr", "log.level"};
  EXPECT_EQ(ClosestMatch("upstream.timout_ms", keys), "upstream.timeout_ms");
  EXPECT_EQ(ClosestMatch("grpc_adr", keys), "grpc_addr");
  EXPECT_EQ(ClosestMatch("log.levl", keys), "log.level");
  EXPECT_EQ(ClosestMatch("completely_different", keys), "");
  EXPECT_EQ(ClosestMatch("x", {}), "");
}

TEST(ClosestMatchTest, NoSuggestionForANameLongerThanTheBound) {
  const std::string key(100, 'k');
  EXPECT_EQ(ClosestMatch(key + "x", {key}), key);
  const std::string long_key(kMaxSuggestedNameBytes, 'k');
  EXPECT_EQ(ClosestMatch(long_key + "x", {long_key}), "");
}

TEST(ShowTest, NamesValuesAndPathsAreEscapedAndCut) {
  EXPECT_EQ(ShowName("upstream.timeout_ms"), "upstream.timeout_ms");
  EXPECT_EQ(ShowName("pre prod"), "\"pre prod\"");
  EXPECT_EQ(ShowName("a\x1b[2J\n\"\\\x7f\xc3\xa9"), "\"a\\u001b[2J\\n\\\"\\\\\\u007f\\xc3\\xa9\"");
  EXPECT_EQ(ShowName(std::string(kMaxShownNameBytes, 'n')), std::string(kMaxShownNameBytes, 'n'));
  EXPECT_EQ(ShowName(std::string(kMaxShownNameBytes + 1, 'n')),
            std::string(kMaxShownNameBytes, 'n') + "\xe2\x80\xa6");
  EXPECT_LE(ShowName(std::string(1000, '\x01')).size(), kMaxShownNameBytes + 2 + 3);

  EXPECT_EQ(ShowValue("Both"), "\"Both\"");
  EXPECT_EQ(ShowValue(std::string(5 << 20, 'v')),
            "\"" + std::string(kMaxShownValueBytes, 'v') + "\xe2\x80\xa6\"");

  EXPECT_EQ(ShowPath("/run/secrets/api key"), "/run/secrets/api key");
  EXPECT_EQ(ShowPath("/tmp/\x1b[2J"), "\"/tmp/\\u001b[2J\"");
  EXPECT_EQ(ShowPath(std::string(5 << 20, 'p')),
            std::string(kMaxShownPathBytes, 'p') + "\xe2\x80\xa6");
}

TEST(CheckTextTest, RefusesControlCharactersAndInvalidUtf8WithoutEcho) {
  for (const std::string text : {"", "/run/secrets/key", "caf\xc3\xa9", "\xe2\x82\xac 5",
                                 "\xf0\x9f\x98\x80", "\xf4\x8f\xbf\xbf", "\xed\x9f\xbf"}) {
    EXPECT_TRUE(CheckText(text).ok()) << text << ": " << CheckText(text);
  }
  for (const std::string text :
       {std::string("MARK\0", 5), std::string("MARK\x01"), std::string("MARK\t"),
        std::string("MARK\n"), std::string("MARK\x1f"), std::string("MARK\x7f")}) {
    const absl::Status status = CheckText(text);
    EXPECT_FALSE(status.ok());
    EXPECT_THAT(
        std::string(status.message()),
        AllOf(HasSubstr("control character"), HasSubstr("at byte 4"), Not(HasSubstr("MARK"))));
  }
  for (const std::string text :
       {"MARK\x80", "MARK\xc3", "MARK\xc3(", "MARK\xc0\xaf", "MARK\xe0\x80\xaf", "MARK\xed\xa0\x80",
        "MARK\xf4\x90\x80\x80", "MARK\xf5\x80\x80\x80", "MARK\xff", "MARK\xe2\x82"}) {
    const absl::Status status = CheckText(text);
    EXPECT_FALSE(status.ok()) << text;
    EXPECT_THAT(
        std::string(status.message()),
        AllOf(HasSubstr("not valid UTF-8"), HasSubstr("at byte 4"), Not(HasSubstr("MARK"))));
  }
}

}  // namespace
}  // namespace inspection::settings
