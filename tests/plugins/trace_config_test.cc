// Tests for TraceConfig::Builder: Matrix's defaults and validation.

#include "matrix/plugins/trace_config.h"

#include <csignal>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace {

using ::matrix::LooperMonitor;
using ::matrix::TraceConfig;
using ::testing::HasSubstr;

TEST(TraceConfigTest, Defaults_AreMatrixs) {
  absl::StatusOr<TraceConfig> config = TraceConfig::Builder().Build();
  ASSERT_TRUE(config.ok()) << config.status();
  const TraceConfig& c = *config;
  // Every tracer off.
  EXPECT_FALSE(c.fps);
  EXPECT_FALSE(c.evil_method);
  EXPECT_FALSE(c.anr);
  EXPECT_FALSE(c.startup);
  EXPECT_FALSE(c.idle_handler);
  EXPECT_FALSE(c.touch_event);
  EXPECT_FALSE(c.signal_anr);
  EXPECT_FALSE(c.method_trace_enabled());
  // Thresholds.
  EXPECT_EQ(c.evil_threshold, absl::Milliseconds(700));
  EXPECT_EQ(c.anr_threshold, absl::Seconds(5));
  EXPECT_EQ(c.lag_threshold, absl::Seconds(2));
  EXPECT_EQ(c.idle_handler_threshold, absl::Seconds(2));
  EXPECT_EQ(c.touch_event_threshold, absl::Seconds(2));
  EXPECT_EQ(c.cold_startup_threshold, absl::Seconds(10));
  EXPECT_EQ(c.warm_startup_threshold, absl::Seconds(4));
  EXPECT_EQ(c.drop_thresholds.normal, 3);
  EXPECT_EQ(c.drop_thresholds.middle, 9);
  EXPECT_EQ(c.drop_thresholds.high, 24);
  EXPECT_EQ(c.drop_thresholds.frozen, 42);
  EXPECT_EQ(c.fps_time_slice, absl::Seconds(10));
  EXPECT_FALSE(c.fps_in_background);
  EXPECT_FALSE(c.debug);
  EXPECT_FALSE(c.dev_env);
  EXPECT_EQ(c.signal_anr_signal, 3);  // SIGQUIT.
  EXPECT_EQ(c.looper_source, LooperMonitor::Source::kDispatchObserver);
  EXPECT_TRUE(c.use_choreographer);
  EXPECT_EQ(c.method_trace_buffer_bytes, size_t{8} << 20);
  EXPECT_TRUE(c.splash_scenes.empty());
}

TEST(TraceConfigTest, Setters_AreKept) {
  absl::StatusOr<TraceConfig> config = TraceConfig::Builder()
                                           .EnableFps(true)
                                           .EnableEvilMethodTrace(true)
                                           .EnableAnrTrace(true)
                                           .SetEvilThreshold(absl::Milliseconds(500))
                                           .SetAnrThreshold(absl::Seconds(4))
                                           .SetLagThreshold(absl::Seconds(1))
                                           .SetDropThresholds(2, 6, 20, 40)
                                           .SetFpsTimeSlice(absl::Seconds(2))
                                           .SetSplashScenes({"Splash"})
                                           .SetLooperSource(LooperMonitor::Source::kPrinter)
                                           .Build();
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(config->fps);
  EXPECT_TRUE(config->evil_method);
  EXPECT_TRUE(config->anr);
  EXPECT_TRUE(config->method_trace_enabled());
  EXPECT_EQ(config->evil_threshold, absl::Milliseconds(500));
  EXPECT_EQ(config->anr_threshold, absl::Seconds(4));
  EXPECT_EQ(config->lag_threshold, absl::Seconds(1));
  EXPECT_EQ(config->drop_thresholds.normal, 2);
  EXPECT_EQ(config->drop_thresholds.frozen, 40);
  EXPECT_EQ(config->fps_time_slice, absl::Seconds(2));
  EXPECT_EQ(config->splash_scenes, std::vector<std::string>({"Splash"}));
  EXPECT_EQ(config->looper_source, LooperMonitor::Source::kPrinter);
}

// Each duration setter, with the field name the error must mention.
struct DurationCase {
  const char* field;
  TraceConfig::Builder& (TraceConfig::Builder::*set)(absl::Duration);
};

class TraceConfigDurationTest : public ::testing::TestWithParam<DurationCase> {};

TEST_P(TraceConfigDurationTest, ZeroNegativeOrInfinite_IsInvalidArgumentNamingTheField) {
  const DurationCase& c = GetParam();
  for (absl::Duration bad : {absl::ZeroDuration(), absl::Milliseconds(-1), -absl::Seconds(10),
                             absl::InfiniteDuration()}) {
    TraceConfig::Builder builder;
    (builder.*c.set)(bad);
    absl::StatusOr<TraceConfig> config = builder.Build();
    ASSERT_FALSE(config.ok()) << c.field << " = " << bad;
    EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(config.status().message()), HasSubstr(c.field));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Fields, TraceConfigDurationTest,
    ::testing::Values(
        DurationCase{"evil_threshold", &TraceConfig::Builder::SetEvilThreshold},
        DurationCase{"anr_threshold", &TraceConfig::Builder::SetAnrThreshold},
        DurationCase{"lag_threshold", &TraceConfig::Builder::SetLagThreshold},
        DurationCase{"idle_handler_threshold", &TraceConfig::Builder::SetIdleHandlerThreshold},
        DurationCase{"touch_event_threshold", &TraceConfig::Builder::SetTouchEventThreshold},
        DurationCase{"cold_startup_threshold", &TraceConfig::Builder::SetColdStartupThreshold},
        DurationCase{"warm_startup_threshold", &TraceConfig::Builder::SetWarmStartupThreshold},
        DurationCase{"fps_time_slice", &TraceConfig::Builder::SetFpsTimeSlice},
        DurationCase{"cpu_sample_period", &TraceConfig::Builder::SetCpuSamplePeriod}),
    [](const auto& info) { return std::string(info.param.field); });

TEST(TraceConfigTest, DropThresholdsOutOfOrder_AreRejectedWithTheValues) {
  for (auto [n, m, h, f] : {std::tuple{3, 3, 24, 42}, std::tuple{3, 9, 8, 42},
                            std::tuple{3, 9, 24, 24}, std::tuple{0, 9, 24, 42},
                            std::tuple{-1, 9, 24, 42}, std::tuple{42, 24, 9, 3}}) {
    absl::StatusOr<TraceConfig> config = TraceConfig::Builder().SetDropThresholds(n, m, h, f).Build();
    ASSERT_FALSE(config.ok()) << n << "/" << m << "/" << h << "/" << f;
    EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(config.status().message()), HasSubstr("drop thresholds"));
    EXPECT_THAT(std::string(config.status().message()),
                HasSubstr(std::to_string(n) + "/" + std::to_string(m) + "/" + std::to_string(h) +
                          "/" + std::to_string(f)));
  }
  EXPECT_TRUE(TraceConfig::Builder().SetDropThresholds(1, 2, 3, 4).Build().ok());
}

TEST(TraceConfigTest, StackKeyRule_BadPatternIsRejectedAndAGoodOneKept) {
  absl::StatusOr<TraceConfig> bad =
      TraceConfig::Builder().SetStackKeyRule({.skip_modules = {"vendor/lib"}}).Build();
  ASSERT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("\"vendor/lib\""));
  absl::StatusOr<TraceConfig> good =
      TraceConfig::Builder().SetStackKeyRule({.program_modules = {"/usr/lib/app/"}}).Build();
  ASSERT_TRUE(good.ok()) << good.status();
  EXPECT_THAT(good->stack_key_rule.program_modules, testing::ElementsAre("/usr/lib/app/"));
}

TEST(TraceConfigTest, LagNotShorterThanAnr_IsRejectedNamingBoth) {
  for (absl::Duration lag : {absl::Seconds(5), absl::Seconds(6)}) {
    absl::StatusOr<TraceConfig> config = TraceConfig::Builder()
                                             .SetAnrThreshold(absl::Seconds(5))
                                             .SetLagThreshold(lag)
                                             .Build();
    ASSERT_FALSE(config.ok()) << lag;
    EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(config.status().message()), HasSubstr("lag_threshold"));
    EXPECT_THAT(std::string(config.status().message()), HasSubstr("anr_threshold"));
  }
  EXPECT_TRUE(TraceConfig::Builder()
                  .SetAnrThreshold(absl::Seconds(5))
                  .SetLagThreshold(absl::Milliseconds(4999))
                  .Build()
                  .ok());
}

TEST(TraceConfigTest, TinyMethodTraceBuffer_IsRejectedOnlyWhenMethodTracingIsOn) {
  EXPECT_TRUE(TraceConfig::Builder().SetMethodTraceBufferBytes(16).Build().ok());
  absl::StatusOr<TraceConfig> config =
      TraceConfig::Builder().EnableEvilMethodTrace(true).SetMethodTraceBufferBytes(16).Build();
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(std::string(config.status().message()), HasSubstr("method_trace_buffer_bytes"));
}

TEST(TraceConfigTest, ZeroMethodTraceBuffer_IsValidWithMethodTracingOn) {
  absl::StatusOr<TraceConfig> config =
      TraceConfig::Builder().EnableAnrTrace(true).SetMethodTraceBufferBytes(0).Build();
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(config->method_trace_enabled());
  EXPECT_EQ(config->method_trace_buffer_bytes, 0u);
}

TEST(TraceConfigTest, UncatchableSignal_IsRejectedWhenSignalAnrIsOn) {
  EXPECT_TRUE(TraceConfig::Builder().SetSignalAnrSignal(9).Build().ok());  // Off: unused.
  for (int signo : {0, 9, 19, 1000}) {
    absl::StatusOr<TraceConfig> config =
        TraceConfig::Builder().EnableSignalAnrTrace(true).SetSignalAnrSignal(signo).Build();
    ASSERT_FALSE(config.ok()) << signo;
    EXPECT_THAT(std::string(config.status().message()), HasSubstr("signal_anr_signal"));
  }
  EXPECT_TRUE(TraceConfig::Builder().EnableSignalAnrTrace(true).SetSignalAnrSignal(3).Build().ok());
}

TEST(TraceConfigTest, EmptySplashScene_IsRejected) {
  absl::StatusOr<TraceConfig> config = TraceConfig::Builder().SetSplashScenes({"Splash", ""}).Build();
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(std::string(config.status().message()), HasSubstr("splash"));
}

TEST(TraceConfigTest, FaultSignals_AreRejectedAsTheSignalAnrSignal) {
  for (int signo : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP, SIGABRT, SIGSYS}) {
    absl::StatusOr<TraceConfig> config =
        TraceConfig::Builder().EnableSignalAnrTrace(true).SetSignalAnrSignal(signo).Build();
    ASSERT_FALSE(config.ok()) << signo;
    EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(config.status().message()), HasSubstr("signal_anr_signal"));
    EXPECT_THAT(std::string(config.status().message()),
                HasSubstr(std::string("SIG") + sigabbrev_np(signo)));
  }
  for (int signo : {SIGQUIT, SIGUSR1, SIGUSR2, SIGRTMIN}) {
    EXPECT_TRUE(
        TraceConfig::Builder().EnableSignalAnrTrace(true).SetSignalAnrSignal(signo).Build().ok())
        << signo;
  }
}

TEST(TraceConfigTest, SignalsWithADefaultMeaning_AreRejectedAsTheSignalAnrSignal) {
  // SIGTERM or SIGINT taken for a dump would no longer end the process.
  for (int signo : {SIGTERM, SIGINT, SIGHUP, SIGCHLD, SIGALRM, SIGPIPE, SIGCONT, SIGTSTP,
                    SIGWINCH, SIGPROF, SIGRTMIN + 5}) {
    absl::StatusOr<TraceConfig> config =
        TraceConfig::Builder().EnableSignalAnrTrace(true).SetSignalAnrSignal(signo).Build();
    ASSERT_FALSE(config.ok()) << signo;
    EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(config.status().message()), HasSubstr("default meaning"));
  }
  for (int signo : {SIGQUIT, SIGUSR1, SIGUSR2, SIGRTMIN, SIGRTMIN + 4, SIGRTMIN + 6, SIGRTMAX}) {
    EXPECT_TRUE(
        TraceConfig::Builder().EnableSignalAnrTrace(true).SetSignalAnrSignal(signo).Build().ok())
        << signo;
  }
}

TEST(TraceConfigTest, FpsTimeSliceUnderTheMinimum_IsRejected) {
  for (absl::Duration bad : {absl::Microseconds(1), absl::Milliseconds(16),
                             TraceConfig::kMinFpsTimeSlice - absl::Nanoseconds(1)}) {
    absl::StatusOr<TraceConfig> config = TraceConfig::Builder().SetFpsTimeSlice(bad).Build();
    ASSERT_FALSE(config.ok()) << bad;
    EXPECT_THAT(std::string(config.status().message()), HasSubstr("fps_time_slice"));
    EXPECT_THAT(std::string(config.status().message()), HasSubstr("at least 500ms"));
  }
  EXPECT_TRUE(TraceConfig::Builder().SetFpsTimeSlice(TraceConfig::kMinFpsTimeSlice).Build().ok());
}

TEST(TraceConfigTest, Validate_ChecksAConfigFilledInByHand) {
  TraceConfig config;
  EXPECT_TRUE(config.Validate().ok());
  config.evil_method = true;
  config.evil_threshold = absl::ZeroDuration();
  config.fps_time_slice = absl::Microseconds(1);
  const absl::Status status = config.Validate();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("evil_threshold"));
  EXPECT_THAT(std::string(status.message()), HasSubstr("fps_time_slice"));
}

TEST(TraceConfigTest, TimelineMaxBytes_IsZeroOrAtLeastTheMinimum) {
  EXPECT_EQ(TraceConfig().timeline_max_bytes, size_t{64} << 10);
  EXPECT_TRUE(TraceConfig::Builder().SetTimelineMaxBytes(0).Build().ok());
  EXPECT_TRUE(TraceConfig::Builder()
                  .SetTimelineMaxBytes(TraceConfig::kMinTimelineMaxBytes)
                  .Build()
                  .ok());
  absl::StatusOr<TraceConfig> config = TraceConfig::Builder().SetTimelineMaxBytes(100).Build();
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(std::string(config.status().message()), HasSubstr("timeline_max_bytes"));
}

TEST(TraceConfigTest, CpuSamplePeriodUnderTheMinimum_IsRejected) {
  for (absl::Duration bad : {absl::Nanoseconds(1), absl::Milliseconds(1),
                             TraceConfig::kMinCpuSamplePeriod - absl::Nanoseconds(1)}) {
    absl::StatusOr<TraceConfig> config = TraceConfig::Builder().SetCpuSamplePeriod(bad).Build();
    ASSERT_FALSE(config.ok()) << bad;
    EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(config.status().message()), HasSubstr("cpu_sample_period"));
    EXPECT_THAT(std::string(config.status().message()), HasSubstr("at least 10ms"));
  }
  EXPECT_EQ(TraceConfig::kMinCpuSamplePeriod, absl::Milliseconds(10));
  EXPECT_TRUE(
      TraceConfig::Builder().SetCpuSamplePeriod(TraceConfig::kMinCpuSamplePeriod).Build().ok());
}

TEST(TraceConfigTest, HugeMethodTraceBuffer_IsRejectedWhenMethodTracingIsOn) {
  const size_t tebibyte = size_t{1} << 40;
  EXPECT_TRUE(TraceConfig::Builder().SetMethodTraceBufferBytes(tebibyte).Build().ok());  // Off.
  for (size_t bad : {tebibyte, TraceConfig::kMaxMethodTraceBufferBytes + 1}) {
    absl::StatusOr<TraceConfig> config =
        TraceConfig::Builder().EnableAnrTrace(true).SetMethodTraceBufferBytes(bad).Build();
    ASSERT_FALSE(config.ok()) << bad;
    EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(config.status().message()), HasSubstr("method_trace_buffer_bytes"));
    EXPECT_THAT(std::string(config.status().message()), HasSubstr(std::to_string(bad)));
  }
  EXPECT_EQ(TraceConfig::kMaxMethodTraceBufferBytes, size_t{1} << 30);
  EXPECT_TRUE(TraceConfig::Builder()
                  .EnableAnrTrace(true)
                  .SetMethodTraceBufferBytes(TraceConfig::kMaxMethodTraceBufferBytes)
                  .Build()
                  .ok());
}

TEST(TraceConfigTest, ThreeInvalidFields_AreAllNamedInOneError) {
  absl::StatusOr<TraceConfig> config = TraceConfig::Builder()
                                           .EnableEvilMethodTrace(true)
                                           .EnableSignalAnrTrace(true)
                                           .SetSignalAnrSignal(SIGSEGV)
                                           .SetCpuSamplePeriod(absl::Nanoseconds(1))
                                           .SetMethodTraceBufferBytes(size_t{1} << 40)
                                           .Build();
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string message(config.status().message());
  EXPECT_THAT(message, HasSubstr("signal_anr_signal"));
  EXPECT_THAT(message, HasSubstr("cpu_sample_period"));
  EXPECT_THAT(message, HasSubstr("method_trace_buffer_bytes"));
}

TEST(TraceConfigTest, EveryKindOfCheck_AccumulatesIntoOneError) {
  absl::StatusOr<TraceConfig> config = TraceConfig::Builder()
                                           .SetEvilThreshold(absl::ZeroDuration())
                                           .SetFpsTimeSlice(absl::ZeroDuration())
                                           .SetDropThresholds(3, 3, 3, 3)
                                           .SetLagThreshold(absl::Seconds(9))
                                           .SetSplashScenes({""})
                                           .Build();
  ASSERT_FALSE(config.ok());
  const std::string message(config.status().message());
  EXPECT_THAT(message, HasSubstr("TraceConfig: "));
  EXPECT_THAT(message, HasSubstr("evil_threshold"));
  EXPECT_THAT(message, HasSubstr("fps_time_slice"));
  EXPECT_THAT(message, HasSubstr("drop thresholds"));
  EXPECT_THAT(message, HasSubstr("lag_threshold (9s) must be shorter than anr_threshold"));
  EXPECT_THAT(message, HasSubstr("splash"));
}

}  // namespace
