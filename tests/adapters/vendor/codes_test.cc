#include "adapters/vendor/codes.h"

#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include <google/protobuf/text_format.h>
#include <google/protobuf/util/message_differencer.h>

#include "gtest/gtest.h"

namespace inspection::vendor {
namespace {

using ::google::protobuf::TextFormat;
using ::google::protobuf::util::MessageDifferencer;
using ::inspection::v1::PartCode;

PartCode ParsePart(const std::string& text) {
  PartCode part;
  EXPECT_TRUE(TextFormat::ParseFromString(text, &part)) << text;
  return part;
}

void ExpectPart(std::string_view code, const std::string& expected_text) {
  const PartCode expected = ParsePart(expected_text);
  const PartCode actual = DecodePartCode(code);
  std::string diff;
  MessageDifferencer differencer;
  differencer.ReportDifferencesToString(&diff);
  EXPECT_TRUE(differencer.Compare(expected, actual)) << "code " << code << ":\n" << diff;
}

TEST(DecodePartCodeTest, FamilyWithThreeLetterLocation) {
  ExpectPart("PRTAVD", R"pb(code: "PRTAVD"
                            family: "PRT"
                            family_name: "door"
                            location: "AVD"
                            location_name: "front right")pb");
  ExpectPart("JNAARG", R"pb(code: "JNAARG"
                            family: "JNA"
                            family_name: "alloy rim"
                            location: "ARG"
                            location_name: "rear left")pb");
  ExpectPart("PHRAVG", R"pb(code: "PHRAVG"
                            family: "PHR"
                            family_name: "headlamp"
                            location: "AVG"
                            location_name: "front left")pb");
  ExpectPart("ROUARD", R"pb(code: "ROUARD"
                            family: "ROU"
                            family_name: "wheel"
                            location: "ARD"
                            location_name: "rear right")pb");
  ExpectPart("PRCARM", R"pb(code: "PRCARM"
                            family: "PRC"
                            family_name: "bumper"
                            location: "ARM"
                            location_name: "rear middle")pb");
}

TEST(DecodePartCodeTest, FamilyWithTwoLetterLocation) {
  ExpectPart("PRCAV", R"pb(code: "PRCAV"
                           family: "PRC"
                           family_name: "bumper"
                           location: "AV"
                           location_name: "front")pb");
  ExpectPart("CFRAR", R"pb(code: "CFRAR"
                           family: "CFR"
                           family_name: "boot / tailgate"
                           location: "AR"
                           location_name: "rear")pb");
  ExpectPart("INSAU", R"pb(code: "INSAU"
                           family: "INS"
                           family_name: "badge"
                           location: "AU"
                           location_name: "other")pb");
}

TEST(DecodePartCodeTest, FamilyWithOneLetterLocation) {
  ExpectPart("RTRD", R"pb(code: "RTRD"
                          family: "RTR"
                          family_name: "side mirror"
                          location: "D"
                          location_name: "right")pb");
  ExpectPart("BDCG", R"pb(code: "BDCG"
                          family: "BDC"
                          family_name: "sill"
                          location: "G"
                          location_name: "left")pb");
  ExpectPart("TOIT", R"pb(code: "TOIT"
                          family: "TOI"
                          family_name: "roof"
                          location: "T"
                          location_name: "top")pb");
  ExpectPart("PRCB", R"pb(code: "PRCB"
                          family: "PRC"
                          family_name: "bumper"
                          location: "B"
                          location_name: "underside")pb");
}

TEST(DecodePartCodeTest, LongestSuffixWinsOverItsOwnTail) {
  // `AVD` ends in `D` and `VD`; only the whole suffix may be read.
  const PartCode part = DecodePartCode("VTRAVD");
  EXPECT_EQ(part.location(), "AVD");
  EXPECT_EQ(part.location_name(), "front right");
  EXPECT_EQ(DecodePartCode("PGNAVG").location_name(), "front left");
}

TEST(DecodePartCodeTest, BareFamilyHasNoLocation) {
  ExpectPart("CPT", R"pb(code: "CPT" family: "CPT" family_name: "hood")pb");
  ExpectPart("INS", R"pb(code: "INS" family: "INS" family_name: "badge")pb");
}

TEST(DecodePartCodeTest, EveryFamilyOfTheReferenceTableIsKnown) {
  const std::pair<const char*, const char*> kFamilies[] = {
      {"PRT", "door"},
      {"PRB", "windscreen"},
      {"PRC", "bumper"},
      {"CST", "quarter glass"},
      {"AIL", "wing / quarter panel"},
      {"OPT", "lamp unit"},
      {"CLR", "grille"},
      {"ABR", "fog light"},
      {"PHR", "headlamp"},
      {"TRP", "fuel door"},
      {"PLI", "licence plate"},
      {"TPR", "charging flap"},
      {"VTR", "side window"},
      {"CFR", "boot / tailgate"},
      {"RTR", "side mirror"},
      {"JUP", "skirt / valance"},
      {"BDC", "sill"},
      {"TOI", "roof"},
      {"CPT", "hood"},
      {"ENJ", "hubcap"},
      {"PGN", "door handle"},
      {"PNE", "tyre"},
      {"ROU", "wheel"},
      {"INS", "badge"},
      {"JNA", "alloy rim"},
      {"JNT", "steel rim"},
      {"JNB", "two-tone rim"},
  };
  for (const auto& [family, name] : kFamilies) {
    const PartCode part = DecodePartCode(std::string(family) + "AV");
    EXPECT_EQ(part.family(), family);
    EXPECT_EQ(part.family_name(), name) << family;
    EXPECT_EQ(part.location_name(), "front") << family;
  }
}

TEST(DecodePartCodeTest, UnknownFamilyKeepsOnlyTheCode) {
  ExpectPart("XYZAVD", R"pb(code: "XYZAVD")pb");
  ExpectPart("ZZZ", R"pb(code: "ZZZ")pb");
  ExpectPart("PR", R"pb(code: "PR")pb");
  ExpectPart("", R"pb()pb");
  // Matching is case-sensitive: the vendor writes codes in upper case.
  ExpectPart("prtavd", R"pb(code: "prtavd")pb");
}

TEST(DecodePartCodeTest, KnownFamilyWithUnknownSuffixKeepsTheFamilyOnly) {
  ExpectPart("PRTXX", R"pb(code: "PRTXX" family: "PRT" family_name: "door")pb");
  ExpectPart("PRTAVDX", R"pb(code: "PRTAVDX" family: "PRT" family_name: "door")pb");
  ExpectPart("PRTAVM", R"pb(code: "PRTAVM" family: "PRT" family_name: "door")pb");
}

TEST(AngleCodeNameTest, KnownCodes) {
  EXPECT_EQ(AngleCodeName(0), "front");
  EXPECT_EQ(AngleCodeName(1), "front, close inspection");
  EXPECT_EQ(AngleCodeName(2), "front three-quarter, driver side");
  EXPECT_EQ(AngleCodeName(4), "side, driver");
  EXPECT_EQ(AngleCodeName(8), "back three-quarter driver, close");
  EXPECT_EQ(AngleCodeName(9), "back");
  EXPECT_EQ(AngleCodeName(13), "side, passenger");
  EXPECT_EQ(AngleCodeName(16), "front three-quarter, passenger side");
  EXPECT_EQ(AngleCodeName(17), "front three-quarter passenger, close");
}

TEST(AngleCodeNameTest, EveryCodeOfTheRangeHasADistinctName) {
  for (int code = 0; code <= 17; ++code) {
    EXPECT_FALSE(AngleCodeName(code).empty()) << code;
    for (int other = 0; other < code; ++other) {
      EXPECT_NE(AngleCodeName(code), AngleCodeName(other)) << code << " vs " << other;
    }
  }
}

TEST(AngleCodeNameTest, UnknownCodesAreEmpty) {
  EXPECT_EQ(AngleCodeName(-1), "");
  EXPECT_EQ(AngleCodeName(18), "");
  EXPECT_EQ(AngleCodeName(1000), "");
}

TEST(SeverityNameTest, KnownSeverities) {
  EXPECT_EQ(SeverityName("SEV0"), "unknown");
  EXPECT_EQ(SeverityName("SEV1"), "polish");
  EXPECT_EQ(SeverityName("SEV2"), "quick repair");
  EXPECT_EQ(SeverityName("SEV3"), "paint");
  EXPECT_EQ(SeverityName("SEV4"), "panel work and paint");
  EXPECT_EQ(SeverityName("SEV5"), "replace");
}

TEST(SeverityNameTest, UnknownSeveritiesAreEmpty) {
  EXPECT_EQ(SeverityName("SEV6"), "");
  EXPECT_EQ(SeverityName("sev3"), "");
  EXPECT_EQ(SeverityName("SEV"), "");
  EXPECT_EQ(SeverityName(""), "");
}

// docs/codes.md documents the decoder: every angle, part family and severity in its
// tables decodes to the meaning written there, and the decoder knows no angle the page does
// not list.
TEST(CodesDocTest, DocsCodesMdMatchesTheDecoder) {
  std::ifstream file(std::string(SOURCE_DIR) + "/docs/codes.md");
  ASSERT_TRUE(file.good());
  std::stringstream text;
  text << file.rdbuf();
  const std::string doc = text.str();

  const std::regex angle_row(R"(\| (\d+) \| ([^|]+) \| (\d+) \| ([^|]+) \|)");
  int angles = 0;
  for (auto it = std::sregex_iterator(doc.begin(), doc.end(), angle_row);
       it != std::sregex_iterator(); ++it) {
    for (int pair : {1, 3}) {
      const int code = std::stoi((*it)[pair].str());
      std::string shot = (*it)[pair + 1].str();
      shot.erase(shot.find_last_not_of(' ') + 1);
      EXPECT_EQ(AngleCodeName(code), shot) << "angle " << code;
      ++angles;
    }
  }
  EXPECT_EQ(angles, 18);
  EXPECT_EQ(AngleCodeName(18), "");

  const std::regex family_row(R"(\| ([A-Z]{3}) \| ([^|]+) \|(?: ([A-Z]{3}) \| ([^|]+) \|)?)");
  int families = 0;
  for (auto it = std::sregex_iterator(doc.begin(), doc.end(), family_row);
       it != std::sregex_iterator(); ++it) {
    for (int pair : {1, 3}) {
      if (!(*it)[pair].matched) continue;
      std::string name = (*it)[pair + 1].str();
      name.erase(name.find_last_not_of(' ') + 1);
      EXPECT_EQ(DecodePartCode((*it)[pair].str()).family_name(), name) << (*it)[pair].str();
      ++families;
    }
  }
  EXPECT_GE(families, 25);

  const std::regex severity(R"(`(SEV\d)` ([a-z ]+)[,;.])");
  int severities = 0;
  for (auto it = std::sregex_iterator(doc.begin(), doc.end(), severity);
       it != std::sregex_iterator(); ++it) {
    EXPECT_EQ(SeverityName((*it)[1].str()), (*it)[2].str()) << (*it)[1].str();
    ++severities;
  }
  EXPECT_EQ(severities, 6);
}

}  // namespace
}  // namespace inspection::vendor
