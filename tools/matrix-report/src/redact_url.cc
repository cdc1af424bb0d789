#include "internal/redact_url.h"

#include <cstddef>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace matrix::report::internal {
namespace {

constexpr absl::string_view kHidden = "***";

bool IsPort(absl::string_view text) {
  for (char c : text) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;  // An empty port too ("host:/").
}

// Where the userinfo of `rest` (the URL after "://") ends: its '@', or npos
// when there is none.
size_t UserinfoEnd(absl::string_view rest) {
  const size_t delimiter = rest.find_first_of("/?#");
  const size_t at = rest.substr(0, delimiter).rfind('@');
  if (at != absl::string_view::npos) return at;
  if (delimiter == absl::string_view::npos || rest.empty() || rest.front() == '[') {
    return absl::string_view::npos;
  }
  // No '@' before the first '/', '?' or '#': still a userinfo when a ':'
  // before that delimiter starts no port ("user:pa/ss@host", a password with
  // an unescaped '/'), up to the next '@'.
  const size_t colon = rest.find(':');
  if (colon == absl::string_view::npos || colon > delimiter ||
      IsPort(rest.substr(colon + 1, delimiter - colon - 1))) {
    return absl::string_view::npos;
  }
  return rest.find('@', delimiter);
}

// `query` (without its '?') with the value of each password parameter hidden.
std::string RedactQuery(absl::string_view query) {
  std::string out;
  size_t begin = 0;
  while (begin <= query.size()) {
    size_t end = query.find('&', begin);
    if (end == absl::string_view::npos) end = query.size();
    const absl::string_view parameter = query.substr(begin, end - begin);
    const size_t equals = parameter.find('=');
    if (equals != absl::string_view::npos &&
        absl::EqualsIgnoreCase(parameter.substr(0, equals), "password")) {
      absl::StrAppend(&out, parameter.substr(0, equals + 1), kHidden);
    } else {
      absl::StrAppend(&out, parameter);
    }
    if (end < query.size()) out += '&';
    begin = end + 1;
  }
  return out;
}

}  // namespace

std::string RedactUrl(absl::string_view url) {
  std::string out;
  size_t scheme_end = url.find("://");
  scheme_end = scheme_end == absl::string_view::npos ? 0 : scheme_end + 3;
  absl::StrAppend(&out, url.substr(0, scheme_end));
  absl::string_view rest = url.substr(scheme_end);
  if (const size_t at = UserinfoEnd(rest); at != absl::string_view::npos) {
    const absl::string_view userinfo = rest.substr(0, at);
    const size_t colon = userinfo.find(':');
    if (colon == absl::string_view::npos) {
      absl::StrAppend(&out, userinfo, "@");
    } else {
      absl::StrAppend(&out, userinfo.substr(0, colon + 1), kHidden, "@");
    }
    rest.remove_prefix(at + 1);
  }
  // The query: from the first '?' to the fragment.
  const size_t question = rest.find('?');
  if (question == absl::string_view::npos) {
    absl::StrAppend(&out, rest);
    return out;
  }
  absl::StrAppend(&out, rest.substr(0, question + 1));
  rest.remove_prefix(question + 1);
  const size_t hash = rest.find('#');
  absl::StrAppend(&out, RedactQuery(rest.substr(0, hash)));
  if (hash != absl::string_view::npos) absl::StrAppend(&out, rest.substr(hash));
  return out;
}

}  // namespace matrix::report::internal
