#include "matrix/core/issue.h"

#include "absl/strings/str_cat.h"
#include "matrix/core/proto_json.h"

namespace matrix {

std::string Issue::ToJson() const {
  // Fields at their default (0, false, "") are printed too, so every line
  // of a report kind has the same keys.
  return ProtoToJson(proto_);
}

std::string Issue::ToString() const {
  return absl::StrCat("tag[", tag(), "]type[", type(), "];key[", key(), "];content[", ToJson(),
                      "]");
}

}  // namespace matrix
