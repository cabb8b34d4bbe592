// The request schema's table (api/schema/request_schema.h): each request carries the fields its
// parser reads, in the order its refusals list them, and every field is documented wherever it
// is carried.
#include "api/schema/request_schema.h"

#include <gtest/gtest.h>

#include <set>

namespace execbox::api {
namespace {

using nlohmann::json;

constexpr Request kEveryRequest[] = {kExecuteBody,       kSessionExecuteBody, kCheckBody,
                                     kSessionBody,       kExecutePythonTool,  kCreateSessionTool,
                                     kInputFile,         kProcessStartBody,   kProcessInputBody,
                                     kProcessSignalBody, kProcessResizeBody};

TEST(RequestSchema, EachRequestListsItsFieldsInTheRefusalsOrder) {
  EXPECT_EQ(AllowedNames(kExecuteBody), "code, stdin, files, limits, policy, filename, packages, session_id");
  EXPECT_EQ(AllowedNames(kSessionExecuteBody), "code, stdin, files, limits, policy, filename, packages");
  EXPECT_EQ(AllowedNames(kCheckBody), "code, policy");
  EXPECT_EQ(AllowedNames(kSessionBody), "limits, checkpoint, packages");
  EXPECT_EQ(AllowedNames(kExecutePythonTool), "code, limits, packages, session_id");
  EXPECT_EQ(AllowedNames(kCreateSessionTool), "limits, packages");
  EXPECT_EQ(AllowedNames(kInputFile), "name, content_base64");
  EXPECT_EQ(AllowedNames(kProcessStartBody), "argv, command, env, cwd, pty, rows, cols, stdin, tag");
  EXPECT_EQ(AllowedNames(kProcessInputBody), "data, data_base64");
  EXPECT_EQ(AllowedNames(kProcessSignalBody), "signal");
  EXPECT_EQ(AllowedNames(kProcessResizeBody), "rows, cols");
}

TEST(RequestSchema, NamesAreUniqueInEachRequestAndEveryFieldIsCarried) {
  for (Request request : kEveryRequest) {
    std::set<std::string_view> names;
    for (const RequestField* field : FieldsOf(request)) {
      EXPECT_TRUE(names.insert(field->name).second) << field->name;
    }
  }
  std::set<FieldId> ids;
  for (const auto& field : RequestFields()) {
    EXPECT_NE(field.in, 0u) << field.name;
    EXPECT_TRUE(ids.insert(field.id).second) << field.name;
    EXPECT_EQ(&FieldWithId(field.id), &field) << field.name;
  }
}

TEST(RequestSchema, EveryFieldIsDescribedWhereverItIsCarried) {
  for (Request request : kEveryRequest) {
    for (const RequestField* field : FieldsOf(request)) {
      // A tool's limits are the limit schema's arguments, each with its own description.
      if (field->id == FieldId::kLimits && (request == kExecutePythonTool || request == kCreateSessionTool))
        continue;
      EXPECT_FALSE(DescriptionOf(*field, request).empty()) << field->name << " in request " << request;
    }
  }
}

TEST(RequestSchema, ToolsTakeEachLimitAsAnArgumentNotALimitsObject) {
  EXPECT_EQ(FindField(kExecutePythonTool, "limits"), nullptr);
  EXPECT_EQ(FindField(kCreateSessionTool, "limits"), nullptr);
  ASSERT_NE(FindField(kExecuteBody, "limits"), nullptr);
  EXPECT_EQ(FindField(kSessionExecuteBody, "session_id"), nullptr);
  EXPECT_EQ(FindField(kCheckBody, "stdin"), nullptr);
}

TEST(RequestSchema, TypesAndWhatARefusalSaysOfThem) {
  const RequestField& code = *FindField(kExecuteBody, "code");
  EXPECT_TRUE(HasType(code, json("x")));
  EXPECT_FALSE(HasType(code, json(5)));
  EXPECT_EQ(ExpectedType(code), "a string");
  const RequestField& packages = *FindField(kExecuteBody, "packages");
  EXPECT_TRUE(HasType(packages, json::array({1})));
  EXPECT_FALSE(ItemHasType(packages, json(1)));
  EXPECT_EQ(ExpectedType(packages), "an array of strings");
  const RequestField& files = *FindField(kExecuteBody, "files");
  EXPECT_EQ(ExpectedType(files), "an array");
  EXPECT_TRUE(ItemHasType(files, json::object()));
  EXPECT_EQ(ExpectedType(*FindField(kSessionBody, "checkpoint")), "a boolean");
  EXPECT_EQ(ExpectedType(*FindField(kSessionBody, "limits")), "an object");
}

}  // namespace
}  // namespace execbox::api
