#include "matrix/plugins/block_canary_context.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

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
  if (!PositiveFinite(c.block_threshold_)) {
    return Invalid(absl::StrCat("block_threshold must be a positive, finite duration, got ",
                                absl::FormatDuration(c.block_threshold_)));
  }
  if (!dump_interval_set_) {
    c.dump_interval_ = std::max(c.block_threshold_ / 10, absl::Milliseconds(1));
  }
  if (!PositiveFinite(c.dump_interval_)) {
    return Invalid(absl::StrCat("dump_interval must be a positive, finite duration, got ",
                                absl::FormatDuration(c.dump_interval_)));
  }
  if (c.dump_interval_ < absl::Milliseconds(1)) {
    return Invalid(absl::StrCat("dump_interval must be at least 1ms, got ",
                                absl::FormatDuration(c.dump_interval_)));
  }
  if (c.dump_interval_ > c.block_threshold_) {
    return Invalid(absl::StrCat("dump_interval (", absl::FormatDuration(c.dump_interval_),
                                ") must not exceed block_threshold (",
                                absl::FormatDuration(c.block_threshold_),
                                "): a block could then end before its first sample"));
  }
  if (c.max_samples_per_block_ < 4 || c.max_samples_per_block_ > 4096 ||
      c.max_samples_per_block_ % 2 != 0) {
    return Invalid(absl::StrCat("max_samples_per_block must be even and in [4, 4096], got ",
                                c.max_samples_per_block_));
  }
  if (c.monitor_duration_ <= absl::ZeroDuration()) {
    return Invalid(absl::StrCat("monitor_duration must be positive (InfiniteDuration() for "
                                "ever), got ",
                                absl::FormatDuration(c.monitor_duration_)));
  }
  if (!PositiveFinite(c.log_retention_)) {
    return Invalid(absl::StrCat("log_retention must be a positive, finite duration, got ",
                                absl::FormatDuration(c.log_retention_)));
  }
  if (c.max_log_files_ < 1) {
    return Invalid(absl::StrCat("max_log_files must be at least 1, got ", c.max_log_files_));
  }
  if (!c.log_path_.empty() && c.log_path_.back() == '/' && c.log_path_.size() > 1) {
    c.log_path_.pop_back();  // "dir/" and "dir" are the same directory.
  }
  for (const std::string& p : c.concern_packages_) {
    if (p.empty()) return Invalid("empty concern package");
  }
  for (const std::string& p : c.white_list_) {
    if (p.empty()) return Invalid("empty white-list entry (it would match every block)");
  }
  if (!(c.cpu_busy_percent_ > 0 && c.cpu_busy_percent_ <= 100)) {
    return Invalid(absl::StrCat("cpu_busy_percent must be in (0, 100], got ",
                                c.cpu_busy_percent_));
  }
  for (const auto& interceptor : c.interceptors_) {
    if (interceptor == nullptr) return Invalid("null interceptor");
  }
  return c;
}

}  // namespace matrix
