// File: matrix/report/clickhouse_client.h
//
// A small client for ClickHouse's HTTP interface (the server's http_port,
// 8123 by default), over libcurl: a query goes in the `query` URL parameter,
// a body (the rows of an INSERT) is POSTed, the answer is the response body.
// A request that fails in a way a later try may not (no connection, a
// timeout, HTTP 5xx such as a server restarting or overloaded) is retried
// with exponential backoff until `retry_for` has passed; ClickHouse errors
// that will not change (HTTP 4xx: syntax, unknown table, ...) are returned at
// once. Errors carry the server's own message ("Code: 60, ... Table
// matrix.x doesn't exist") and name the server by its URL without the
// password (shown_url()).
//
// An answer counts only when it is ClickHouse's: it carries ClickHouse's
// X-ClickHouse-* headers (every version sends X-ClickHouse-Server-Display-Name
// or X-ClickHouse-Summary). A 200 from another server (a web page from a
// proxy or a server on the wrong port) is an error that is not retried.
// Insert() returns the `written_rows` of the X-ClickHouse-Summary header
// when the server sends one (ClickHouse 19 and later).
//
//   matrix::report::ClickHouseClient client({.url = "http://127.0.0.1:8123"});
//   absl::StatusOr<std::string> rows = client.Query("SELECT version()");
//   absl::StatusOr<InsertResult> ok =
//       client.Insert("INSERT INTO matrix.issues FORMAT TabSeparated", tsv);
//
// Thread safety: thread-compatible (one thread uses one client).

#ifndef MATRIX_REPORT_CLICKHOUSE_CLIENT_H_
#define MATRIX_REPORT_CLICKHOUSE_CLIENT_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace matrix::report {

struct ClickHouseOptions {
  // http://host:port[/] of a server's HTTP interface; user and password may
  // be given as http://user:password@host:port (or ?user=...&password=...).
  // Requests use it as given; messages show shown_url(), without the
  // password.
  std::string url;
  // Each request's time limit (connecting included).
  absl::Duration request_timeout = absl::Seconds(30);
  // How long to keep retrying a request that fails transiently; zero tries
  // once.
  absl::Duration retry_for = absl::Seconds(60);
  // The first wait between tries; doubled after each, up to `max_backoff`.
  absl::Duration first_backoff = absl::Milliseconds(200);
  absl::Duration max_backoff = absl::Seconds(5);
  // Extra URL parameters sent with every request ("insert_distributed_sync=1").
  std::string settings;
  // Told of each retry (may be empty): the error and the wait before the next
  // try.
  std::function<void(const absl::Status&, absl::Duration)> on_retry;
  // Polled during requests and retry waits (may be empty): when it returns
  // true, the request is abandoned at once with a Cancelled error (a SIGTERM
  // handler's flag, say). It must be cheap and async-signal-safe to read.
  std::function<bool()> stop_requested;
};

// What ClickHouse said of an INSERT.
struct InsertResult {
  // X-ClickHouse-Summary's written_rows; empty when the server sent no
  // summary (ClickHouse before 19).
  std::optional<int64_t> written_rows;
};

class ClickHouseClient {
 public:
  explicit ClickHouseClient(ClickHouseOptions options);
  ~ClickHouseClient();

  ClickHouseClient(const ClickHouseClient&) = delete;
  ClickHouseClient& operator=(const ClickHouseClient&) = delete;

  // Runs `sql` (a statement without data) and returns the response body.
  // Call from the client's thread.
  absl::StatusOr<std::string> Query(absl::string_view sql);

  // Runs `sql` ("INSERT INTO t FORMAT TabSeparated") with `data` as its rows.
  // ClickHouse writes the rows of one INSERT into one part, so a failed
  // INSERT wrote nothing that a retry would double (and the issues table
  // collapses repeats anyway). Call from the client's thread.
  absl::StatusOr<InsertResult> Insert(absl::string_view sql, absl::string_view data);

  const ClickHouseOptions& options() const { return options_; }

  // options().url as messages show it: its password replaced by "***"
  // (internal::RedactUrl). Every error of the client names the server so.
  const std::string& shown_url() const { return shown_url_; }

  // Changes how long later requests keep retrying. Client's thread.
  void set_retry_for(absl::Duration retry_for) { options_.retry_for = retry_for; }

 private:
  struct Answer {
    std::string body;
    InsertResult insert;
  };
  // One try. `transient` tells whether a retry may succeed.
  absl::StatusOr<Answer> TryOnce(absl::string_view sql, absl::string_view data, bool* transient);
  absl::StatusOr<Answer> WithRetries(absl::string_view sql, absl::string_view data);

  ClickHouseOptions options_;
  const std::string shown_url_;  // RedactUrl(options_.url).
  void* curl_ = nullptr;  // CURL*, reused across requests (keep-alive).
};

// Quotes `text` as a ClickHouse string literal: 'it\'s'.
std::string SqlQuote(absl::string_view text);

// Escapes `text` for a TabSeparated field (\\, \t, \n, \r, \0 escaped).
void AppendTsvEscaped(absl::string_view text, std::string& out);

// Splits TabSeparated output into rows of unescaped fields.
std::vector<std::vector<std::string>> ParseTsv(absl::string_view text);
// The same with each field as the server wrote it (escapes kept), and the
// unescaping of one field: ParseTsv is SplitTsv, then TsvUnescape.
std::vector<std::vector<std::string>> SplitTsv(absl::string_view text);
std::string TsvUnescape(absl::string_view field);

// The strings of a ClickHouse Array(String) field as SplitTsv gives it,
// before TsvUnescape: "['1.0','it\'s']" -> {"1.0", "it's"}. ClickHouse
// quotes each string of the array with TabSeparated's escapes (\\, \', \t,
// \n...) and does not escape the field again, so the array is read from the
// raw field: once unescaped, a quote inside a string and the quote that ends
// it look the same.
std::vector<std::string> ParseStringArray(absl::string_view field);

}  // namespace matrix::report

#endif  // MATRIX_REPORT_CLICKHOUSE_CLIENT_H_
