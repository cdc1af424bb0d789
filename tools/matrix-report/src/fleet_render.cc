// The fleet command's text tables (fleet.h, docs/fleet.md).

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "matrix/report/fleet.h"
#include "matrix/report/format_util.h"
#include "matrix/report/text_render.h"

namespace matrix::report {

std::string RenderFleetKeys(const std::vector<FleetKey>& keys, bool is_new) {
  if (keys.empty()) return is_new ? "no new keys\n" : "no hangs or slow methods\n";
  std::string out = absl::StrFormat("%-6s %-7s %-10s %-10s %-12s %-20s %s\n", "HOSTS", "COUNT",
                                    "WORST_MS", "MEDIAN_MS", is_new ? "FIRST_IN" : "LAST_IN",
                                    "TAG/DETAIL", "KEY");
  for (const FleetKey& k : keys) {
    absl::StrAppendFormat(
        &out, "%-6d %-7d %-10s %-10s %-12s %-20s %s\n", k.hosts, k.count,
        FormatFixed(k.worst_ms, 1), FormatFixed(k.median_ms, 1),
        k.version.empty() ? "-" : TextEscape(k.version),
        TextEscape(k.detail.empty() ? k.tag : absl::StrCat(k.tag, "/", k.detail)),
        TextEscape(k.key));
  }
  return out;
}

std::string RenderFleetFps(const std::vector<FleetFps>& rows) {
  if (rows.empty()) return "no frame reports\n";
  std::string out = absl::StrFormat(
      "%-20s %-12s %-8s %-6s %-8s %-8s %-10s %-10s %s\n", "SCENE", "VERSION", "REPORTS", "HOSTS",
      "FPS_P50", "FPS_P10", "DROP%_P50", "DROP%_P90", "FRAMES best/normal/middle/high/frozen");
  for (const FleetFps& r : rows) {
    absl::StrAppendFormat(&out, "%-20s %-12s %-8d %-6d %-8s %-8s %-10s %-10s %d/%d/%d/%d/%d\n",
                          r.scene.empty() ? "-" : TextEscape(r.scene),
                          r.version.empty() ? "-" : TextEscape(r.version),
                          r.reports, r.hosts, FormatFixed(r.fps_p50, 1),
                          FormatFixed(r.fps_p10, 1), FormatFixed(r.dropped_percent_p50, 1),
                          FormatFixed(r.dropped_percent_p90, 1), r.drop_level[0], r.drop_level[1],
                          r.drop_level[2], r.drop_level[3], r.drop_level[4]);
  }
  return out;
}

std::string RenderFleetShow(absl::string_view key, const FleetShow& show,
                            const RenderOptions& options) {
  std::vector<std::string> versions;
  for (const std::string& version : show.versions) versions.push_back(TextEscape(version));
  return absl::StrCat("Key ", TextEscape(key), ": ", show.count,
                      show.count == 1 ? " issue" : " issues", " on ", show.hosts,
                      show.hosts == 1 ? " host" : " hosts", ", versions ",
                      absl::StrJoin(versions, ", "), "\nWorst:\n",
                      RenderIssue(show.worst, options));
}

}  // namespace matrix::report
