// One redis-server for every test of a binary that includes this header: started by a
// gtest environment before the first test and stopped by its pid after the last. Tests
// that stop, freeze or reconfigure a server start their own RedisServer.
#ifndef TESTS_SUPPORT_SHARED_REDIS_SERVER_H_
#define TESTS_SUPPORT_SHARED_REDIS_SERVER_H_

#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "tests/support/redis_server.h"

namespace inspection::testing {

// The shared server while the tests run; null before and after.
inline RedisServer* shared_redis_server = nullptr;

class SharedRedisEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    std::string error;
    server_ = RedisServer::Start(&error);
    ASSERT_NE(server_, nullptr) << error;
    shared_redis_server = server_.get();
  }
  void TearDown() override {
    shared_redis_server = nullptr;
    server_.reset();
  }

 private:
  std::unique_ptr<RedisServer> server_;
};

inline ::testing::Environment* const shared_redis_environment =
    ::testing::AddGlobalTestEnvironment(new SharedRedisEnvironment);

}  // namespace inspection::testing

#endif  // TESTS_SUPPORT_SHARED_REDIS_SERVER_H_
