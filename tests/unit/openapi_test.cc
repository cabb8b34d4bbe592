// The OpenAPI document built from the code (api/http/openapi.h): docs/openapi.json is it, and
// its request schemas are the request schema's (api/schema/request_schema.h).
#include "api/http/openapi.h"

#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>

#include "api/mcp/json_rpc.h"
#include "api/schema/request_schema.h"
#include "lib/test_paths.h"

namespace execbox::api {
namespace {

using nlohmann::json;

std::set<std::string> Keys(const json& object) {
  std::set<std::string> out;
  for (const auto& [key, value] : object.items()) out.insert(key);
  return out;
}

std::set<std::string> Names(Request request) {
  std::set<std::string> out;
  for (const RequestField* field : FieldsOf(request)) out.insert(std::string(field->name));
  return out;
}

TEST(OpenApiDocument, DocsCopyIsWhatTheBuildServes) {
  const std::string path = std::string(test::kSourceDir) + "/docs/openapi.json";
  std::ifstream in(path);
  ASSERT_TRUE(in) << path << " is missing: run make openapi";
  std::stringstream text;
  text << in.rdbuf();
  const std::string built = OpenApiJson(engine::LimitsConfig{}).dump(2) + "\n";
  if (text.str() == built) return;
  // The first line that differs, so the message says where without a diff tool.
  std::istringstream file_lines(text.str()), built_lines(built);
  std::string a, b;
  int line = 0;
  while (true) {
    ++line;
    const bool more_a = static_cast<bool>(std::getline(file_lines, a));
    const bool more_b = static_cast<bool>(std::getline(built_lines, b));
    if (a != b || more_a != more_b) break;
  }
  FAIL() << "docs/openapi.json is not the OpenAPI document this build serves (with the built-in limits): "
            "run make openapi and commit the file. First difference at line "
         << line << ":\n  docs/openapi.json: " << a.substr(0, 200)
         << "\n  built:             " << b.substr(0, 200);
}

TEST(OpenApiDocument, ServedIsTheSameDocument) {
  EXPECT_EQ(json::parse(OpenApiDocument(engine::LimitsConfig{})), OpenApiJson(engine::LimitsConfig{}));
}

TEST(OpenApiDocument, RequestBodiesAreTheRequestSchemas) {
  json doc = OpenApiJson(engine::LimitsConfig{});
  const json& schemas = doc["components"]["schemas"];
  EXPECT_EQ(Keys(schemas["ExecuteRequest"]["properties"]), Names(kExecuteBody));
  EXPECT_EQ(Keys(schemas["CheckRequest"]["properties"]), Names(kCheckBody));
  EXPECT_EQ(Keys(schemas["InputFile"]["properties"]), Names(kInputFile));
  const json& session_body =
      doc["paths"]["/v1/sessions"]["post"]["requestBody"]["content"]["application/json"]["schema"];
  EXPECT_EQ(Keys(session_body["properties"]), Names(kSessionBody));
  EXPECT_EQ(session_body["additionalProperties"], false);
  // The session route's body is the one-shot body less what it leaves out.
  EXPECT_EQ(schemas["SessionExecuteRequest"]["properties"],
            json({{"session_id", false}, {"network", false}, {"guard", false}}));
  for (const RequestField* field : FieldsOf(kExecuteBody)) {
    const json& property = schemas["ExecuteRequest"]["properties"][std::string(field->name)];
    if (field->nullable) {
      EXPECT_TRUE(property.contains("anyOf") || property["type"].is_array()) << field->name << " may be null";
    }
  }
  EXPECT_EQ(schemas["ExecuteRequest"]["required"], json({"code"}));
}

TEST(OpenApiDocument, LimitsAreOneObjectWhereverABodyCarriesThem) {
  json doc = OpenApiJson(engine::LimitsConfig{});
  const json limits = {{"anyOf", {{{"$ref", "#/components/schemas/Limits"}}, {{"type", "null"}}}}};
  EXPECT_EQ(doc["components"]["schemas"]["ExecuteRequest"]["properties"]["limits"], limits);
  EXPECT_EQ(doc["paths"]["/v1/sessions"]["post"]["requestBody"]["content"]["application/json"]["schema"]
               ["properties"]["limits"],
            limits);
}

}  // namespace
}  // namespace execbox::api
