#include "sandbox/analysis/licence_plate.h"

#include <gtest/gtest.h>

namespace inspection::sandbox {
namespace {

TEST(PlateForImagesTest, APlateInTheUrlIsRead) {
  EXPECT_EQ(PlateForImages({"https://i.test/front.jpg?plate=ab-123-cd"}), "AB-123-CD");
  EXPECT_EQ(PlateForImages({"https://i.test/x.jpg", "https://i.test/plate-GH-456-JK/back.jpg"}),
            "GH-456-JK");
}

TEST(PlateForImagesTest, OtherwiseDerivedDeterministically) {
  const std::string plate = PlateForImages({"https://i.test/front.jpg"});
  EXPECT_EQ(plate, PlateForImages({"https://i.test/front.jpg"}));
  EXPECT_NE(plate, PlateForImages({"https://i.test/other.jpg"}));
  ASSERT_EQ(plate.size(), 9u);
  EXPECT_EQ(plate[2], '-');
  EXPECT_EQ(plate[6], '-');
  EXPECT_TRUE(std::isupper(static_cast<unsigned char>(plate[0])));
  EXPECT_TRUE(std::isdigit(static_cast<unsigned char>(plate[4])));
}

TEST(PlateForImagesTest, TooShortOrTooLongMarkersAreIgnored) {
  const std::string derived = PlateForImages({"https://i.test/a.jpg?plate=ab"});
  EXPECT_NE(derived, "AB");
  EXPECT_EQ(derived.size(), 9u);
}

}  // namespace
}  // namespace inspection::sandbox
