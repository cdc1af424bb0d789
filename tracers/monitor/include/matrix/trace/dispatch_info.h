// File: matrix/trace/dispatch_info.h
//
// DispatchInfo: what a loop is dispatching, as LooperMonitor hands it to its
// listeners and DispatchHeartbeat records it. Each field is set by the source
// that knows it (LooperMonitor::Source) and is valid only during the call
// that receives it.
//
// Thread safety: a plain value, read on the loop's thread.

#ifndef MATRIX_TRACE_DISPATCH_INFO_H_
#define MATRIX_TRACE_DISPATCH_INFO_H_

#include <string_view>

#include "matrix/core/message.h"

namespace matrix {

struct DispatchInfo {
  const Message* message = nullptr;  // kDispatchObserver.
  std::string_view log_line;         // kPrinter: the ">>>>> Dispatching" line.
  const char* label = nullptr;       // kForeign: the caller's label, if any.
};

}  // namespace matrix

#endif  // MATRIX_TRACE_DISPATCH_INFO_H_
