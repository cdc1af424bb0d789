#include "matrix/plugins/block_canary_context.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace matrix {
namespace {

absl::Status Invalid(absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat("BlockCanaryContext: ", message));
}

bool PositiveFinite(absl::Duration d) {
  return d > absl::ZeroDuration() && d != absl::InfiniteDuration();
}

class FunctionInterceptor : public BlockInterceptor {
 public:
  explicit FunctionInterceptor(std::function<void(const BlockInfo&)> fn) : fn_(std::move(fn)) {}
  void OnBlock(const BlockInfo& block) override { fn_(block); }

 private:
  std::function<void(const BlockInfo&)> fn_;
};

}  // namespace

BlockCanaryContext::Builder& BlockCanaryContext::Builder::OnBlock(
    std::function<void(const BlockInfo&)> fn) {
  // A null function becomes a null interceptor, which Build() rejects.
  c_.interceptors_.push_back(fn ? std::make_shared<FunctionInterceptor>(std::move(fn)) : nullptr);
  return *this;
}

absl::StatusOr<BlockCanaryContext> BlockCanaryContext::Builder::Build() const {
  BlockCanaryContext c = c_;
  // Every problem is collected, so that one Build() names them all.
  std::vector<std::string> problems;
  const bool threshold_ok = PositiveFinite(c.block_threshold_);
  if (!threshold_ok) {
    problems.push_back(absl::StrCat("block_threshold must be a positive, finite duration, got ",
                                    absl::FormatDuration(c.block_threshold_)));
  }
  if (!dump_interval_set_ && threshold_ok) {
    c.dump_interval_ = std::max(c.block_threshold_ / 10, absl::Milliseconds(1));
  }
  // A derived interval is checked only when the threshold it comes from is
  // valid (an invalid threshold is already reported).
  if (dump_interval_set_ || threshold_ok) {
    if (!PositiveFinite(c.dump_interval_)) {
      problems.push_back(absl::StrCat("dump_interval must be a positive, finite duration, got ",
                                      absl::FormatDuration(c.dump_interval_)));
    } else if (c.dump_interval_ < absl::Milliseconds(1)) {
      problems.push_back(absl::StrCat("dump_interval must be at least 1ms, got ",
                                      absl::FormatDuration(c.dump_interval_)));
    } else if (threshold_ok && c.dump_interval_ > c.block_threshold_) {
      problems.push_back(absl::StrCat("dump_interval (", absl::FormatDuration(c.dump_interval_),
                                      ") must not exceed block_threshold (",
                                      absl::FormatDuration(c.block_threshold_),
                                      "): a block could then end before its first sample"));
    }
  }
  if (c.max_samples_per_block_ < 4 || c.max_samples_per_block_ > 4096 ||
      c.max_samples_per_block_ % 2 != 0) {
    problems.push_back(absl::StrCat("max_samples_per_block must be even and in [4, 4096], got ",
                                    c.max_samples_per_block_));
  }
  if (c.monitor_duration_ <= absl::ZeroDuration()) {
    problems.push_back(absl::StrCat(
        "monitor_duration must be positive (InfiniteDuration() for ever), got ",
        absl::FormatDuration(c.monitor_duration_)));
  }
  if (!PositiveFinite(c.log_retention_)) {
    problems.push_back(absl::StrCat("log_retention must be a positive, finite duration, got ",
                                    absl::FormatDuration(c.log_retention_)));
  }
  if (c.max_log_files_ < 1) {
    problems.push_back(absl::StrCat("max_log_files must be at least 1, got ", c.max_log_files_));
  }
  if (!c.log_path_.empty() && c.log_path_.back() == '/' && c.log_path_.size() > 1) {
    c.log_path_.pop_back();  // "dir/" and "dir" are the same directory.
  }
  if (std::find(c.concern_packages_.begin(), c.concern_packages_.end(), "") !=
      c.concern_packages_.end()) {
    problems.push_back("empty concern package");
  }
  if (std::find(c.white_list_.begin(), c.white_list_.end(), "") != c.white_list_.end()) {
    problems.push_back("empty white-list entry (it would match every block)");
  }
  if (!(c.cpu_busy_percent_ > 0 && c.cpu_busy_percent_ <= 100)) {
    problems.push_back(absl::StrCat("cpu_busy_percent must be in (0, 100], got ",
                                    c.cpu_busy_percent_));
  }
  if (std::find(c.interceptors_.begin(), c.interceptors_.end(), nullptr) !=
      c.interceptors_.end()) {
    problems.push_back("null interceptor");
  }
  if (!problems.empty()) return Invalid(absl::StrJoin(problems, "; "));
  return c;
}

}  // namespace matrix
