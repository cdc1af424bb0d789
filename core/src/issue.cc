#include "matrix/core/issue.h"

#include "absl/strings/str_cat.h"
#include "google/protobuf/util/json_util.h"

namespace matrix {

std::string Issue::ToJson() const {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.add_whitespace = false;
  // Fields at their default (0, false, "") are printed too, so every line
  // of a report kind has the same keys.
  options.always_print_primitive_fields = true;
  std::string json;
  if (!google::protobuf::util::MessageToJsonString(proto_, &json, options).ok()) {
    return "{}";
  }
  return json;
}

std::string Issue::ToString() const {
  return absl::StrCat("tag[", tag(), "]type[", type(), "];key[", key(), "];content[", ToJson(),
                      "]");
}

}  // namespace matrix
