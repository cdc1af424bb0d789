#include "matrix/testing/log_capture.h"

#include <memory>
#include <utility>

#include "matrix/core/logging.h"
#include "spdlog/sinks/ostream_sink.h"
#include "spdlog/spdlog.h"

namespace matrix::testing {

ScopedLogCapture::ScopedLogCapture() {
  // ostream_sink_mt serialises writers, so lines from any thread are whole.
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out_);
  sink->set_pattern("%v");
  SetLogger(std::make_shared<spdlog::logger>("matrix-test", std::move(sink)));
}

ScopedLogCapture::~ScopedLogCapture() { SetLogger(nullptr); }

std::string ScopedLogCapture::text() const { return out_.str(); }

int ScopedLogCapture::Count(const std::string& needle) const {
  std::istringstream lines(out_.str());
  int n = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.find(needle) != std::string::npos) ++n;
  }
  return n;
}

}  // namespace matrix::testing
