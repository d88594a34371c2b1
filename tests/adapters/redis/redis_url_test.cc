#include "adapters/redis/redis_url.h"

#include <string>

#include <gtest/gtest.h>

#include "absl/status/status.h"

namespace inspection::redis {
namespace {

TEST(RedisUrlTest, FullUrl) {
  auto url = ParseRedisUrl("redis://:s3cret@redis.internal:6380/2?stream=prod:events");
  ASSERT_TRUE(url.ok()) << url.status();
  EXPECT_EQ(url->host, "redis.internal");
  EXPECT_EQ(url->port, 6380);
  EXPECT_EQ(url->db, 2);
  EXPECT_EQ(url->user, "");
  EXPECT_EQ(url->password, "s3cret");
  EXPECT_EQ(url->stream, "prod:events");
  EXPECT_EQ(url->Describe(), "redis://redis.internal:6380/2?stream=prod:events");
}

TEST(RedisUrlTest, Defaults) {
  auto url = ParseRedisUrl("redis://localhost");
  ASSERT_TRUE(url.ok()) << url.status();
  EXPECT_EQ(url->host, "localhost");
  EXPECT_EQ(url->port, 6379);
  EXPECT_EQ(url->db, 0);
  EXPECT_EQ(url->password, "");
  EXPECT_EQ(url->stream, "inspection:events");
  EXPECT_EQ(url->Describe(), "redis://localhost:6379/0?stream=inspection:events");

  auto with_port = ParseRedisUrl("redis://127.0.0.1:7000/");
  ASSERT_TRUE(with_port.ok()) << with_port.status();
  EXPECT_EQ(with_port->port, 7000);
  EXPECT_EQ(with_port->db, 0);
  EXPECT_TRUE(ParseRedisUrl("redis://127.0.0.1:7000?stream=s").ok());
}

TEST(RedisUrlTest, UserPasswordAndPercentEncoding) {
  auto url = ParseRedisUrl("redis://gateway:p%40ss%2Fword@h:1/0?stream=a%26b");
  ASSERT_TRUE(url.ok()) << url.status();
  EXPECT_EQ(url->user, "gateway");
  EXPECT_EQ(url->password, "p@ss/word");
  EXPECT_EQ(url->stream, "a&b");
}

TEST(RedisUrlTest, RawReservedCharactersInThePasswordEndAtTheLastAt) {
  auto url = ParseRedisUrl("redis://:ab/c?d@e#f@h:1/3");
  ASSERT_TRUE(url.ok()) << url.status();
  EXPECT_EQ(url->password, "ab/c?d@e#f");
  EXPECT_EQ(url->host, "h");
  EXPECT_EQ(url->db, 3);
}

TEST(RedisUrlTest, Ipv6Host) {
  auto url = ParseRedisUrl("redis://[::1]:6390/1");
  ASSERT_TRUE(url.ok()) << url.status();
  EXPECT_EQ(url->host, "::1");
  EXPECT_EQ(url->port, 6390);
  EXPECT_EQ(url->Describe(), "redis://[::1]:6390/1?stream=inspection:events");
}

struct BadUrl {
  const char* url;
  const char* complaint;  // a part of the message naming what is wrong
};

class RedisBadUrlTest : public ::testing::TestWithParam<BadUrl> {};

TEST_P(RedisBadUrlTest, IsInvalidArgumentNamingTheProblemWithoutThePassword) {
  auto url = ParseRedisUrl(GetParam().url);
  ASSERT_FALSE(url.ok()) << GetParam().url;
  EXPECT_EQ(url.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string message(url.status().message());
  EXPECT_NE(message.find(GetParam().complaint), std::string::npos) << message;
  EXPECT_EQ(message.find("hunter2"), std::string::npos) << message;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, RedisBadUrlTest,
    ::testing::Values(
        BadUrl{"http://:hunter2@h:1", "must start with redis://"},
        BadUrl{"h:1", "must start with redis://"}, BadUrl{"rediss://:hunter2@h:1", "TLS"},
        BadUrl{"redis://:hunter2@", "host is missing"},
        BadUrl{"redis://:hunter2@:6379", "host is missing"}, BadUrl{"redis://:hunter2@h:0", "port"},
        BadUrl{"redis://:hunter2@h:65536", "port"}, BadUrl{"redis://:hunter2@h:", "port"},
        BadUrl{"redis://:hunter2@h:12ab", "port"}, BadUrl{"redis://:hunter2@h:1/x", "db"},
        BadUrl{"redis://:hunter2@h:1/-1", "db"},
        BadUrl{"redis://:hunter2@h:1/0?stream=", "stream name is empty"},
        BadUrl{"redis://:hunter2@h:1/0?strem=x", "unknown query parameter"},
        BadUrl{"redis://:hunter2@h:1/0?stream=a&stream=b", "twice"},
        BadUrl{"redis://:hunter2@h:1/0?stream=a%zz", "stream name"},
        BadUrl{"redis://:hunter2@h:1/0#frag", "fragment"},
        BadUrl{"redis://hunter2@h:1", "credentials"},
        BadUrl{"redis://user:@h:1", "password after ':' is empty"},
        BadUrl{"redis://:hunter2%4@h:1", "password has a malformed"},
        BadUrl{"redis://:hunter2@[::1:1", "closing ']'"},
        BadUrl{"redis://:hunter2@h st:1", "host"}));

TEST(RedisUrlTest, DescribeNeverShowsCredentials) {
  auto url = ParseRedisUrl("redis://admin:hunter2@h:1/0?stream=s");
  ASSERT_TRUE(url.ok()) << url.status();
  EXPECT_EQ(url->Describe(), "redis://h:1/0?stream=s");
}

TEST(RedisUrlTest, SentinelUrlNamesTheSentinelsAndThePrimary) {
  auto url = ParseRedisUrl(
      "redis+sentinel://app:p%40ss@s1.internal:26380,s2.internal,[::1]:26381/mymaster/3"
      "?stream=prod:events");
  ASSERT_TRUE(url.ok()) << url.status();
  ASSERT_TRUE(url->uses_sentinels());
  ASSERT_EQ(url->sentinels.size(), 3u);
  EXPECT_EQ(url->sentinels[0].host, "s1.internal");
  EXPECT_EQ(url->sentinels[0].port, 26380);
  EXPECT_EQ(url->sentinels[1].port, kDefaultSentinelPort);  // no port: 26379
  EXPECT_EQ(url->sentinels[2].host, "::1");
  EXPECT_EQ(url->master_name, "mymaster");
  EXPECT_EQ(url->db, 3);
  EXPECT_EQ(url->user, "app");
  EXPECT_EQ(url->password, "p@ss");
  EXPECT_EQ(url->stream, "prod:events");
  EXPECT_EQ(url->Describe(),
            "redis+sentinel://s1.internal:26380,s2.internal:26379,[::1]:26381/mymaster/3"
            "?stream=prod:events");
  EXPECT_EQ(std::string(RedisUrlPassword(
                "redis+sentinel://app:p%40ss@s1.internal:26380,s2.internal/mymaster")),
            "p%40ss");
  EXPECT_TRUE(IsRedisUrl("redis+sentinel://s1/m"));
  EXPECT_TRUE(IsRedisUrl("redis://h"));
  EXPECT_FALSE(IsRedisUrl("rediss://h"));

  auto plain = ParseRedisUrl("redis+sentinel://s1/primary-1");
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->db, 0);
  EXPECT_EQ(plain->master_name, "primary-1");
}

TEST(RedisUrlTest, BadSentinelUrlsAreRefusedWithoutEchoingThePassword) {
  const std::string many = [] {
    std::string list;
    for (int i = 0; i < 17; ++i) list += (i ? ",h" : "h") + std::to_string(i);
    return list;
  }();
  for (const std::string& bad : {
           std::string("redis+sentinel://:hunter2@s1,s2"),     // no master name
           std::string("redis+sentinel://:hunter2@s1/"),       // empty master name
           std::string("redis+sentinel://:hunter2@s1,,s2/m"),  // empty entry
           std::string("redis+sentinel://:hunter2@s1,/m"),     // trailing comma
           std::string("redis+sentinel://:hunter2@/m"),        // no sentinels
           std::string("redis+sentinel://:hunter2@s1:0/m"),    // bad port
           std::string("redis+sentinel://:hunter2@s1/m a"),    // space in the name
           std::string("redis+sentinel://:hunter2@s1/m/x"),    // db not a number
           std::string("redis+sentinel://:hunter2@s1/m?x=1"),  // unknown parameter
           "redis+sentinel://:hunter2@" + many + "/m",         // too many sentinels
       }) {
    SCOPED_TRACE(bad);
    auto url = ParseRedisUrl(bad);
    ASSERT_FALSE(url.ok());
    EXPECT_EQ(url.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(std::string(url.status().message()).find("hunter2"), std::string::npos);
  }
}

}  // namespace
}  // namespace inspection::redis
