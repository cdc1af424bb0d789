// File: matrix/core/logging.h
//
// matrix-cpp logs through one spdlog logger named "matrix". By default it is
// asynchronous with the non-blocking overrun-oldest policy, so a log call never
// blocks the caller; nothing is logged per message or per frame.
//
//   matrix::Logger()->info("plugin {} started", tag);
//   matrix::SetLogger(my_spdlog_logger);   // route matrix logs elsewhere
//
// Thread safety: thread-safe.

#ifndef MATRIX_CORE_LOGGING_H_
#define MATRIX_CORE_LOGGING_H_

#include <memory>

#include "spdlog/spdlog.h"

namespace matrix {

// The logger matrix-cpp writes to. Never null.
std::shared_ptr<spdlog::logger> Logger();
// Replaces the logger (null restores the default). Loggers in use by
// concurrent calls stay alive until those calls return.
void SetLogger(std::shared_ptr<spdlog::logger> logger);
// Flushes the current logger (waits for queued async messages).
void FlushLogs();

}  // namespace matrix

#endif  // MATRIX_CORE_LOGGING_H_
