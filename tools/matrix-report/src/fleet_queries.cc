// FleetQueries: the fleet questions in SQL (fleet.h, docs/fleet.md).

#include <algorithm>
#include <cctype>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "internal/fleet_rollups.h"
#include "matrix/report/fleet.h"
#include "matrix/report/format_util.h"

namespace matrix::report {

namespace internal {

const char kHangTags[] = "tag IN ('Trace_EvilMethod', 'BlockCanary') AND detail != 'STARTUP'";

}  // namespace internal

namespace {

using internal::kHangTags;

std::string InList(const std::vector<std::string>& values) {
  std::vector<std::string> quoted;
  for (const std::string& v : values) quoted.push_back(SqlQuote(v));
  return absl::StrCat("(", absl::StrJoin(quoted, ", "), ")");
}

double ToDouble(const std::string& s) {
  double v = 0;
  return absl::SimpleAtod(s, &v) ? v : 0;
}
int64_t ToInt(const std::string& s) {
  int64_t v = 0;
  if (absl::SimpleAtoi(s, &v)) return v;
  return SaturatingInt64(ToDouble(s));
}

// "[52.4,30]" -> {52.4, 30}.
std::vector<double> ParseNumberArray(absl::string_view text) {
  std::vector<double> out;
  text = absl::StripPrefix(absl::StripSuffix(text, "]"), "[");
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    double v = 0;
    out.push_back(absl::SimpleAtod(part, &v) ? v : 0);
  }
  return out;
}

}  // namespace

namespace internal {

std::vector<FleetKey> KeysFromRows(const std::vector<std::vector<std::string>>& rows,
                                   size_t first, bool raw) {
  std::vector<FleetKey> keys;
  for (size_t i = first; i < rows.size(); ++i) {
    const std::vector<std::string>& row = rows[i];
    if (row.size() < 8) continue;
    if (!raw) {
      keys.push_back({.tag = row[0], .detail = row[1], .key = row[2], .hosts = ToInt(row[3]),
                      .count = ToInt(row[4]), .worst_ms = ToDouble(row[5]),
                      .median_ms = ToDouble(row[6]), .version = row[7]});
      continue;
    }
    std::vector<std::string> seen = ParseStringArray(row[7]);
    std::sort(seen.begin(), seen.end(),
              [](const std::string& a, const std::string& b) { return VersionLess(a, b); });
    keys.push_back({.tag = TsvUnescape(row[0]),
                    .detail = TsvUnescape(row[1]),
                    .key = TsvUnescape(row[2]),
                    .hosts = ToInt(row[3]),
                    .count = ToInt(row[4]),
                    .worst_ms = ToDouble(row[5]),
                    .median_ms = ToDouble(row[6]),
                    .version = seen.empty() ? "" : seen.front()});
  }
  return keys;
}

std::vector<FleetFps> FpsFromRows(const std::vector<std::vector<std::string>>& rows,
                                  size_t first) {
  std::vector<FleetFps> out;
  for (size_t i = first; i < rows.size(); ++i) {
    const std::vector<std::string>& row = rows[i];
    if (row.size() < 11) continue;
    FleetFps fps;
    fps.scene = row[0];
    fps.version = row[1];
    fps.reports = ToInt(row[2]);
    fps.hosts = ToInt(row[3]);
    const std::vector<double> f = ParseNumberArray(row[4]);
    const std::vector<double> d = ParseNumberArray(row[5]);
    if (f.size() == 2) {
      fps.fps_p50 = f[0];
      fps.fps_p10 = f[1];
    }
    if (d.size() == 2) {
      fps.dropped_percent_p50 = d[0];
      fps.dropped_percent_p90 = d[1];
    }
    for (int l = 0; l < 5; ++l) fps.drop_level[l] = ToInt(row[6 + l]);
    out.push_back(std::move(fps));
  }
  std::sort(out.begin(), out.end(), [](const FleetFps& a, const FleetFps& b) {
    if (a.scene != b.scene) return a.scene < b.scene;
    return VersionLess(a.version, b.version);
  });
  return out;
}

}  // namespace internal

bool VersionLess(absl::string_view a, absl::string_view b) {
  size_t i = 0;
  size_t j = 0;
  while (i < a.size() && j < b.size()) {
    const bool da = std::isdigit(static_cast<unsigned char>(a[i]));
    const bool db = std::isdigit(static_cast<unsigned char>(b[j]));
    if (da && db) {
      size_t ei = i;
      size_t ej = j;
      while (ei < a.size() && std::isdigit(static_cast<unsigned char>(a[ei]))) ++ei;
      while (ej < b.size() && std::isdigit(static_cast<unsigned char>(b[ej]))) ++ej;
      absl::string_view na = a.substr(i, ei - i);
      absl::string_view nb = b.substr(j, ej - j);
      while (na.size() > 1 && na[0] == '0') na.remove_prefix(1);
      while (nb.size() > 1 && nb[0] == '0') nb.remove_prefix(1);
      if (na.size() != nb.size()) return na.size() < nb.size();
      if (na != nb) return na < nb;
      i = ei;
      j = ej;
      continue;
    }
    if (a[i] != b[j]) return a[i] < b[j];
    ++i;
    ++j;
  }
  return a.size() - i < b.size() - j;
}

FleetQueries::FleetQueries(ClickHouseClient& client, FleetOptions options)
    : client_(client),
      options_(std::move(options)),
      table_(absl::StrCat(options_.database, ".issues")) {}

absl::StatusOr<std::vector<std::vector<std::string>>> FleetQueries::Rows(const std::string& sql,
                                                                        bool raw) {
  absl::StatusOr<std::string> body = client_.Query(absl::StrCat(sql, " FORMAT TabSeparated"));
  if (!body.ok()) return body.status();
  return raw ? SplitTsv(*body) : ParseTsv(*body);
}

absl::StatusOr<int64_t> FleetQueries::Count() {
  absl::StatusOr<std::vector<std::vector<std::string>>> rows =
      Rows(absl::StrCat("SELECT count() FROM ", table_, " FINAL"));
  if (!rows.ok()) return rows.status();
  if (rows->empty() || rows->front().empty()) return absl::InternalError("no count returned");
  return ToInt(rows->front()[0]);
}

absl::StatusOr<std::vector<std::string>> FleetQueries::Versions() {
  absl::StatusOr<std::vector<std::vector<std::string>>> rows =
      Rows(absl::StrCat("SELECT DISTINCT version FROM ", table_));
  if (!rows.ok()) return rows.status();
  std::vector<std::string> versions;
  for (const auto& row : *rows) versions.push_back(row.empty() ? "" : row[0]);
  std::sort(versions.begin(), versions.end(),
            [](const std::string& a, const std::string& b) { return VersionLess(a, b); });
  return versions;
}

namespace {

std::string VersionFilter(const FleetFilter& filter) {
  return filter.version.empty() ? "" : absl::StrCat(" AND version = ", SqlQuote(filter.version));
}

}  // namespace

absl::StatusOr<std::vector<FleetKey>> FleetQueries::TopFinal(const FleetFilter& filter) {
  ++stats_.from_final;
  absl::StatusOr<std::vector<std::vector<std::string>>> rows = Rows(absl::StrCat(
      "SELECT tag, detail, key, uniqExact(host_id) AS hosts, count() AS n, max(cost_ms), "
      "quantileExact(0.5)(cost_ms), argMax(version, time_ms) FROM ",
      table_, " FINAL WHERE ", kHangTags, " AND key != ''", VersionFilter(filter),
      " GROUP BY tag, detail, key ORDER BY hosts DESC, n DESC, tag, detail, key LIMIT ",
      filter.limit));
  if (!rows.ok()) return rows.status();
  return internal::KeysFromRows(*rows, 0, /*raw=*/false);
}

absl::StatusOr<std::vector<FleetKey>> FleetQueries::NewFinal(absl::string_view since,
                                                             const FleetFilter& filter) {
  ++stats_.from_final;
  absl::StatusOr<std::vector<std::string>> versions = Versions();
  if (!versions.ok()) return versions.status();
  std::vector<std::string> before;
  std::vector<std::string> after;
  for (const std::string& v : *versions) (VersionLess(v, since) ? before : after).push_back(v);
  if (after.empty()) return std::vector<FleetKey>{};
  const std::string in_after = absl::StrCat("version IN ", InList(after));
  const std::string in_before = before.empty() ? "0" : absl::StrCat("version IN ", InList(before));
  absl::StatusOr<std::vector<std::vector<std::string>>> rows = Rows(absl::StrCat(
      "SELECT tag, detail, key, uniqExactIf(host_id, ", in_after, ") AS hosts, countIf(",
      in_after, ") AS n, maxIf(cost_ms, ", in_after, "), quantileExactIf(0.5)(cost_ms, ",
      in_after, "), groupUniqArrayIf(version, ", in_after, ") FROM ", table_, " FINAL WHERE ",
      kHangTags, " AND key != ''", VersionFilter(filter),
      " GROUP BY tag, detail, key HAVING countIf(", in_before, ") = 0 AND n > 0",
      " ORDER BY hosts DESC, n DESC, tag, detail, key LIMIT ", filter.limit),
      /*raw=*/true);
  if (!rows.ok()) return rows.status();
  return internal::KeysFromRows(*rows, 0, /*raw=*/true);
}

absl::StatusOr<std::vector<FleetFps>> FleetQueries::FpsFinal(const FleetFilter& filter) {
  ++stats_.from_final;
  absl::StatusOr<std::vector<std::vector<std::string>>> rows = Rows(absl::StrCat(
      "SELECT scene, version, count(), uniqExact(host_id), "
      // Reports too short to measure a rate carry fps 0: not a rate.
      "quantilesExactIf(0.5, 0.1)(fps, fps > 0 AND frames >= 10), "
      // Sums and products of report numbers in Float64: ClickHouse's Int64
      // arithmetic wraps around; ToInt saturates the sums.
      "quantilesExact(0.5, 0.9)(toFloat64(dropped_frames) * 100 / frames), "
      "sum(toFloat64(drop_best)), sum(toFloat64(drop_normal)), sum(toFloat64(drop_middle)), "
      "sum(toFloat64(drop_high)), sum(toFloat64(drop_frozen)) FROM ",
      table_, " FINAL WHERE tag = 'Trace_FPS' AND frames > 0", VersionFilter(filter),
      " GROUP BY scene, version"));
  if (!rows.ok()) return rows.status();
  return internal::FpsFromRows(*rows, 0);
}

absl::StatusOr<FleetShow> FleetQueries::Show(absl::string_view key, const FleetFilter& filter) {
  // Without FINAL (ClickHouse 18.16 merges FINAL on one thread, over every
  // row of the table, before WHERE): one key's rows are few, repeats of an
  // issue share its id, so uniqExact(issue_id) counts each issue once and the
  // worst row is the same whichever copy is read.
  const std::string where =
      absl::StrCat(" WHERE key = ", SqlQuote(key), VersionFilter(filter));
  absl::StatusOr<std::vector<std::vector<std::string>>> stats = Rows(absl::StrCat(
      "SELECT uniqExact(issue_id), uniqExact(host_id), groupUniqArray(version) FROM ", table_,
      where), /*raw=*/true);
  if (!stats.ok()) return stats.status();
  FleetShow show;
  if (stats->empty() || stats->front().size() < 3 || ToInt(stats->front()[0]) == 0) {
    return absl::NotFoundError(absl::StrCat("no issue has the key \"", key, "\""));
  }
  show.count = ToInt(stats->front()[0]);
  show.hosts = ToInt(stats->front()[1]);
  show.versions = ParseStringArray(stats->front()[2]);
  std::sort(show.versions.begin(), show.versions.end(),
            [](const std::string& a, const std::string& b) { return VersionLess(a, b); });
  // The worst row's id first, reading the small columns only; then its
  // report by primary key (the JSON-lines copy of a block).
  absl::StatusOr<std::vector<std::vector<std::string>>> worst_id = Rows(absl::StrCat(
      "SELECT host_id, issue_id FROM ", table_, where,
      " ORDER BY if(tag = 'Trace_FPS', fps, -cost_ms), time_ms, issue_id LIMIT 1"));
  if (!worst_id.ok()) return worst_id.status();
  if (worst_id->empty() || worst_id->front().size() < 2) {
    return absl::NotFoundError(absl::StrCat("no issue has the key \"", key, "\""));
  }
  absl::StatusOr<std::vector<std::vector<std::string>>> worst = Rows(absl::StrCat(
      "SELECT report FROM ", table_, " WHERE host_id = ", SqlQuote(worst_id->front()[0]),
      " AND issue_id = ", SqlQuote(worst_id->front()[1]), " ORDER BY quality DESC LIMIT 1"));
  if (!worst.ok()) return worst.status();
  if (worst->empty() || worst->front().empty()) {
    return absl::NotFoundError(absl::StrCat("no issue has the key \"", key, "\""));
  }
  absl::StatusOr<IssueRecord> record =
      ParseIssueLine(worst->front()[0], {.file = absl::StrCat(table_, "@", client_.shown_url())});
  if (!record.ok()) {
    return absl::DataLossError(
        absl::StrCat("the stored report does not parse: ", record.status().message()));
  }
  show.worst = *std::move(record);
  return show;
}

}  // namespace matrix::report
