#include "matrix/report/clickhouse_client.h"

#include <curl/curl.h>

#include <algorithm>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "internal/redact_url.h"

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

// What the response headers tell: whether ClickHouse answered, and the
// INSERT's summary.
struct Headers {
  bool clickhouse = false;
  std::optional<int64_t> written_rows;
  std::string content_type;
};

size_t OnHeader(char* data, size_t size, size_t count, void* user) {
  Headers& headers = *static_cast<Headers*>(user);
  const absl::string_view line(data, size * count);
  const size_t colon = line.find(':');
  if (colon == absl::string_view::npos) return size * count;
  const std::string name = absl::AsciiStrToLower(line.substr(0, colon));
  const absl::string_view value = absl::StripAsciiWhitespace(line.substr(colon + 1));
  if (absl::StartsWith(name, "x-clickhouse-")) headers.clickhouse = true;
  if (name == "content-type") headers.content_type = std::string(value);
  if (name == "x-clickhouse-summary") {
    // {"read_rows":"0",...,"written_rows":"2",...}
    constexpr absl::string_view kKey = "\"written_rows\":";
    const size_t at = value.find(kKey);
    if (at != absl::string_view::npos) {
      absl::string_view number = value.substr(at + kKey.size());
      absl::ConsumePrefix(&number, "\"");
      size_t digits = 0;
      while (digits < number.size() &&
             absl::ascii_isdigit(static_cast<unsigned char>(number[digits]))) {
        ++digits;
      }
      int64_t rows = 0;
      if (absl::SimpleAtoi(number.substr(0, digits), &rows)) headers.written_rows = rows;
    }
  }
  return size * count;
}

int OnProgress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  const auto& stop = *static_cast<const std::function<bool()>*>(user);
  return stop() ? 1 : 0;
}

}  // namespace

ClickHouseClient::ClickHouseClient(ClickHouseOptions options)
    : options_(std::move(options)), shown_url_(internal::RedactUrl(options_.url)) {
  GlobalInit();
  curl_ = curl_easy_init();
}

ClickHouseClient::~ClickHouseClient() {
  if (curl_ != nullptr) curl_easy_cleanup(static_cast<CURL*>(curl_));
}

absl::StatusOr<ClickHouseClient::Answer> ClickHouseClient::TryOnce(absl::string_view sql,
                                                                   absl::string_view data,
                                                                   bool* transient) {
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
  Headers answer_headers;
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, &OnHeader);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &answer_headers);
  if (options_.stop_requested) {
    curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, &OnProgress);
    curl_easy_setopt(curl, CURLOPT_XFERINFODATA, &options_.stop_requested);
  }
  // The messages below name the server by shown_url_: libcurl's own (the
  // error buffer) name a host and port, never the URL or its userinfo.
  char error[CURL_ERROR_SIZE] = {0};
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error);
  const CURLcode code = curl_easy_perform(curl);
  curl_slist_free_all(headers);
  if (code == CURLE_ABORTED_BY_CALLBACK) {
    return absl::CancelledError(absl::StrCat(shown_url_, ": stopped before the server answered"));
  }
  if (code != CURLE_OK) {
    // Not connected, reset, timed out: the server may come back. A URL libcurl
    // cannot use will not.
    *transient = code != CURLE_UNSUPPORTED_PROTOCOL && code != CURLE_URL_MALFORMAT;
    return absl::UnavailableError(
        absl::StrCat(shown_url_, ": ", error[0] != '\0' ? error : curl_easy_strerror(code)));
  }
  long status = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
  if (status == 200 && !answer_headers.clickhouse) {
    // Another server (a proxy's or a web server's page): nothing it says
    // counts, and asking again will not change it.
    return absl::FailedPreconditionError(absl::StrCat(
        shown_url_,
        ": not a ClickHouse server (HTTP 200 without ClickHouse's X-ClickHouse-* "
        "headers",
        answer_headers.content_type.empty() ? "" : ", Content-Type ", answer_headers.content_type,
        "): give the URL of a ClickHouse server's HTTP interface "
        "(port 8123 by default)"));
  }
  if (status == 200) return Answer{std::move(body), {answer_headers.written_rows}};
  *transient = status >= 500;
  const std::string message =
      absl::StrCat(shown_url_, ": HTTP ", status, ": ", ServerMessage(std::move(body)));
  return status >= 500 ? absl::UnavailableError(message) : absl::FailedPreconditionError(message);
}

absl::StatusOr<ClickHouseClient::Answer> ClickHouseClient::WithRetries(absl::string_view sql,
                                                                       absl::string_view data) {
  const absl::Time give_up = absl::Now() + options_.retry_for;
  absl::Duration backoff = options_.first_backoff;
  int tries = 0;
  auto stopped = [this] { return options_.stop_requested && options_.stop_requested(); };
  while (true) {
    bool transient = false;
    ++tries;
    absl::StatusOr<Answer> result = TryOnce(sql, data, &transient);
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
    // The wait in short steps, so a stop ends it at once.
    for (const absl::Time wake = absl::Now() + wait; !stopped() && absl::Now() < wake;) {
      absl::SleepFor(std::min(absl::Milliseconds(20), wake - absl::Now()));
    }
    if (stopped()) {
      return absl::CancelledError(absl::StrCat(result.status().message(),
                                               " (stopped while retrying, after ", tries,
                                               tries == 1 ? " try)" : " tries)"));
    }
    backoff = std::min(backoff * 2, options_.max_backoff);
  }
}

absl::StatusOr<std::string> ClickHouseClient::Query(absl::string_view sql) {
  absl::StatusOr<Answer> answer = WithRetries(sql, "");
  if (!answer.ok()) return answer.status();
  return std::move(answer->body);
}

absl::StatusOr<InsertResult> ClickHouseClient::Insert(absl::string_view sql,
                                                      absl::string_view data) {
  absl::StatusOr<Answer> answer = WithRetries(sql, data);
  if (!answer.ok()) return answer.status();
  return answer->insert;
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
  // Runs without a character to escape are appended whole.
  size_t run = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char* escaped = nullptr;
    switch (text[i]) {
      case '\\':
        escaped = "\\\\";
        break;
      case '\t':
        escaped = "\\t";
        break;
      case '\n':
        escaped = "\\n";
        break;
      case '\r':
        escaped = "\\r";
        break;
      case '\0':
        escaped = "\\0";
        break;
      default:
        continue;
    }
    out.append(text.data() + run, i - run);
    out.append(escaped, 2);
    run = i + 1;
  }
  out.append(text.data() + run, text.size() - run);
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
