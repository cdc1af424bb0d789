#include "matrix/report/clickhouse_client.h"

#include <curl/curl.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"

namespace matrix::report {
namespace {

size_t AppendBody(char* data, size_t size, size_t count, void* user) {
  static_cast<std::string*>(user)->append(data, size * count);
  return size * count;
}

// curl_global_init once, before the first handle (not thread-safe itself).
void GlobalInit() {
  static const bool done = [] {
    curl_global_init(CURL_GLOBAL_DEFAULT);
    return true;
  }();
  (void)done;
}

// The server's message, on one line and not too long.
std::string ServerMessage(std::string body) {
  absl::StripAsciiWhitespace(&body);
  const size_t what = body.find(", e.what() = ");
  if (what != std::string::npos) body.resize(what);
  std::replace(body.begin(), body.end(), '\n', ' ');
  if (body.size() > 600) body = absl::StrCat(body.substr(0, 600), "...");
  return body;
}

}  // namespace

ClickHouseClient::ClickHouseClient(ClickHouseOptions options) : options_(std::move(options)) {
  GlobalInit();
  curl_ = curl_easy_init();
}

ClickHouseClient::~ClickHouseClient() {
  if (curl_ != nullptr) curl_easy_cleanup(static_cast<CURL*>(curl_));
}

absl::StatusOr<std::string> ClickHouseClient::TryOnce(absl::string_view sql,
                                                      absl::string_view data, bool* transient) {
  *transient = false;
  CURL* curl = static_cast<CURL*>(curl_);
  if (curl == nullptr) return absl::InternalError("libcurl: cannot create a handle");
  curl_easy_reset(curl);
  std::string url = options_.url;
  while (!url.empty() && url.back() == '/') url.pop_back();
  char* escaped = curl_easy_escape(curl, sql.data(), static_cast<int>(sql.size()));
  absl::StrAppend(&url, "/?query=", escaped == nullptr ? "" : escaped);
  curl_free(escaped);
  if (!options_.settings.empty()) absl::StrAppend(&url, "&", options_.settings);
  std::string body;
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_POST, 1L);
  curl_easy_setopt(curl, CURLOPT_POSTFIELDS, data.data());
  curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(data.size()));
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, &AppendBody);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &body);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS,
                   static_cast<long>(absl::ToInt64Milliseconds(options_.request_timeout)));
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(
                       std::min<int64_t>(absl::ToInt64Milliseconds(options_.request_timeout), 10000)));
  // No "Expect: 100-continue" round trip before large bodies.
  curl_slist* headers = curl_slist_append(nullptr, "Expect:");
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  char error[CURL_ERROR_SIZE] = {0};
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error);
  const CURLcode code = curl_easy_perform(curl);
  curl_slist_free_all(headers);
  if (code != CURLE_OK) {
    // Not connected, reset, timed out: the server may come back. A URL libcurl
    // cannot use will not.
    *transient = code != CURLE_UNSUPPORTED_PROTOCOL && code != CURLE_URL_MALFORMAT;
    return absl::UnavailableError(
        absl::StrCat(options_.url, ": ", error[0] != '\0' ? error : curl_easy_strerror(code)));
  }
  long status = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
  if (status == 200) return body;
  *transient = status >= 500;
  const std::string message =
      absl::StrCat(options_.url, ": HTTP ", status, ": ", ServerMessage(std::move(body)));
  return status >= 500 ? absl::UnavailableError(message) : absl::FailedPreconditionError(message);
}

absl::StatusOr<std::string> ClickHouseClient::WithRetries(absl::string_view sql,
                                                          absl::string_view data) {
  const absl::Time give_up = absl::Now() + options_.retry_for;
  absl::Duration backoff = options_.first_backoff;
  int tries = 0;
  while (true) {
    bool transient = false;
    ++tries;
    absl::StatusOr<std::string> result = TryOnce(sql, data, &transient);
    if (result.ok() || !transient) return result;
    const absl::Duration left = give_up - absl::Now();
    if (left <= absl::ZeroDuration()) {
      return absl::Status(
          result.status().code(),
          absl::StrCat(result.status().message(), " (gave up after ", tries,
                       tries == 1 ? " try" : " tries",
                       options_.retry_for > absl::ZeroDuration()
                           ? absl::StrCat(" in ", absl::FormatDuration(options_.retry_for))
                           : "",
                       ")"));
    }
    const absl::Duration wait = std::min(backoff, left);
    if (options_.on_retry) options_.on_retry(result.status(), wait);
    absl::SleepFor(wait);
    backoff = std::min(backoff * 2, options_.max_backoff);
  }
}

absl::StatusOr<std::string> ClickHouseClient::Query(absl::string_view sql) {
  return WithRetries(sql, "");
}

absl::Status ClickHouseClient::Insert(absl::string_view sql, absl::string_view data) {
  return WithRetries(sql, data).status();
}

std::string SqlQuote(absl::string_view text) {
  std::string out = "'";
  for (char c : text) {
    if (c == '\'' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    if (c == '\0') {
      out += "\\0";
      continue;
    }
    out += c;
  }
  out += '\'';
  return out;
}

void AppendTsvEscaped(absl::string_view text, std::string& out) {
  for (char c : text) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\0':
        out += "\\0";
        break;
      default:
        out += c;
    }
  }
}

namespace {

// The character a backslash and `next` stand for in TabSeparated text.
char Unescaped(char next) {
  switch (next) {
    case 't':
      return '\t';
    case 'n':
      return '\n';
    case 'r':
      return '\r';
    case '0':
      return '\0';
    case 'b':
      return '\b';
    case 'f':
      return '\f';
    default:
      return next;  // \\, \', and any other character as itself.
  }
}

}  // namespace

std::string TsvUnescape(absl::string_view field) {
  std::string value;
  value.reserve(field.size());
  for (size_t i = 0; i < field.size(); ++i) {
    if (field[i] == '\\' && i + 1 < field.size()) {
      value += Unescaped(field[++i]);
    } else {
      value += field[i];
    }
  }
  return value;
}

std::vector<std::vector<std::string>> SplitTsv(absl::string_view text) {
  std::vector<std::vector<std::string>> rows;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    std::vector<std::string>& row = rows.emplace_back();
    for (absl::string_view field : absl::StrSplit(line, '\t')) row.emplace_back(field);
  }
  return rows;
}

std::vector<std::vector<std::string>> ParseTsv(absl::string_view text) {
  std::vector<std::vector<std::string>> rows = SplitTsv(text);
  for (std::vector<std::string>& row : rows) {
    for (std::string& field : row) field = TsvUnescape(field);
  }
  return rows;
}

std::vector<std::string> ParseStringArray(absl::string_view field) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < field.size()) {
    if (field[i] != '\'') {
      ++i;  // "[", "," and "]" between the strings.
      continue;
    }
    std::string value;
    for (++i; i < field.size() && field[i] != '\''; ++i) {
      if (field[i] == '\\' && i + 1 < field.size()) {
        value += Unescaped(field[++i]);
      } else {
        value += field[i];
      }
    }
    ++i;  // The closing quote.
    out.push_back(std::move(value));
  }
  return out;
}

}  // namespace matrix::report
