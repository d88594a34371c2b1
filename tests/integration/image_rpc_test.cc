// ImageService against a scripted fake vendor: exact upstream request, decoded response.
#include "tests/integration/gateway_fixture.h"

namespace inspection::testing {
namespace {

class ImageRpcTest : public GatewayTest {
 protected:
  void ExpectPost(const std::string& path, const std::string& body) {
    auto sent = OnlyRequest();
    EXPECT_EQ(sent.method, "POST");
    EXPECT_EQ(sent.path, path);
    EXPECT_EQ(sent.query, "");
    ASSERT_NE(sent.Header("x-api-key"), nullptr);
    EXPECT_EQ(*sent.Header("x-api-key"), kApiKey);
    ASSERT_NE(sent.Header("content-type"), nullptr);
    EXPECT_EQ(*sent.Header("content-type"), "application/json");
    EXPECT_EQ(Json(sent.body), Json(body));
  }
};

TEST_F(ImageRpcTest, RemoveBackgroundSendsBothSpellingsByDefault) {
  VendorReplies(200, R"({"id": "rb_1", "path": "https://cdn.example.test/rb_1.jpg",
                         "status": "success"})");
  auto request = Parse<v1::RemoveBackgroundRequest>(R"pb(
    url: "https://img.example.test/car.jpg"
    url_background: "https://img.example.test/studio.jpg"
    manual_width_ratio: 0.8
    manual_positioning: true
    manual_top_left_position_ratio: [ 0.1, 0.25 ]
    wheel_box: [ 0.1, 0.7, 0.9, 0.9 ]
    blur_licence_plate: true
  )pb");
  v1::RemoveBackgroundResponse response;
  grpc::Status status = image_->RemoveBackground(Context().get(), request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ExpectPost("/apiV1/remarketing/removeBackground", R"({
    "url": "https://img.example.test/car.jpg",
    "urlBackground": "https://img.example.test/studio.jpg",
    "manualWidthRatio": 0.8, "manualPositioning": true,
    "manualTopLeftPositionRatio": [0.1, 0.25], "manualTopLeftPositionRatios": [0.1, 0.25],
    "wheelBox": [0.1, 0.7, 0.9, 0.9], "wheelsBox": [0.1, 0.7, 0.9, 0.9],
    "blurLicencePlate": true
  })");
  ExpectProtoEq(response, Parse<v1::RemoveBackgroundResponse>(R"pb(
                  id: "rb_1"
                  path: "https://cdn.example.test/rb_1.jpg"
                  status: "success"
                )pb"));
}

TEST_F(ImageRpcTest, RemoveBackgroundSpellingIsConfigurable) {
  StartGateway(vendor_.BaseUrl(), [](server::GatewayServerOptions& options) {
    options.mapper.position_ratio_key = vendor::KeySpelling::kPlural;
    options.mapper.wheel_box_key = vendor::KeySpelling::kSingular;
  });
  VendorReplies(200, R"({"id": "rb_2", "path": "https://cdn.example.test/rb_2.png",
                         "status": "success"})");
  auto request = Parse<v1::RemoveBackgroundRequest>(R"pb(
    url: "https://img.example.test/car.jpg"
    url_background: "https://img.example.test/studio.jpg"
    manual_positioning: true
    manual_top_left_position_ratio: [ 0, 0 ]
    wheel_box: [ 0.1, 0.7, 0.9, 0.9 ]
  )pb");
  v1::RemoveBackgroundResponse response;
  ASSERT_TRUE(image_->RemoveBackground(Context().get(), request, &response).ok());
  auto body = Json(OnlyRequest().body);
  EXPECT_FALSE(body.contains("manualTopLeftPositionRatio"));
  EXPECT_EQ(body["manualTopLeftPositionRatios"], Json("[0.0, 0.0]"));
  EXPECT_EQ(body["wheelBox"], Json("[0.1, 0.7, 0.9, 0.9]"));
  EXPECT_FALSE(body.contains("wheelsBox"));
}

TEST_F(ImageRpcTest, AssessQualityDecodesTheClassification) {
  VendorReplies(200, R"({"id": "q_1", "status": 200, "data": [{
    "classification": {
      "imageQualityCompliance": "exploitable", "quality": 0.72, "angle": "Front t34 Driver",
      "cut": "not cut", "rotation": "0", "type": "distant",
      "reason": {"blur": 0.1, "compression": 0.05, "corrupted": 0, "dark": 0.3, "dirt": 0.2,
                 "flare": 0.0, "reflection": 0.4, "screen": 0.0, "shadow": 0.1, "sticker": 0.0,
                 "wet": 0.0, "snow": 0.0, "obstacle": 0.0, "height": 512, "width": 768}
    },
    "status": 200, "url": "https://img.example.test/car.jpg"}]})");
  v1::AssessQualityRequest request;
  request.set_url("https://img.example.test/car.jpg");
  v1::AssessQualityResponse response;
  grpc::Status status = image_->AssessQuality(Context().get(), request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ExpectPost("/apiV1/quality/image", R"({"url": "https://img.example.test/car.jpg"})");
  ExpectProtoEq(response, Parse<v1::AssessQualityResponse>(R"pb(
                  id: "q_1"
                  status: 200
                  data {
                    classification {
                      image_quality_compliance: IMAGE_QUALITY_COMPLIANCE_EXPLOITABLE
                      image_quality_compliance_raw: "exploitable"
                      quality: 0.72
                      angle: IMAGE_ANGLE_FRONT_T34_DRIVER
                      angle_raw: "Front t34 Driver"
                      cut: IMAGE_CUT_NOT_CUT
                      cut_raw: "not cut"
                      rotation: IMAGE_ROTATION_NONE
                      rotation_raw: "0"
                      type: IMAGE_TYPE_DISTANT
                      type_raw: "distant"
                      reason {
                        blur: 0.1
                        compression: 0.05
                        corrupted: 0
                        dark: 0.3
                        dirt: 0.2
                        flare: 0
                        reflection: 0.4
                        screen: 0
                        shadow: 0.1
                        sticker: 0
                        wet: 0
                        snow: 0
                        obstacle: 0
                        height: 512
                        width: 768
                      }
                    }
                    status: 200
                    url: "https://img.example.test/car.jpg"
                  }
                )pb"));
}

TEST_F(ImageRpcTest, AssessQualityBatchKeepsPerImageStatusesAndCapitalisedReasons) {
  VendorReplies(200, R"({"id": "ql_1", "status": 200, "data": [
    {"classification": {"imageQualityCompliance": "good", "quality": 0.91, "angle": "Back",
       "cut": "border", "rotation": "90_CLOCKWISE", "type": "close",
       "reason": {"Dark": 0.05, "Dirt": 0.1, "Flare": 0.0, "Reflection": 0.2, "Shadow": 0.0,
                  "Sticker": 0.0, "Wet": 0.0, "blur": 0.01, "compression": 0.0,
                  "corrupted": 0.0, "height": 512, "obstacle": 0.0, "screen": 0.0,
                  "width": 512}},
     "status": 200, "url": "https://img.example.test/a.jpg"},
    {"classification": {"imageQualityCompliance": "not_good", "type": "not_a_car",
       "reason": {"corrupted": 0.98}},
     "status": 400, "url": "https://img.example.test/b.jpg"}]})");
  v1::AssessQualityBatchRequest request;
  request.add_urls("https://img.example.test/a.jpg");
  request.add_urls("https://img.example.test/b.jpg");
  v1::AssessQualityBatchResponse response;
  grpc::Status status = image_->AssessQualityBatch(Context().get(), request, &response);
  ASSERT_TRUE(status.ok()) << "a 400 on one image is not an RPC error: " << status.error_message();
  ExpectPost("/apiV1/quality/image/list",
             R"({"urls": ["https://img.example.test/a.jpg", "https://img.example.test/b.jpg"]})");
  ExpectProtoEq(response, Parse<v1::AssessQualityBatchResponse>(R"pb(
                  id: "ql_1"
                  status: 200
                  data {
                    classification {
                      image_quality_compliance: IMAGE_QUALITY_COMPLIANCE_GOOD
                      image_quality_compliance_raw: "good"
                      quality: 0.91
                      angle: IMAGE_ANGLE_BACK
                      angle_raw: "Back"
                      cut: IMAGE_CUT_BORDER
                      cut_raw: "border"
                      rotation: IMAGE_ROTATION_90_CLOCKWISE
                      rotation_raw: "90_CLOCKWISE"
                      type: IMAGE_TYPE_CLOSE
                      type_raw: "close"
                      reason {
                        dark: 0.05
                        dirt: 0.1
                        flare: 0
                        reflection: 0.2
                        shadow: 0
                        sticker: 0
                        wet: 0
                        blur: 0.01
                        compression: 0
                        corrupted: 0
                        height: 512
                        obstacle: 0
                        screen: 0
                        width: 512
                      }
                    }
                    status: 200
                    url: "https://img.example.test/a.jpg"
                  }
                  data {
                    classification {
                      image_quality_compliance: IMAGE_QUALITY_COMPLIANCE_NOT_GOOD
                      image_quality_compliance_raw: "not_good"
                      type: IMAGE_TYPE_NOT_A_CAR
                      type_raw: "not_a_car"
                      reason { corrupted: 0.98 }
                    }
                    status: 400
                    url: "https://img.example.test/b.jpg"
                  }
                )pb"));
}

TEST_F(ImageRpcTest, SegmentVehicleDecodesPolygons) {
  VendorReplies(200, R"({"id": "s_1", "status": 200, "data": {"detectionList": [
    {"id": "d_1", "imageStatus": "", "status": 200, "url": "https://img.example.test/a.jpg",
     "detections": {"carData": {"contour": [[[0.1, 0.2], [0.8, 0.2], [0.8, 0.9]]],
                                "height": 0.7, "width": 0.7, "centerY": 0.55, "centerX": 0.45}}},
    {"id": "d_2", "imageStatus": "image could not be downloaded", "status": 500,
     "url": "https://img.example.test/b.jpg", "detections": {}}]}})");
  v1::SegmentVehicleRequest request;
  request.add_urls("https://img.example.test/a.jpg");
  request.add_urls("https://img.example.test/b.jpg");
  v1::SegmentVehicleResponse response;
  grpc::Status status = image_->SegmentVehicle(Context().get(), request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ExpectPost("/apiV1/seg/image",
             R"({"urls": ["https://img.example.test/a.jpg", "https://img.example.test/b.jpg"]})");
  ExpectProtoEq(response, Parse<v1::SegmentVehicleResponse>(R"pb(
                  id: "s_1"
                  status: 200
                  data {
                    detection_list {
                      id: "d_1"
                      image_status: ""
                      status: 200
                      url: "https://img.example.test/a.jpg"
                      detections {
                        car_data {
                          contour {
                            points { x: 0.1 y: 0.2 }
                            points { x: 0.8 y: 0.2 }
                            points { x: 0.8 y: 0.9 }
                          }
                          height: 0.7
                          width: 0.7
                          center_y: 0.55
                          center_x: 0.45
                        }
                      }
                    }
                    detection_list {
                      id: "d_2"
                      image_status: "image could not be downloaded"
                      status: 500
                      url: "https://img.example.test/b.jpg"
                      detections {}
                    }
                  }
                )pb"));
}

TEST_F(ImageRpcTest, SegmentPartsDecodesPartsAndTheirCodes) {
  VendorReplies(200, R"({"id": "p_1", "status": 200, "data": {
    "vehicle": {"region": "FR", "immat": "AB-123-CD"},
    "detectionList": [{"id": "d_1", "imageStatus": "", "status": 200,
      "url": "https://img.example.test/a.jpg",
      "detections": {"partsData": [
        {"type": "PRTAVD", "centerX": 0.4, "centerY": 0.5, "width": 0.2, "height": 0.3,
         "contour": [[0.3, 0.35], [0.5, 0.35], [0.5, 0.65]]},
        {"type": "ROUAVD", "centerX": 0.2, "centerY": 0.8, "width": 0.1, "height": 0.15,
         "contour": [[0.15, 0.7], [0.25, 0.9]], "wheelType": "Jante_AL"}]}}]}})");
  v1::SegmentPartsRequest request;
  request.add_urls("https://img.example.test/a.jpg");
  v1::SegmentPartsResponse response;
  grpc::Status status = image_->SegmentParts(Context().get(), request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ExpectPost("/apiV1/part/image", R"({"urls": ["https://img.example.test/a.jpg"]})");

  ASSERT_EQ(response.data().detection_list_size(), 1);
  EXPECT_EQ(response.data().vehicle().region(), "FR");
  EXPECT_EQ(response.data().vehicle().immat(), "AB-123-CD");
  const auto& parts = response.data().detection_list(0).detections().parts_data();
  ASSERT_EQ(parts.size(), 2);
  EXPECT_EQ(parts[0].type(), "PRTAVD");
  EXPECT_EQ(parts[0].part().code(), "PRTAVD");
  EXPECT_EQ(parts[0].part().family(), "PRT");
  EXPECT_EQ(parts[0].part().location(), "AVD");
  EXPECT_FALSE(parts[0].part().family_name().empty());
  ASSERT_EQ(parts[0].contour().points_size(), 3);
  EXPECT_DOUBLE_EQ(parts[0].contour().points(1).x(), 0.5);
  EXPECT_DOUBLE_EQ(parts[0].contour().points(2).y(), 0.65);
  EXPECT_FALSE(parts[0].has_wheel_type());
  EXPECT_EQ(parts[1].wheel_type(), "Jante_AL");
  EXPECT_EQ(parts[1].part().family(), "ROU");
  EXPECT_DOUBLE_EQ(parts[1].center_y(), 0.8);
}

TEST_F(ImageRpcTest, EmptyUrlListIsRejectedWithoutCallingTheVendor) {
  v1::SegmentPartsRequest request;
  v1::SegmentPartsResponse response;
  grpc::Status status = image_->SegmentParts(Context().get(), request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  ASSERT_EQ(BadRequestOf(status).field_violations_size(), 1);
  EXPECT_EQ(BadRequestOf(status).field_violations(0).field(), "urls");
  EXPECT_EQ(vendor_.RequestCount(), 0u);
}

}  // namespace
}  // namespace inspection::testing
