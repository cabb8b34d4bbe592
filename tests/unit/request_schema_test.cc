// The request schema's table (api/schema/request_schema.h): each request carries the fields its
// parser reads, in the order its refusals list them, and every field is documented wherever it
// is carried.
#include "api/schema/request_schema.h"

#include <gtest/gtest.h>

#include <set>

namespace execbox::api {
namespace {

using nlohmann::json;

constexpr Request kEveryRequest[] = {
    kExecuteBody,       kSessionExecuteBody, kCheckBody,         kSessionBody,
    kExecutePythonTool, kCreateSessionTool,  kInputFile,         kProcessStartBody,
    kProcessInputBody,  kProcessSignalBody,  kProcessResizeBody, kStartProcessTool,
    kListProcessesTool, kReadOutputTool,     kSendInputTool,     kSignalProcessTool};

TEST(RequestSchema, EachRequestListsItsFieldsInTheRefusalsOrder) {
  EXPECT_EQ(
      AllowedNames(kExecuteBody),
      "code, stdin, files, limits, policy, filename, packages, session_id, network, analyzers, lint, guard");
  EXPECT_EQ(AllowedNames(kSessionExecuteBody),
            "code, stdin, files, limits, policy, filename, packages, analyzers, lint");
  EXPECT_EQ(AllowedNames(kCheckBody), "code, policy, analyzers, lint");
  EXPECT_EQ(AllowedNames(kSessionBody), "limits, checkpoint, packages, network");
  EXPECT_EQ(AllowedNames(kExecutePythonTool), "code, limits, packages, session_id, network, guard");
  EXPECT_EQ(AllowedNames(kCreateSessionTool), "limits, packages, network");
  EXPECT_EQ(AllowedNames(kInputFile), "name, content_base64");
  EXPECT_EQ(AllowedNames(kProcessStartBody), "argv, command, env, cwd, pty, rows, cols, stdin, tag");
  EXPECT_EQ(AllowedNames(kProcessInputBody), "data, data_base64");
  EXPECT_EQ(AllowedNames(kProcessSignalBody), "signal");
  EXPECT_EQ(AllowedNames(kProcessResizeBody), "rows, cols");
  EXPECT_EQ(AllowedNames(kStartProcessTool),
            "session_id, argv, command, env, cwd, pty, rows, cols, stdin, tag, wait_seconds");
  EXPECT_EQ(AllowedNames(kListProcessesTool), "session_id");
  EXPECT_EQ(AllowedNames(kReadOutputTool), "session_id, pid, offset, max_bytes, wait_seconds");
  EXPECT_EQ(AllowedNames(kSendInputTool), "session_id, pid, input, close_stdin");
  EXPECT_EQ(AllowedNames(kSignalProcessTool), "session_id, pid, signal");
}

TEST(RequestSchema, SessionIdIsRequiredByTheProcessToolsOnly) {
  const RequestField& id = FieldWithId(FieldId::kSessionId);
  EXPECT_FALSE(IsRequired(id, kExecutePythonTool));
  EXPECT_FALSE(IsRequired(id, kExecuteBody));
  EXPECT_TRUE(IsRequired(id, kStartProcessTool));
  EXPECT_TRUE(IsRequired(id, kListProcessesTool));
  // The HTTP body's signal must be given; the tool's defaults to SIGTERM.
  EXPECT_TRUE(IsRequired(*FindField(kProcessSignalBody, "signal"), kProcessSignalBody));
  EXPECT_FALSE(IsRequired(*FindField(kSignalProcessTool, "signal"), kSignalProcessTool));
}

TEST(RequestSchema, CheckFieldsRefusesWhatTheTableDoesNotAllow) {
  auto ok = CheckFields(json{{"session_id", "s"}, {"pid", 7}, {"max_bytes", nullptr}}, kReadOutputTool);
  ASSERT_TRUE(ok.has_value()) << ok.error().detail;
  EXPECT_EQ(*ok, (json{{"session_id", "s"}, {"pid", 7}}));
  struct Case {
    json arguments;
    const char* type;
    const char* field;
  } cases[] = {
      {{{"session_id", "s"}, {"pid", 7}, {"colour", 1}}, "unknown-field", "colour"},
      {{{"pid", 7}}, "missing-field", "session_id"},
      {{{"session_id", "s"}}, "missing-field", "pid"},
      {{{"session_id", "s"}, {"pid", "7"}}, "wrong-type", "pid"},
      {{{"session_id", ""}, {"pid", 7}}, "invalid-value", "session_id"},
      {{{"session_id", "s"}, {"pid", 0}}, "invalid-value", "pid"},
      {{{"session_id", "s"}, {"pid", 7}, {"wait_seconds", 31}}, "invalid-value", "wait_seconds"},
      {{{"session_id", "s"}, {"pid", 7}, {"offset", -1}}, "invalid-value", "offset"},
      {{{"session_id", "s"}, {"pid", 7}, {"max_bytes", 18446744073709551615u}}, "invalid-value", "max_bytes"},
  };
  for (const auto& c : cases) {
    auto fault = CheckFields(c.arguments, kReadOutputTool);
    ASSERT_FALSE(fault.has_value()) << c.arguments.dump();
    EXPECT_EQ(fault.error().type, c.type) << c.arguments.dump() << ": " << fault.error().detail;
    EXPECT_EQ(fault.error().field, c.field) << c.arguments.dump();
  }
  EXPECT_EQ(CheckFields(json{{"pid", "7"}, {"session_id", "s"}}, kSignalProcessTool).error().detail,
            "'pid' must be an integer, not a string");
}

TEST(RequestSchema, AProcessSpecAndASignalAreReadOnceForBothFrontEnds) {
  auto spec = ReadProcessSpec(json{{"argv", {"cat"}}, {"stdin", true}, {"tag", "t"}});
  ASSERT_TRUE(spec.has_value()) << spec.error().detail;
  EXPECT_EQ(spec->argv, std::vector<std::string>{"cat"});
  EXPECT_TRUE(spec->stdin);
  EXPECT_EQ(spec->tag, "t");
  EXPECT_EQ(ReadProcessSpec(json::object()).error().type, "invalid-value");
  EXPECT_EQ(ReadSignal(json("SIGKILL")), 9);
  EXPECT_EQ(ReadSignal(json("term")), 15);
  EXPECT_EQ(ReadSignal(json(2)), 2);
  EXPECT_EQ(ReadSignal(json(65)), std::nullopt);
  EXPECT_EQ(ReadSignal(json(true)), std::nullopt);
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
      if (field->id == FieldId::kLimits && (request & kTools) != 0) continue;
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
