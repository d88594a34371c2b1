// The internal building blocks of the analysis: the hash stream, plates, rings.
#include "sandbox/analysis/image_traits.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "sandbox/analysis/hash_stream.h"
#include "sandbox/analysis/licence_plate.h"

namespace inspection::sandbox::analysis_internal {
namespace {

TEST(HashStreamTest, SameSeedSameSequenceAndSaltsSeparateStreams) {
  HashStream a = HashStream::For("quality", "https://img.test/1.jpg");
  HashStream b = HashStream::For("quality", "https://img.test/1.jpg");
  HashStream c = HashStream::For("parts", "https://img.test/1.jpg");
  for (int i = 0; i < 10; ++i) {
    const uint64_t value = a.Next();
    EXPECT_EQ(value, b.Next());
    EXPECT_NE(value, c.Next());
  }
}

TEST(HashStreamTest, DrawsStayInRange) {
  HashStream stream(42);
  std::set<int> seen;
  for (int i = 0; i < 1000; ++i) {
    const double u = stream.Uniform();
    EXPECT_GE(u, 0.0);
    EXPECT_LT(u, 1.0);
    const int n = stream.IntIn(3, 8);
    EXPECT_GE(n, 3);
    EXPECT_LE(n, 8);
    seen.insert(stream.Weighted({0, 5, 0, 1}));
  }
  EXPECT_EQ(seen, (std::set<int>{1, 3}));
  EXPECT_EQ(stream.Below(0), 0);
  EXPECT_EQ(stream.IntIn(5, 4), 5);
  EXPECT_EQ(stream.Weighted({0, 0}), 0);
  EXPECT_EQ(stream.Hex(40).size(), 40u);
}

TEST(HashStreamTest, ObjectIdsAndKeys) {
  EXPECT_EQ(ObjectId("x").size(), 24u);
  EXPECT_EQ(ObjectId("x"), ObjectId("x"));
  EXPECT_NE(ObjectId("x"), ObjectId("y"));
  EXPECT_NE(JoinKey({"a,b"}), JoinKey({"a", "b"}));
  EXPECT_NE(JoinKey({"ab", "c"}), JoinKey({"a", "bc"}));
  EXPECT_EQ(Round4(0.123456), 0.1235);
}

TEST(PlateTest, TheVehicleShowsTheSandboxsPlateAndItsRegion) {
  for (int i = 0; i < 200; ++i) {
    const std::vector<std::string> urls = {"https://img.test/" + std::to_string(i) + ".jpg"};
    const PlateReading reading = VehicleFor(urls);
    EXPECT_EQ(reading.immat, PlateForImages(urls));
    EXPECT_EQ(reading.region, "FR") << reading.immat;  // derived plates are French-style
  }
  EXPECT_EQ(VehicleFor({"https://img.test/a.jpg?plate=1-abc-234"}).region, "BE");
  EXPECT_EQ(VehicleFor({"https://img.test/a.jpg?plate=m-ab-1234"}).region, "DE");
  EXPECT_EQ(VehicleFor({"https://img.test/a.jpg?plate=1234-bcd"}).region, "ES");
  // A plate of no known format still gets a region, derived from the URLs.
  const PlateReading odd = VehicleFor({"https://img.test/a.jpg?plate=XYZ123"});
  EXPECT_EQ(odd.immat, "XYZ123");
  EXPECT_TRUE((std::set<std::string>{"FR", "DE", "BE", "IT", "ES"}).count(odd.region));
}

TEST(PlateTest, RegionOfPlateFormats) {
  EXPECT_EQ(RegionOfPlate("AB-123-CD"), "FR");
  EXPECT_EQ(RegionOfPlate("M-AB 1234"), "DE");
  EXPECT_EQ(RegionOfPlate("HH-A-12"), "DE");
  EXPECT_EQ(RegionOfPlate("1-ABC-234"), "BE");
  EXPECT_EQ(RegionOfPlate("AB 123 CD"), "IT");
  EXPECT_EQ(RegionOfPlate("1234 BCD"), "ES");
  EXPECT_EQ(RegionOfPlate("whatever"), "");
  EXPECT_EQ(RegionOfPlate(""), "");
}

TEST(RingTest, ClippedToTheFrameAndBoxedExactly) {
  HashStream stream(7);
  for (int i = 0; i < 200; ++i) {
    const GridPolygon ring = RingIn(stream, 3 + i % 14, -0.3, 0.2, 1.2, 0.9);
    ASSERT_EQ(ring.points.size(), static_cast<size_t>(3 + i % 14));
    int min_x = kGrid, max_x = 0, min_y = kGrid, max_y = 0;
    for (const GridPoint& point : ring.points) {
      EXPECT_GE(point.x, 0);
      EXPECT_LE(point.x, kGrid);
      EXPECT_GE(point.y, 0);
      EXPECT_LE(point.y, kGrid);
      min_x = std::min(min_x, point.x);
      max_x = std::max(max_x, point.x);
      min_y = std::min(min_y, point.y);
      max_y = std::max(max_y, point.y);
    }
    EXPECT_EQ(ring.min_x, min_x);
    EXPECT_EQ(ring.max_x, max_x);
    EXPECT_EQ(ring.min_y, min_y);
    EXPECT_EQ(ring.max_y, max_y);
    EXPECT_EQ(min_x, 0);      // overflowing on the left: clipped at the edge
    EXPECT_EQ(max_x, kGrid);  // and on the right
    EXPECT_EQ(min_y, 2000);   // the target box is spanned exactly
    EXPECT_EQ(max_y, 9000);
  }
}

TEST(TraitsTest, AngleCodesFollowTypeAndStatus) {
  for (int i = 0; i < 1000; ++i) {
    const std::string url = "https://img.test/t/" + std::to_string(i) + ".jpg";
    const ImageTraits traits = TraitsFor(url);
    EXPECT_EQ(traits.status, 200);
    EXPECT_TRUE(traits.image_status.empty());
    const bool has_angle =
        traits.type == v1::IMAGE_TYPE_DISTANT || traits.type == v1::IMAGE_TYPE_CLOSE;
    EXPECT_EQ(traits.angle_code >= 0, has_angle);
    if (traits.type == v1::IMAGE_TYPE_CLOSE) {
      // Close-inspection codes per reference/codes.md.
      EXPECT_TRUE((std::set<int>{1, 3, 5, 6, 8, 10, 12, 14, 15, 17}).count(traits.angle_code));
    }
  }
  EXPECT_EQ(TraitsFor("https://img.test/error500.jpg").angle_code, -1);
}

}  // namespace
}  // namespace inspection::sandbox::analysis_internal
