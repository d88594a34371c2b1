// Walks every RPC of the public API (the generated descriptors) and fails for one that
// is not wired end to end: its vendor_route annotation (or, for a stream, what feeds it),
// the gateway's route, the sandbox's handler, and its row in the README's API table.
// Adding an endpoint: CONTRIBUTING.md.
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "adapters/vendor/vendor_routes.h"
#include "gateway/pipeline/caching_caller.h"
#include "gateway/routes/route_table.h"
#include "sandbox/emulator/sandbox_server.h"

namespace inspection::testing {
namespace {

using google::protobuf::MethodDescriptor;

// "{inspectionId}" and "\<id\>" both read as one path parameter; a query is dropped.
std::string NormalizedPath(std::string path) {
  path = path.substr(0, path.find('?'));
  path = std::regex_replace(path, std::regex(R"(\{[^}]*\})"), "{}");
  path = std::regex_replace(path, std::regex(R"(\\<[^>]*\\>)"), "{}");
  return path;
}

// The README's API table: "Service.Rpc" -> "METHOD /path".
std::map<std::string, std::string> ReadmeApiTable() {
  std::ifstream readme(std::string(SOURCE_DIR) + "/README.md");
  std::map<std::string, std::string> rows;
  bool in_section = false;
  for (std::string line; std::getline(readme, line);) {
    if (absl::StartsWith(line, "## ")) in_section = line == "## The API";
    if (!in_section || !absl::StartsWith(line, "| ")) continue;
    std::vector<std::string> cells = absl::StrSplit(line, '|');
    if (cells.size() < 5) continue;
    for (std::string& cell : cells) cell = std::string(absl::StripAsciiWhitespace(cell));
    rows[cells[1] + "." + cells[2]] = cells[3];
  }
  return rows;
}

TEST(ApiSurfaceTest, EveryRpcIsWiredFromItsAnnotationToTheSandboxAndTheReadme) {
  const std::map<std::string, std::string> readme = ReadmeApiTable();
  ASSERT_FALSE(readme.empty()) << "no API table in README.md";
  int unary = 0;
  for (const MethodDescriptor* method : vendor::ApiMethods()) {
    SCOPED_TRACE(method->full_name());
    const v1::VendorRoute* route = vendor::VendorRouteOf(*method);
    const bool fed_by_webhooks = method->options().GetExtension(v1::webhook_fed);
    const std::string& route_of = method->options().GetExtension(v1::vendor_route_of);
    if (method->client_streaming()) {
      ADD_FAILURE() << "client streams are not part of this API";
      continue;
    }
    if (method->server_streaming()) {
      // A stream says where its messages come from: another RPC's endpoint, or webhooks.
      EXPECT_EQ(route, nullptr) << "a stream is not one vendor call";
      EXPECT_NE(route_of.empty(), !fed_by_webhooks)
          << "set exactly one of vendor_route_of and webhook_fed";
      if (!route_of.empty()) {
        const MethodDescriptor* target = vendor::FindApiMethod(route_of);
        ASSERT_NE(target, nullptr) << "vendor_route_of names no RPC: " << route_of;
        EXPECT_NE(vendor::VendorRouteOf(*target), nullptr) << route_of << " has no vendor_route";
      }
      continue;
    }
    ++unary;
    ASSERT_NE(route, nullptr) << "a unary RPC without a vendor_route annotation";
    EXPECT_TRUE(route_of.empty() && !fed_by_webhooks);

    // The gateway routes it, with the annotation's facts.
    const routes::Route* routed = routes::FindRouteByGrpcMethod(vendor::GrpcPath(*method));
    ASSERT_NE(routed, nullptr) << "no RouteId for this RPC (gateway/routes/route_table.cc)";
    EXPECT_EQ(routed->path_template, route->path());
    EXPECT_EQ(routed->metric_label, route->metric_label());
    EXPECT_EQ(routes::HttpMethodName(routed->http_method), vendor::HttpMethodName(route->method()));

    // Its cache tags are ones the gateway drops on events.
    for (const std::string& tag : route->cache_tags()) {
      if (tag == pipeline::kSearchResultsTag) continue;
      std::smatch param;
      ASSERT_TRUE(std::regex_match(tag, param, std::regex(R"(inspection:\{(\w+)\})"))) << tag;
      EXPECT_TRUE(absl::StrContains(route->path(), "{" + param[1].str() + "}"))
          << tag << " names no path parameter of " << route->path();
    }

    // The sandbox emulates it.
    EXPECT_TRUE(sandbox::SandboxServer::Emulates(method->full_name()))
        << "no sandbox handler (sandbox/emulator/sandbox_server.cc, Handlers())";

    // The README's API table has its row, with the same endpoint.
    const std::string key = method->service()->name() + "." + method->name();
    auto row = readme.find(key);
    ASSERT_NE(row, readme.end()) << "no row in README.md's API table";
    const std::string endpoint = vendor::HttpMethodName(route->method()) + " " + route->path();
    EXPECT_TRUE(absl::StartsWith(row->second, vendor::HttpMethodName(route->method()) + " "))
        << row->second;
    EXPECT_EQ(NormalizedPath(row->second.substr(row->second.find(' ') + 1)),
              NormalizedPath(route->path()))
        << row->second << " vs " << endpoint;
  }
  EXPECT_EQ(unary, static_cast<int>(routes::AllRoutes().size()));
}

}  // namespace
}  // namespace inspection::testing
