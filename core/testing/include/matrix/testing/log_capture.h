// File: matrix/testing/log_capture.h
//
// ScopedLogCapture: matrix's log lines (matrix::Logger()), captured as text
// for as long as the object lives, so a test can check what was logged.
//
//   matrix::testing::ScopedLogCapture logs;
//   DoSomethingThatWarns();
//   EXPECT_EQ(logs.Count("refused"), 1);
//
// Each line is the message alone (pattern "%v"). On destruction matrix's
// default logger is restored.
//
// Thread safety: lines may be logged from any thread; text() and Count()
// read what was logged so far.

#ifndef MATRIX_TESTING_LOG_CAPTURE_H_
#define MATRIX_TESTING_LOG_CAPTURE_H_

#include <sstream>
#include <string>

namespace matrix::testing {

class ScopedLogCapture {
 public:
  ScopedLogCapture();
  ~ScopedLogCapture();
  ScopedLogCapture(const ScopedLogCapture&) = delete;
  ScopedLogCapture& operator=(const ScopedLogCapture&) = delete;

  // Every line logged so far, each ending in '\n'.
  std::string text() const;
  // How many of those lines contain `needle`.
  int Count(const std::string& needle) const;

 private:
  std::ostringstream out_;
};

}  // namespace matrix::testing

#endif  // MATRIX_TESTING_LOG_CAPTURE_H_
