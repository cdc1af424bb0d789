// ProtoToJson against protobuf's own printer (MessageToJsonString with the
// proto field names and default primitives printed), on matrix's report
// messages filled by reflection: every field of every report kind, with
// strings that need escaping or are not UTF-8, doubles at the edges of
// 15 and 17 digits and not finite, integer extremes, unknown enum values,
// empty and unset fields.

#include "matrix/core/proto_json.h"

#include <cmath>
#include <cstdlib>
#include <cstdint>
#include <limits>
#include <string>

#include "google/protobuf/descriptor.h"
#include "google/protobuf/source_context.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "matrix/proto/issue.pb.h"

namespace matrix {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

const std::string kStrings[] = {
    "",
    "plain",
    "std::vector<int>::operator[](a & b) \"quoted\" \\ / \n\t\r\b\f \x01\x1f\x7f",
    "\xc3\xa9t\xc3\xa9 \xc2\x85 \xc2\xa0 \xc2\xad \xd8\x80 \xdb\x9d \xdc\x8f \xe1\x9e\xb4",
    "\xe2\x80\x8b \xe2\x80\xa8 \xe2\x80\xae \xe2\x81\xa0 \xe2\x81\xaa \xef\xbb\xbf \xef\xbf\xb9",
    "\xf0\x9f\x98\x80 \xf3\xa0\x80\x81 \xf0\x9d\x85\xb3 \xf3\xa0\x80\xa0 \xe4\xb8\xad",
    "bad lead \xff \x80 \xbf end",
    "broken \xc3( \xe2\x82 x \xed\xa0\x80 surrogate \xf4\x90\x80\x80 too big",
    "cut short \xe2\x82",
};
const double kDoubles[] = {0.0,     -0.0,    0.1,     1.0 / 3,  1e300,  1e-300, 5e-324,
                           1e15,    1e16,    1e21,    100.0,    -2.5,   1007.6680835193434,
                           123456789012345678.0, std::numeric_limits<double>::quiet_NaN(),
                           std::numeric_limits<double>::infinity(),
                           -std::numeric_limits<double>::infinity()};
const int64_t kInts[] = {0, 1, -1, 42, std::numeric_limits<int32_t>::min(),
                         std::numeric_limits<int32_t>::max(), std::numeric_limits<int64_t>::min(),
                         std::numeric_limits<int64_t>::max()};

template <typename T, size_t N>
const T& Pick(const T (&values)[N], int k) {
  return values[static_cast<size_t>(k) % N];
}

// Sets one value of `f` (adds one when repeated) chosen by `k`.
void SetValue(Message* m, const FieldDescriptor* f, int k, int depth);

// Fills `m` by reflection; `seed` varies the values, which fields stay
// unset and how long the repeated ones are (0, 1 or 2 elements).
void Fill(Message* m, int seed, int depth) {
  const Descriptor* d = m->GetDescriptor();
  const Reflection* r = m->GetReflection();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    const int k = seed * 7 + i;
    if (const auto* oneof = f->containing_oneof()) {
      if (oneof->field(seed % oneof->field_count()) != f) continue;
    }
    if (f->is_repeated()) {
      for (int j = 0; j < (seed + i) % 3; ++j) SetValue(m, f, k + j, depth);
      continue;
    }
    if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE && (depth > 2 || (seed + i) % 5 == 0)) {
      continue;  // Unset.
    }
    if ((seed + i) % 4 == 0 && f->cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE) continue;
    SetValue(m, f, k, depth);
  }
  (void)r;
}

void SetValue(Message* m, const FieldDescriptor* f, int k, int depth) {
  const Reflection* r = m->GetReflection();
  const bool rep = f->is_repeated();
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32: {
      const auto v = static_cast<int32_t>(Pick(kInts, k));
      rep ? r->AddInt32(m, f, v) : r->SetInt32(m, f, v);
      break;
    }
    case FieldDescriptor::CPPTYPE_UINT32: {
      const auto v = static_cast<uint32_t>(Pick(kInts, k));
      rep ? r->AddUInt32(m, f, v) : r->SetUInt32(m, f, v);
      break;
    }
    case FieldDescriptor::CPPTYPE_INT64:
      rep ? r->AddInt64(m, f, Pick(kInts, k)) : r->SetInt64(m, f, Pick(kInts, k));
      break;
    case FieldDescriptor::CPPTYPE_UINT64: {
      const auto v = static_cast<uint64_t>(Pick(kInts, k));
      rep ? r->AddUInt64(m, f, v) : r->SetUInt64(m, f, v);
      break;
    }
    case FieldDescriptor::CPPTYPE_DOUBLE:
      rep ? r->AddDouble(m, f, Pick(kDoubles, k)) : r->SetDouble(m, f, Pick(kDoubles, k));
      break;
    case FieldDescriptor::CPPTYPE_BOOL:
      rep ? r->AddBool(m, f, k % 2 == 1) : r->SetBool(m, f, k % 2 == 1);
      break;
    case FieldDescriptor::CPPTYPE_ENUM: {
      // A known value, or one no enum value has (proto3 keeps it).
      const int v = k % 3 == 2 ? 99 : f->enum_type()->value(k % f->enum_type()->value_count())->number();
      rep ? r->AddEnumValue(m, f, v) : r->SetEnumValue(m, f, v);
      break;
    }
    case FieldDescriptor::CPPTYPE_STRING:
      rep ? r->AddString(m, f, Pick(kStrings, k)) : r->SetString(m, f, Pick(kStrings, k));
      break;
    case FieldDescriptor::CPPTYPE_MESSAGE:
      Fill(rep ? r->AddMessage(m, f) : r->MutableMessage(m, f), k, depth + 1);
      break;
    default:
      FAIL() << f->full_name() << ": a field kind matrix's reports do not have";
  }
}

std::string Protobufs(const Message& m) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  std::string json;
  EXPECT_TRUE(google::protobuf::util::MessageToJsonString(m, &json, options).ok());
  return json;
}

TEST(ProtoJsonTest, EmptyMessages_PrintAsProtobufDoes) {
  EXPECT_EQ(ProtoToJson(proto::Issue()), Protobufs(proto::Issue()));
  EXPECT_EQ(ProtoToJson(proto::Timeline()), Protobufs(proto::Timeline()));
  proto::Issue issue;
  issue.mutable_frame();  // A oneof member set, every field at its default.
  issue.mutable_timeline()->add_dispatches();
  EXPECT_EQ(ProtoToJson(issue), Protobufs(issue));
  EXPECT_NE(ProtoToJson(issue).find("\"frame\":{\"scene\":\"\""), std::string::npos);
}

TEST(ProtoJsonTest, EveryReportKindFilled_PrintsAsProtobufDoes) {
  // Each seed picks a report of the oneof in turn (5 kinds) and other values.
  for (int seed = 0; seed < 60; ++seed) {
    proto::Issue issue;
    Fill(&issue, seed, 0);
    ASSERT_EQ(ProtoToJson(issue), Protobufs(issue)) << "seed " << seed;
  }
}

TEST(ProtoJsonTest, EveryStringAndDouble_PrintsAsProtobufDoes) {
  for (const std::string& s : kStrings) {
    for (const double v : kDoubles) {
      proto::Issue issue;
      issue.set_tag(s);
      issue.mutable_device()->set_cpu_app(v);
      issue.mutable_timeline()->set_detected_by(s + s);
      ASSERT_EQ(ProtoToJson(issue), Protobufs(issue)) << s << " " << v;
    }
  }
}

TEST(ProtoJsonTest, DoublesNeedingSeventeenDigits_KeepThem) {
  proto::DeviceInfo device;
  device.set_cpu_app(0.1 + 0.2);
  EXPECT_NE(ProtoToJson(device).find("\"cpu_app\":0.30000000000000004"), std::string::npos);
  device.set_cpu_app(0.5);
  EXPECT_NE(ProtoToJson(device).find("\"cpu_app\":0.5,"), std::string::npos);
}

// What keeps the printer light in a monitored program: protobuf builds a
// message's descriptors (about 0.3 MB of its code and heap) only on demand,
// and printing a report does not ask for them. In a fresh process.
TEST(ProtoJsonDeathTest, AReport_PrintsWithoutBuildingDescriptors) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        proto::Issue issue;
        issue.mutable_frame()->set_fps(60);
        const bool printed = ProtoToJson(issue).find("\"fps\":60,") != std::string::npos;
        const bool built = google::protobuf::DescriptorPool::generated_pool()->InternalIsFileLoaded(
            "matrix/proto/issue.proto");
        std::exit(printed && !built ? 0 : 1);
      },
      testing::ExitedWithCode(0), "");
}

TEST(ProtoJsonTest, MessagesOutsideTheReports_GoToProtobufsPrinter) {
  google::protobuf::SourceContext context;
  context.set_file_name("a<b>.proto");
  EXPECT_EQ(ProtoToJson(context), "{\"file_name\":\"a\\u003cb\\u003e.proto\"}");
}

}  // namespace
}  // namespace matrix
