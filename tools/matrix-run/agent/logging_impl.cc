// spdlog's and fmt's compiled functions, built into libmatrix-agent.so: the
// agent maps neither libspdlog.so nor libfmt.so (0.4 MB of a monitored
// program's memory, docs/performance.md "matrix-run agent").
//
// matrix's static libraries are compiled against Debian's shared spdlog
// (SPDLOG_COMPILED_LIB with an external fmt), so they call these functions out
// of line. This file compiles the same definitions from the same installed
// headers, as spdlog's src/*.cpp and fmt's src/format.cc do, for the functions
// the agent calls (the linker names any other one: the agent then needs
// libspdlog.so or libfmt.so again, which agent_needed_libraries_test reports).
// Without SPDLOG_SHARED_LIB and FMT_SHARED the definitions carry no
// visibility attribute and the agent's hidden default applies: a program with
// its own spdlog or fmt keeps calling its own.
#undef SPDLOG_SHARED_LIB
#undef FMT_SHARED

#ifndef SPDLOG_COMPILED_LIB
#error "spdlog must be the compiled library (spdlog::spdlog): its functions are defined here"
#endif

#include <mutex>

// fmt (its src/format.cc).
#include "fmt/format-inl.h"

FMT_BEGIN_NAMESPACE
namespace detail {
template auto dragonbox::to_decimal(float x) noexcept -> dragonbox::decimal_fp<float>;
template auto dragonbox::to_decimal(double x) noexcept -> dragonbox::decimal_fp<double>;
template auto thousands_sep_impl(locale_ref) -> thousands_sep_result<char>;
template auto decimal_point_impl(locale_ref) -> char;
}  // namespace detail
FMT_END_NAMESPACE

// spdlog (its src/spdlog.cpp, async.cpp and color_sinks.cpp): the logger, the
// async logger and its thread pool, the stderr color sink (core/src/logging.cc).
#include "spdlog/async.h"
#include "spdlog/async_logger-inl.h"
#include "spdlog/common-inl.h"
#include "spdlog/details/backtracer-inl.h"
#include "spdlog/details/log_msg-inl.h"
#include "spdlog/details/log_msg_buffer-inl.h"
#include "spdlog/details/os-inl.h"
#include "spdlog/details/periodic_worker-inl.h"
#include "spdlog/details/registry-inl.h"
#include "spdlog/details/thread_pool-inl.h"
#include "spdlog/logger-inl.h"
#include "spdlog/pattern_formatter-inl.h"
#include "spdlog/sinks/ansicolor_sink-inl.h"
#include "spdlog/sinks/base_sink-inl.h"
#include "spdlog/sinks/sink-inl.h"
#include "spdlog/sinks/stdout_color_sinks-inl.h"
#include "spdlog/spdlog-inl.h"

template class spdlog::sinks::ansicolor_stderr_sink<spdlog::details::console_mutex>;
