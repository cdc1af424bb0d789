#include "matrix/core/logging.h"

#include <atomic>
#include <memory>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "spdlog/async.h"
#include "spdlog/async_logger.h"
#include "spdlog/sinks/stdout_color_sinks.h"

namespace matrix {
namespace {

// Our own pool, so the user's spdlog registry and thread pool stay untouched.
// Never destroyed: loggers may be used until the process exits. 1024 queued
// lines (about 400 bytes each, allocated up front: 0.4 MB; spdlog's usual
// 8192 were 3.3 MB of the process's memory), the oldest overrun first.
const std::shared_ptr<spdlog::details::thread_pool>& Pool() {
  static auto* pool = new std::shared_ptr<spdlog::details::thread_pool>(
      std::make_shared<spdlog::details::thread_pool>(1024, 1));
  return *pool;
}

std::shared_ptr<spdlog::logger> MakeDefaultLogger() {
  auto sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
  auto logger = std::make_shared<spdlog::async_logger>(
      "matrix", std::move(sink), Pool(), spdlog::async_overflow_policy::overrun_oldest);
  logger->set_pattern("[%H:%M:%S.%e] [matrix] [%l] %v");
  logger->set_level(spdlog::level::info);
  return logger;
}

struct LoggerSlot {
  absl::Mutex mu;
  std::shared_ptr<spdlog::logger> logger ABSL_GUARDED_BY(mu);
};

LoggerSlot& Slot() {
  static LoggerSlot* const slot = new LoggerSlot();
  return *slot;
}

}  // namespace

std::shared_ptr<spdlog::logger> Logger() {
  LoggerSlot& slot = Slot();
  absl::MutexLock lock(&slot.mu);
  if (!slot.logger) slot.logger = MakeDefaultLogger();
  return slot.logger;
}

void SetLogger(std::shared_ptr<spdlog::logger> logger) {
  LoggerSlot& slot = Slot();
  absl::MutexLock lock(&slot.mu);
  slot.logger = logger ? std::move(logger) : MakeDefaultLogger();
}

void FlushLogs() {
  Logger()->flush();
  // spdlog's async flush does not wait; wait (bounded) for our queue to drain.
  for (int i = 0; i < 200 && Pool()->queue_size() > 0; ++i) {
    absl::SleepFor(absl::Milliseconds(1));
  }
}

}  // namespace matrix
