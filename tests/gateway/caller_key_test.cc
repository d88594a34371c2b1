// What per-caller limits count a caller as (issue 31, review): its certificate identity, or
// its address without one, an IPv6 address by its /64. Each IPv6 address counted alone gave
// a client holding a /64 (any host) as many fresh buckets as it liked.
#include <gtest/gtest.h>

#include "gateway/services/unary_call.h"

namespace inspection::services {
namespace {

TEST(CallerKeyTest, TheIdentityWhenThereIsOne) {
  EXPECT_EQ(CallerKeyOf("spiffe://corp/ns/claims/sa/api", "ipv4:10.0.0.1:5000"),
            "spiffe://corp/ns/claims/sa/api");
}

TEST(CallerKeyTest, IPv4AddressesAloneWithoutThePort) {
  EXPECT_EQ(CallerKeyOf("", "ipv4:10.0.0.1:5000"), "peer:10.0.0.1");
  EXPECT_EQ(CallerKeyOf("", "ipv4:10.0.0.1:6000"), CallerKeyOf("", "ipv4:10.0.0.1:5000"));
  EXPECT_NE(CallerKeyOf("", "ipv4:10.0.0.2:5000"), CallerKeyOf("", "ipv4:10.0.0.1:5000"));
}

TEST(CallerKeyTest, IPv6AddressesByTheir64InEitherPeerSpelling) {
  EXPECT_EQ(CallerKeyOf("", "ipv6:[2001:db8:1:2::1]:5000"), "peer:2001:db8:1:2::/64");
  EXPECT_EQ(CallerKeyOf("", "ipv6:%5B2001:db8:1:2:ffff::9%5D:5000"), "peer:2001:db8:1:2::/64");
  EXPECT_NE(CallerKeyOf("", "ipv6:[2001:db8:1:3::1]:5000"),
            CallerKeyOf("", "ipv6:[2001:db8:1:2::1]:5000"));
}

TEST(CallerKeyTest, OtherPeersAsTheyAre) {
  EXPECT_EQ(CallerKeyOf("", "unix:/run/gateway.sock"), "peer:unix:/run/gateway.sock");
}

// Idempotency keys under mTLS are scoped by the caller's identity; a caller without a
// certificate must not be able to name a scoped key (outside review of issue 31: plaintext
// and mTLS gateways sharing one store), and the keys of two callers never meet.
TEST(ScopedIdempotencyKeyTest, ScopedKeysCannotBeNamedWithoutACertificate) {
  const std::string scoped = ScopedIdempotencyKey("spiffe://corp/ns/claims/sa/api", "order-1");
  EXPECT_EQ(scoped.rfind("c:", 0), 0u) << scoped;
  EXPECT_EQ(scoped.size(), 2 + 16 + 1 + 7u) << scoped;
  EXPECT_NE(ScopedIdempotencyKey("spiffe://corp/ns/other/sa/api", "order-1"), scoped);
  // Without a certificate: the key as it is, unless it has the form of a reserved one.
  EXPECT_EQ(ScopedIdempotencyKey("", "order-1"), "order-1");
  EXPECT_NE(ScopedIdempotencyKey("", scoped), scoped);
  EXPECT_EQ(ScopedIdempotencyKey("", scoped), "a:" + scoped);
  EXPECT_EQ(ScopedIdempotencyKey("", "a:x"), "a:a:x");
  EXPECT_NE(ScopedIdempotencyKey("", "a:x"), ScopedIdempotencyKey("", "x"));
  EXPECT_EQ(ScopedIdempotencyKey("spiffe://corp/ns/claims/sa/api", ""), "");
}

}  // namespace
}  // namespace inspection::services
