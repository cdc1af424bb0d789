// Strings of reports come from other machines (fleet) and other users: the
// text views (show, summary, group, fleet top/new/fps/show) print them
// through TextEscape, so no control character of a report reaches the
// terminal and no LF of a field starts a line of its own.

#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "google/protobuf/reflection.h"
#include "gtest/gtest.h"
#include "matrix/report/cli.h"
#include "matrix/report/fleet.h"
#include "matrix/report/format_util.h"
#include "matrix/report/text_render.h"
#include "report_test_util.h"

namespace matrix::report {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;
using test_util::kBaseTimeMs;
using test_util::ScratchDir;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

RunEnvironment Environment() {
  return {.now = absl::FromUnixMillis(kBaseTimeMs), .local_zone = absl::UTCTimeZone()};
}

TEST(TextEscapeTest, EscapesControlsBackslashC1AndInvalidUtf8) {
  EXPECT_EQ(TextEscape("app::Draw() x"), "app::Draw() x");
  EXPECT_EQ(TextEscape("a\x1b[2Jb"), "a\\x1b[2Jb");
  EXPECT_EQ(TextEscape("a\nb\rc\td"), "a\\nb\\rc\\td");
  EXPECT_EQ(TextEscape(std::string("a\0b", 3)), "a\\x00b");
  EXPECT_EQ(TextEscape("\x07\x7f"), "\\x07\\x7f");
  EXPECT_EQ(TextEscape("C:\\tmp\\n"), "C:\\\\tmp\\\\n");
  // UTF-8 passes through; U+009B (a CSI to some terminals) does not.
  EXPECT_EQ(TextEscape("Größe 日本 🎉"), "Größe 日本 🎉");
  EXPECT_EQ(TextEscape("a\xc2\x9b" "31mb"), "a\\xc2\\x9b31mb");
  EXPECT_EQ(TextEscape("\xc2\xa0"), "\xc2\xa0");  // U+00A0, not a control.
  // Bytes that are not UTF-8: a lone C1 byte, a truncated sequence, an
  // overlong form, a surrogate, beyond U+10FFFF.
  EXPECT_EQ(TextEscape("a\x9b" "b"), "a\\x9bb");
  EXPECT_EQ(TextEscape("\xe6\x97"), "\\xe6\\x97");
  EXPECT_EQ(TextEscape("\xc0\xaf"), "\\xc0\\xaf");
  EXPECT_EQ(TextEscape("\xed\xa0\x80"), "\\xed\\xa0\\x80");
  EXPECT_EQ(TextEscape("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80");
}

// What a hostile report puts in every string: a title-setting OSC, a screen
// clear, CR to overwrite the line, LF to forge a line, BEL, DEL, a C1 CSI.
std::string Hostile(absl::string_view name) {
  return absl::StrCat(name, "\x1b]0;owned\x07\x1b[2J\rX\n|FORGED line\x7f\xc2\x9b" "31m\t!");
}

// Every string field of `message` (and of its messages, to `depth`) set to
// Hostile(field name), numbers to 3, booleans true, two of each repeated
// field. `skip_oneof` is left unset.
void FillHostile(Message& message, int depth,
                 const google::protobuf::OneofDescriptor* skip_oneof = nullptr) {
  const Reflection* r = message.GetReflection();
  const google::protobuf::Descriptor* d = message.GetDescriptor();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    if (skip_oneof != nullptr && f->containing_oneof() == skip_oneof) continue;
    const int n = f->is_repeated() ? 2 : 1;
    for (int k = 0; k < n; ++k) {
      switch (f->cpp_type()) {
        case FieldDescriptor::CPPTYPE_STRING:
          f->is_repeated() ? r->AddString(&message, f, Hostile(f->name()))
                           : r->SetString(&message, f, Hostile(f->name()));
          break;
        case FieldDescriptor::CPPTYPE_INT32:
          f->is_repeated() ? r->AddInt32(&message, f, 3) : r->SetInt32(&message, f, 3);
          break;
        case FieldDescriptor::CPPTYPE_INT64:
          f->is_repeated() ? r->AddInt64(&message, f, 3) : r->SetInt64(&message, f, 3);
          break;
        case FieldDescriptor::CPPTYPE_UINT32:
          f->is_repeated() ? r->AddUInt32(&message, f, 3) : r->SetUInt32(&message, f, 3);
          break;
        case FieldDescriptor::CPPTYPE_UINT64:
          f->is_repeated() ? r->AddUInt64(&message, f, 3) : r->SetUInt64(&message, f, 3);
          break;
        case FieldDescriptor::CPPTYPE_DOUBLE:
          f->is_repeated() ? r->AddDouble(&message, f, 3) : r->SetDouble(&message, f, 3);
          break;
        case FieldDescriptor::CPPTYPE_FLOAT:
          f->is_repeated() ? r->AddFloat(&message, f, 3) : r->SetFloat(&message, f, 3);
          break;
        case FieldDescriptor::CPPTYPE_BOOL:
          f->is_repeated() ? r->AddBool(&message, f, true) : r->SetBool(&message, f, true);
          break;
        case FieldDescriptor::CPPTYPE_ENUM:
          break;
        case FieldDescriptor::CPPTYPE_MESSAGE:
          if (depth > 0) {
            FillHostile(f->is_repeated() ? *r->AddMessage(&message, f)
                                         : *r->MutableMessage(&message, f),
                        depth - 1);
          }
          break;
      }
    }
  }
}

// One issue per report kind, every string hostile, plus a report kind this
// build does not know (raw JSON fields, hostile names and values).
std::vector<std::string> HostileLines() {
  std::vector<std::string> lines;
  const google::protobuf::OneofDescriptor* report =
      proto::Issue::descriptor()->FindOneofByName("report");
  for (int i = 0; i < report->field_count(); ++i) {
    proto::Issue issue;
    FillHostile(issue, 4, report);
    issue.set_time_ms(kBaseTimeMs + i);
    FillHostile(*issue.GetReflection()->MutableMessage(&issue, report->field(i)), 4);
    lines.push_back(test_util::Line(issue));
  }
  const std::string h = "\\u001b]0;owned\\u0007\\r\\n|FORGED line\\u007f\\u009b";
  lines.push_back(absl::StrCat(R"({"tag":"Tag)", h, R"(","key":"key)", h, R"(","timeMs":")",
                               kBaseTimeMs, R"(","newKind)", h, R"(":{"name)", h, R"(":"value)", h,
                               R"(","list":["a)", h, R"(",{"function":"f)", h, R"(","module":"m)",
                               h, R"("}]}})"));
  return lines;
}

// `text` has no control character but LF, no C1 control, and no line that
// a field's LF started.
::testing::AssertionResult IsTerminalSafe(const std::string& text) {
  for (size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    const bool control = (c < 0x20 && c != '\n') || c == 0x7f;
    const bool c1 = c == 0xc2 && i + 1 < text.size() &&
                    static_cast<unsigned char>(text[i + 1]) >= 0x80 &&
                    static_cast<unsigned char>(text[i + 1]) < 0xa0;
    if (control || c1) {
      return ::testing::AssertionFailure()
             << "control byte " << static_cast<int>(c) << " at " << i << " in: "
             << text.substr(i < 80 ? 0 : i - 80, 160);
    }
  }
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (absl::StartsWith(absl::StripLeadingAsciiWhitespace(line), "|FORGED")) {
      return ::testing::AssertionFailure() << "a forged line: " << line;
    }
  }
  return ::testing::AssertionSuccess();
}

TEST(TextEscapeTest, ShowSummaryAndGroupPrintNoControlCharacterOfAReport) {
  ScratchDir dir("hostile");
  const std::string file = dir.Write("issues.jsonl", HostileLines());
  for (const char* command : {"show", "summary", "group"}) {
    SCOPED_TRACE(command);
    const test_util::RunOutput run = test_util::RunReport({command, file}, "", Environment());
    EXPECT_EQ(run.code, 0) << run.err;
    EXPECT_THAT(run.err, IsEmpty());
    EXPECT_TRUE(IsTerminalSafe(run.out));
    // The strings are there, escaped.
    EXPECT_THAT(run.out, HasSubstr("\\x1b]0;owned\\x07\\x1b[2J\\rX\\n|FORGED line\\x7f\\xc2\\x9b"));
  }
  const test_util::RunOutput show = test_util::RunReport({"show", file}, "", Environment());
  // Keys, stack frames, scenes and the raw fields of an unknown kind.
  for (const char* what : {"key", "function", "scene", "newKind", "name", "value"}) {
    EXPECT_THAT(show.out, HasSubstr(absl::StrCat(what, "\\x1b]0;owned"))) << what;
  }
}

TEST(TextEscapeTest, MalformedLineReasonsOnStderrAreEscaped) {
  ScratchDir dir("malformed");
  const std::string file =
      dir.Write("issues.jsonl", {std::string("{\"tag\":\"x\",\"\x1b[2J\":") + "\x1b]0;owned\x07}"});
  const test_util::RunOutput run = test_util::RunReport({"summary", file}, "", Environment());
  EXPECT_TRUE(IsTerminalSafe(run.err));
}

TEST(TextEscapeTest, FleetTopFpsAndShowPrintNoControlCharacter) {
  const FleetKey key{.tag = Hostile("tag"),
                     .detail = Hostile("detail"),
                     .key = Hostile("key"),
                     .hosts = 2,
                     .count = 3,
                     .worst_ms = 812,
                     .median_ms = 700,
                     .version = Hostile("version")};
  for (bool is_new : {false, true}) {
    const std::string text = RenderFleetKeys({key}, is_new);
    EXPECT_TRUE(IsTerminalSafe(text));
    EXPECT_THAT(text, HasSubstr("key\\x1b]0;owned"));
    EXPECT_THAT(text, HasSubstr("version\\x1b]0;owned"));
  }
  FleetFps fps;
  fps.scene = Hostile("scene");
  fps.version = Hostile("version");
  const std::string fps_text = RenderFleetFps({fps});
  EXPECT_TRUE(IsTerminalSafe(fps_text));
  EXPECT_THAT(fps_text, HasSubstr("scene\\x1b]0;owned"));

  FleetShow show;
  show.count = 3;
  show.hosts = 2;
  show.versions = {Hostile("v1"), Hostile("v2")};
  const std::vector<std::string> lines = HostileLines();
  absl::StatusOr<IssueRecord> worst = ParseIssueLine(lines[0], {.file = "matrix.issues@x"});
  ASSERT_TRUE(worst.ok()) << worst.status();
  show.worst = *std::move(worst);
  const std::string show_text = RenderFleetShow(Hostile("asked"), show, {});
  EXPECT_TRUE(IsTerminalSafe(show_text));
  EXPECT_THAT(show_text, HasSubstr("v2\\x1b]0;owned"));
  EXPECT_THAT(show_text, HasSubstr("asked\\x1b]0;owned"));
}

}  // namespace
}  // namespace matrix::report
