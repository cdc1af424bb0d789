// The timeline end to end: a real, method-traced program runs known
// dispatches (three 50 ms steps), three 40 ms frames and then hangs for
// 1.5 s. The ANR report's timeline is written as the JSON-lines sink writes
// issues, exported by the matrix-report binary (`timeline`), and the
// exported trace-event file is checked by an independent reader
// (tests/e2e/timeline_check.js under node): the trace-event schema, nesting
// on every track, and every step, frame, call and the detection instant
// against what the program measured itself (tolerance 15 ms: the program
// times inside its callbacks, the recorder at the dispatch's edges).

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "e2e_util.h"
#include "gtest/gtest.h"
#include "matrix/core/choreographer.h"
#include "matrix/core/handler.h"
#include "matrix/core/tick_clock.h"
#include "matrix/plugins/trace_plugin.h"
#include "uninstrumented.h"

namespace app {
__attribute__((noinline)) void Step() { e2e::SpinFor(absl::Milliseconds(50)); }
__attribute__((noinline)) void Draw() { e2e::SpinFor(absl::Milliseconds(40)); }
__attribute__((noinline)) void Hang() { e2e::SpinFor(absl::Milliseconds(1500)); }
}  // namespace app

namespace {

using matrix::TimeTicks;

struct Span {
  TimeTicks begin;
  TimeTicks end;
};

std::string SpanJson(int tid, const std::string& name, const Span& s, int64_t tol_us) {
  return absl::StrCat(R"({"tid":)", tid, R"(,"name_contains":")", name, R"(","begin_ns":)",
                      s.begin.ToNanoseconds(), R"(,"dur_us":)",
                      absl::ToInt64Microseconds(s.end - s.begin), R"(,"tol_us":)", tol_us,
                      R"(,"unfinished":false})");
}

int RunCommand(const std::string& command) {
  const int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(TimelineE2ETest, AnrTimeline_ExportedTraceMatchesWhatTheProgramDid) {
  auto config = matrix::TraceConfig::Builder()
                    .EnableAnrTrace(true)
                    .EnableEvilMethodTrace(true)
                    .SetLagThreshold(absl::Milliseconds(500))
                    .SetAnrThreshold(absl::Seconds(1))
                    // Every event whole: a Debug build traces the inline
                    // helpers too (thousands of calls), and the default
                    // 64 KiB budget would merge them (timeline_budget_test
                    // checks that on its own).
                    .SetTimelineMaxBytes(size_t{8} << 20)
                    .Build();
  ASSERT_TRUE(config.ok()) << config.status();
  e2e::TracedProgram program(*config);
  matrix::Handler handler(program.looper(), "app::TimelineE2E");
  std::vector<Span> steps, draws;
  TimeTicks hang_begin;
  for (int i = 0; i < 3; ++i) {
    handler.PostDelayed(
        [&] {
          const TimeTicks t0 = matrix::MonotonicNow();
          app::Step();
          steps.push_back({t0, matrix::MonotonicNow()});
        },
        absl::Milliseconds(100 * (i + 1)));
  }
  for (int i = 0; i < 3; ++i) {
    handler.PostDelayed(
        [&] {
          matrix::Choreographer::GetInstance()->PostCallback(
              matrix::Choreographer::kTraversal, [&] {
                const TimeTicks t0 = matrix::MonotonicNow();
                app::Draw();
                draws.push_back({t0, matrix::MonotonicNow()});
              });
        },
        absl::Milliseconds(400 + 100 * i));
  }
  handler.PostDelayed(
      [&] {
        hang_begin = matrix::MonotonicNow();
        app::Hang();
      },
      absl::Milliseconds(800));
  program.RunFor(absl::Milliseconds(2500));
  ASSERT_TRUE(program.listener().WaitFor(
      [](const auto& issues) {
        for (const auto& issue : issues) {
          if (issue.proto().has_anr() && issue.proto().anr().detail() == matrix::proto::ANR) {
            return true;
          }
        }
        return false;
      },
      absl::Seconds(10)));
  ASSERT_EQ(steps.size(), 3u);
  ASSERT_EQ(draws.size(), 3u);

  // The issues as the JSON-lines sink writes them.
  const std::string dir = absl::StrCat(::testing::TempDir(), "/timeline-e2e-", getpid());
  ASSERT_EQ(RunCommand(absl::StrCat("mkdir -p ", dir)), 0);
  {
    std::ofstream issues(dir + "/issues.jsonl");
    for (const matrix::Issue& issue : program.listener().issues()) issues << issue.ToJson() << "\n";
  }
  const std::string trace = dir + "/anr-trace.json";
  ASSERT_EQ(RunCommand(absl::StrCat(MATRIX_REPORT_BINARY, " timeline --detail=ANR -o ", trace,
                                    " ", dir, "/issues.jsonl")),
            0);

  // What the program did.
  std::vector<std::string> spans;
  for (const Span& s : steps) {
    spans.push_back(SpanJson(1, "timeline_e2e_test.cc", s, 15000));  // The dispatch...
    spans.push_back(SpanJson(4, "app::Step", s, 15000));        // ...and its traced call.
  }
  for (const Span& s : draws) {
    spans.push_back(SpanJson(3, "traversal", s, 15000));
    spans.push_back(SpanJson(4, "app::Draw", s, 15000));
  }
  spans.push_back(absl::StrCat(R"({"tid":1,"name_contains":"timeline_e2e_test.cc","begin_ns":)",
                               hang_begin.ToNanoseconds(),
                               R"(,"min_dur_us":1000000,"tol_us":15000,"unfinished":true})"));
  spans.push_back(absl::StrCat(R"({"tid":4,"name_contains":"app::Hang","begin_ns":)",
                               hang_begin.ToNanoseconds(),
                               R"(,"min_dur_us":1000000,"tol_us":15000,"unfinished":true})"));
  const std::string expect = absl::StrCat(
      R"({"spans":[)", absl::StrJoin(spans, ","), "],",
      // The watchdog detects at the 1 s crossing (+ its wake-up and capture).
      // The crossing counts from the dispatch's begin, which is a little
      // before the handler read hang_begin (137 us under ThreadSanitizer):
      // the spans' tolerance of 15 ms.
      R"("instant":{"tid":5,"min_ns":)",
      (hang_begin + absl::Seconds(1) - absl::Milliseconds(15)).ToNanoseconds(),
      R"(,"max_ns":)", (hang_begin + absl::Milliseconds(1100)).ToNanoseconds(), "},",
      // 40 ms frames at 60 Hz drop at least two vsyncs each.
      R"("min_count":{"1":7,"2":3,"3":3,"4":7},)",
      R"("min_arg":[{"tid":2,"arg":"dropped_frames","min":2,"count":3}],)",
      R"("contained":[[3,2],[2,1],[4,1]]})");
  {
    std::ofstream out(dir + "/expect.json");
    out << expect;
  }
  EXPECT_EQ(RunCommand(absl::StrCat(MATRIX_NODE, " ", MATRIX_TIMELINE_CHECK, " ", trace, " ", dir,
                             "/expect.json")),
            0)
      << "trace: " << trace;
}

}  // namespace
