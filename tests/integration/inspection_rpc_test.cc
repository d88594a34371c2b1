// DamageService and InspectionService against a scripted fake vendor.
#include "tests/integration/gateway_fixture.h"

namespace inspection::testing {
namespace {

class InspectionRpcTest : public GatewayTest {};

TEST_F(InspectionRpcTest, DetectDamageKeepsTheWholeBodyAndFindsTheInspectionId) {
  VendorReplies(200, R"({"message": "processing", "data": {"inspectionId": "insp_9"}})");
  v1::DetectDamageRequest request;
  request.add_urls("https://img.example.test/front.jpg");
  request.add_urls("https://img.example.test/back.jpg");
  v1::DetectDamageResponse response;
  grpc::Status status = damage_->DetectDamage(Context().get(), request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();

  auto sent = OnlyRequest();
  EXPECT_EQ(sent.method, "POST");
  EXPECT_EQ(sent.path, "/apiV1/damage/vehicle");
  ASSERT_NE(sent.Header("x-api-key"), nullptr);
  EXPECT_EQ(*sent.Header("x-api-key"), kApiKey);
  EXPECT_EQ(*sent.Header("content-type"), "application/json");
  EXPECT_EQ(Json(sent.body), Json(R"({"urls": ["https://img.example.test/front.jpg",
                                                "https://img.example.test/back.jpg"]})"));
  ExpectProtoEq(response, Parse<v1::DetectDamageResponse>(R"pb(
                  body {
                    struct_value {
                      fields {
                        key: "message"
                        value { string_value: "processing" }
                      }
                      fields {
                        key: "data"
                        value {
                          struct_value {
                            fields {
                              key: "inspectionId"
                              value { string_value: "insp_9" }
                            }
                          }
                        }
                      }
                    }
                  }
                  inspection_id: "insp_9"
                )pb"));
}

TEST_F(InspectionRpcTest, DetectDamageInspectionIdPointersAreConfigurable) {
  StartGateway(vendor_.BaseUrl(), [](server::GatewayServerOptions& options) {
    options.mapper.inspection_id_pointers = {"/result/inspection/objectId"};
  });
  VendorReplies(200, R"({"inspectionId": "not-this-one",
                         "result": {"inspection": {"objectId": "insp_42"}}})");
  v1::DetectDamageRequest request;
  request.add_urls("https://img.example.test/front.jpg");
  v1::DetectDamageResponse response;
  ASSERT_TRUE(damage_->DetectDamage(Context().get(), request, &response).ok());
  EXPECT_EQ(response.inspection_id(), "insp_42");
}

TEST_F(InspectionRpcTest, DetectDamageAcceptsAnEmptyBody) {
  VendorReplies(202, "");
  v1::DetectDamageRequest request;
  request.add_urls("https://img.example.test/front.jpg");
  v1::DetectDamageResponse response;
  grpc::Status status = damage_->DetectDamage(Context().get(), request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.body().kind_case(), google::protobuf::Value::kNullValue);
  EXPECT_EQ(response.inspection_id(), "");
}

TEST_F(InspectionRpcTest, SearchInspectionsSendsTheQueryAndDecodesResults) {
  VendorReplies(200, R"({"data": [{
      "id": "insp_1", "createdAt": "2024-03-02T09:00:00.000Z",
      "updatedAt": "2024-03-02T10:00:00.000Z", "detectionFinished": true,
      "detectionFinishedAt": "2024-03-02T09:05:00.000Z",
      "detectionStartedAt": "2024-03-02T09:01:00.000Z", "detectionStatus": false,
      "inspectionCreatedAt": "2024-03-02T09:00:00.000Z", "damageControl": 125000,
      "numberDamage": 4, "numberSevParts": 2, "originalNbDamage": 5,
      "fastTrackCompletion": 1, "user": {"username": "agent one"}, "type": 4,
      "vehicle": {"id": "veh_1", "createdAt": "2024-03-02T09:00:00.000Z",
                  "updatedAt": "2024-03-02T09:00:00.000Z", "companyPtr": {"id": "co_1"},
                  "immat": "AB-123-CD"},
      "isDeleted": false, "inspected": false, "picturesSelected": {},
      "thumbnailImagePtr": {"id": "img_1", "createdAt": "2024-03-02T09:02:00.000Z",
                            "updatedAt": "2024-03-02T09:02:00.000Z"},
      "modShootInspectEndDate": "2024-03-02T09:04:00.000Z", "globalState": "end-inspect",
      "thumbnailUrl": "https://cdn.example.test/thumb.jpg",
      "tradeInToken": {"uid": "Zx81kQ", "id": "tok_1", "expired": false,
                       "tradeinVehicle": true, "tradeinStatus": 5, "sendingType": null,
                       "inspectionPtr": {"id": "insp_1"}, "deviceId": "Zx81kQ-pwa",
                       "monitoring": []}}],
    "paginationInfo": {"totalInspections": 11, "totalPages": 6, "currentPage": 2,
                       "range": "3-4"}})");
  auto request = Parse<v1::SearchInspectionsRequest>(
      R"pb(
        license_plate: "AB-123-CD" username: "agent one" page: 2 limit: 2
      )pb");
  v1::SearchInspectionsResponse response;
  grpc::Status status = inspection_->SearchInspections(Context().get(), request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();

  auto sent = OnlyRequest();
  EXPECT_EQ(sent.method, "GET");
  EXPECT_EQ(sent.path, "/apiv1/inspection/search");
  EXPECT_EQ(sent.query, "licensePlate=AB-123-CD&username=agent%20one&page=2&limit=2");
  EXPECT_EQ(sent.body, "");
  ASSERT_NE(sent.Header("x-api-key"), nullptr);

  ExpectProtoEq(
      response, Parse<v1::SearchInspectionsResponse>(R"pb(
        data {
          id: "insp_1"
          created_at: "2024-03-02T09:00:00.000Z"
          updated_at: "2024-03-02T10:00:00.000Z"
          detection_finished: true
          detection_finished_at: "2024-03-02T09:05:00.000Z"
          detection_started_at: "2024-03-02T09:01:00.000Z"
          detection_status: false
          inspection_created_at: "2024-03-02T09:00:00.000Z"
          damage_control: 125000
          number_damage: 4
          number_sev_parts: 2
          original_nb_damage: 5
          fast_track_completion: 1
          user { username: "agent one" }
          type: INSPECTION_TYPE_WEB_APP
          type_raw: 4
          vehicle {
            id: "veh_1"
            created_at: "2024-03-02T09:00:00.000Z"
            updated_at: "2024-03-02T09:00:00.000Z"
            company_ptr { id: "co_1" }
            immat: "AB-123-CD"
          }
          is_deleted: false
          inspected: false
          pictures_selected {}
          thumbnail_image_ptr {
            id: "img_1"
            created_at: "2024-03-02T09:02:00.000Z"
            updated_at: "2024-03-02T09:02:00.000Z"
          }
          mod_shoot_inspect_end_date: "2024-03-02T09:04:00.000Z"
          global_state: GLOBAL_STATE_END_INSPECT
          global_state_raw: "end-inspect"
          thumbnail_url: "https://cdn.example.test/thumb.jpg"
          trade_in_token {
            uid: "Zx81kQ"
            id: "tok_1"
            expired: false
            tradein_vehicle: true
            tradein_status: TRADEIN_STATUS_COMPLETED
            tradein_status_raw: 5
            sending_type: SENDING_TYPE_NONE
            inspection_ptr { id: "insp_1" }
            device_id: "Zx81kQ-pwa"
            monitoring {}
          }
        }
        pagination_info { total_inspections: 11 total_pages: 6 current_page: 2 range: "3-4" }
      )pb"));
}

TEST_F(InspectionRpcTest, SearchWithoutPlateOrUsernameIsRejected) {
  v1::SearchInspectionsRequest request;
  request.set_limit(10);
  v1::SearchInspectionsResponse response;
  grpc::Status status = inspection_->SearchInspections(Context().get(), request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(BadRequestOf(status).field_violations(0).field(), "license_plate");
  EXPECT_EQ(vendor_.RequestCount(), 0u);
}

TEST_F(InspectionRpcTest, GetDamagesReportUsesThePathParameter) {
  VendorReplies(200, R"({"inspectionId": "insp_9", "damages": {"PRCAR": [{"uid": 1}]}})");
  v1::GetDamagesReportRequest request;
  request.set_inspection_id("insp_9");
  v1::GetDamagesReportResponse response;
  grpc::Status status = inspection_->GetDamagesReport(Context().get(), request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  auto sent = OnlyRequest();
  EXPECT_EQ(sent.method, "GET");
  EXPECT_EQ(sent.path, "/apiv1/inspection/apiV1_sdk/inspection/damagesReport/insp_9");
  EXPECT_EQ(sent.query, "");
  const auto& report = response.report().struct_value().fields();
  EXPECT_EQ(report.at("inspectionId").string_value(), "insp_9");
  EXPECT_EQ(report.at("damages")
                .struct_value()
                .fields()
                .at("PRCAR")
                .list_value()
                .values(0)
                .struct_value()
                .fields()
                .at("uid")
                .number_value(),
            1);
}

TEST_F(InspectionRpcTest, UnknownReportIsNotFoundWithTheVendorBody) {
  VendorReplies(404, R"({"message": "Inspection not found"})");
  v1::GetDamagesReportRequest request;
  request.set_inspection_id("nope");
  v1::GetDamagesReportResponse response;
  grpc::Status status = inspection_->GetDamagesReport(Context().get(), request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  auto info = ErrorInfoOf(status);
  EXPECT_EQ(info.reason(), "VENDOR_HTTP_ERROR");
  EXPECT_EQ(info.metadata().at("http_status"), "404");
  EXPECT_EQ(info.metadata().at("vendor_body"), R"({"message": "Inspection not found"})");
  EXPECT_NE(status.error_message().find("Inspection not found"), std::string::npos);
}

}  // namespace
}  // namespace inspection::testing
