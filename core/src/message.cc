#include "matrix/core/message.h"

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "matrix/core/handler.h"

namespace matrix {

std::string Message::CallbackString() const {
  if (!callback) return "null";
  return posted_from.ToString();
}

std::string Message::ToString(TimeTicks now) const {
  std::string out = absl::StrCat("{ when=", absl::FormatDuration(when_ - now));
  if (is_sync_barrier()) {
    absl::StrAppend(&out, " barrier=", barrier_token_);
  } else {
    if (callback) absl::StrAppend(&out, " callback=", CallbackString());
    else absl::StrAppend(&out, " what=", what);
    if (arg1 != 0) absl::StrAppend(&out, " arg1=", arg1);
    if (arg2 != 0) absl::StrAppend(&out, " arg2=", arg2);
    if (target_ != nullptr) absl::StrAppend(&out, " target=", target_->ToString());
  }
  if (asynchronous_) absl::StrAppend(&out, " async");
  absl::StrAppend(&out, " }");
  return out;
}

}  // namespace matrix
