#include "layering.h"

#include <algorithm>
#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <system_error>

namespace matrix::layout {
namespace {

namespace fs = std::filesystem;

constexpr Layer kCore{0, "core"};
constexpr Layer kMonitor{1, "tracers/monitor"};
constexpr Layer kEvidence{2, "tracers/evidence"};
constexpr Layer kTracers{3, "tracers"};
constexpr Layer kPlugins{4, "plugins"};
constexpr Layer kAdapters{5, "adapters (plugins/<loop>)"};
constexpr Layer kTools{6, "tools/samples"};

// The top folders that hold layered code.
constexpr std::string_view kLayeredTops[] = {"core", "proto", "tracers", "plugins", "tools",
                                             "samples"};

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

bool IsSource(const fs::path& p) {
  const std::string ext = p.extension().string();
  return ext == ".h" || ext == ".hpp" || ext == ".cc" || ext == ".cpp" || ext == ".c";
}

std::string Relative(const fs::path& file, const fs::path& root) {
  return file.lexically_normal().lexically_relative(root.lexically_normal()).generic_string();
}

// Every layered file, relative to root, sorted (stable messages).
std::vector<std::string> LayeredFiles(const fs::path& root) {
  std::vector<std::string> files;
  for (std::string_view top : kLayeredTops) {
    const fs::path dir = root / std::string(top);
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) continue;
    for (auto it = fs::recursive_directory_iterator(dir, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
      if (it->is_regular_file(ec) &&
          (IsSource(it->path()) || EndsWith(it->path().string(), ".proto"))) {
        files.push_back(Relative(it->path(), root));
      }
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

// The path a file is included by: what follows "include/" for public headers,
// "matrix/proto/x.pb.h" for proto/matrix/proto/x.proto. Empty when the file
// is not reachable through an include directory.
std::vector<std::string> IncludeKeys(std::string_view rel) {
  std::vector<std::string> keys;
  if (StartsWith(rel, "proto/") && EndsWith(rel, ".proto")) {
    std::string_view stem = rel.substr(6, rel.size() - 6 - 6);
    keys.push_back(std::string(stem) + ".pb.h");
    keys.push_back(std::string(rel.substr(6)));
    return keys;
  }
  size_t pos = 0;
  while ((pos = rel.find("include/", pos)) != std::string_view::npos) {
    if (pos == 0 || rel[pos - 1] == '/') keys.push_back(std::string(rel.substr(pos + 8)));
    pos += 8;
  }
  return keys;
}

}  // namespace

std::optional<Layer> LayerOf(std::string_view rel) {
  if (StartsWith(rel, "core/") || StartsWith(rel, "proto/")) return kCore;
  if (StartsWith(rel, "tracers/monitor/")) return kMonitor;
  if (StartsWith(rel, "tracers/evidence/")) return kEvidence;
  if (StartsWith(rel, "tracers/")) return kTracers;
  if (StartsWith(rel, "plugins/")) {
    // plugins/include and plugins/src are the plugins; any other folder
    // under plugins/ is a loop adapter (plugins/glib, plugins/qt, ...).
    std::string_view rest = rel.substr(8);
    const size_t slash = rest.find('/');
    if (slash == std::string_view::npos) return kPlugins;
    std::string_view sub = rest.substr(0, slash);
    if (sub == "include" || sub == "src") return kPlugins;
    return kAdapters;
  }
  if (StartsWith(rel, "tools/") || StartsWith(rel, "samples/")) return kTools;
  return std::nullopt;
}

std::string Violation::ToString() const {
  return file + ":" + std::to_string(line) + ": includes \"" + include + "\" (" + header +
         ", layer " + std::string(to.name) + ") from layer " + std::string(from.name) +
         ": a lower layer must not include a higher one";
}

int CountLayeredFiles(const fs::path& root) {
  return static_cast<int>(LayeredFiles(root).size());
}

namespace {

// One resolved include of a file of the tree.
struct Include {
  std::string file;     // the including file, relative to the root
  int line = 0;
  std::string written;  // as written
  std::string header;   // the file it names, relative to the root
};

// Every include of a layered file that names a file of the tree.
std::vector<Include> TreeIncludes(const fs::path& root) {
  const std::vector<std::string> files = LayeredFiles(root);
  // include path -> the file it names. Two files may claim one path (never
  // in a healthy tree); the lowest layer wins, so the check stays strict.
  std::map<std::string, std::string> headers;
  for (const std::string& rel : files) {
    for (std::string& key : IncludeKeys(rel)) {
      auto [it, inserted] = headers.emplace(std::move(key), rel);
      if (!inserted && LayerOf(rel)->rank < LayerOf(it->second)->rank) it->second = rel;
    }
  }

  static const std::regex kInclude(R"(^\s*#\s*include\s*([<"])([^">]+)[">])");
  std::vector<Include> includes;
  for (const std::string& rel : files) {
    if (EndsWith(rel, ".proto")) continue;
    std::ifstream in(root / rel);
    std::string text;
    int line_no = 0;
    while (std::getline(in, text)) {
      ++line_no;
      std::smatch m;
      if (!std::regex_search(text, m, kInclude)) continue;
      const std::string include = m[2];
      std::string header;
      if (m[1] == "\"") {
        // A quoted include is looked up next to the including file first.
        const fs::path beside = (root / rel).parent_path() / include;
        std::error_code ec;
        if (fs::is_regular_file(beside, ec)) header = Relative(beside, root);
      }
      if (header.empty()) {
        auto it = headers.find(include);
        if (it == headers.end()) continue;  // system, Abseil, a toolkit
        header = it->second;
      }
      includes.push_back(Include{rel, line_no, include, header});
    }
  }
  return includes;
}

// A file's unit: its folder's layer name plus its stem ("x.h" and "x.cc" are
// one unit).
std::string UnitOf(std::string_view rel) {
  const fs::path path{std::string(rel)};
  return path.stem().string();
}

}  // namespace

std::vector<Violation> CheckLayering(const fs::path& root) {
  std::vector<Violation> violations;
  for (const Include& inc : TreeIncludes(root)) {
    const Layer from = *LayerOf(inc.file);
    const std::optional<Layer> to = LayerOf(inc.header);
    if (!to || to->rank <= from.rank) continue;
    violations.push_back(Violation{inc.file, inc.line, inc.written, inc.header, from, *to});
  }
  return violations;
}

std::vector<std::string> CheckIncludeCycles(const fs::path& root) {
  // Per layer: unit -> (unit it includes -> the first include that does).
  std::map<int, std::map<std::string, std::map<std::string, Include>>> graphs;
  for (Include& inc : TreeIncludes(root)) {
    const Layer from = *LayerOf(inc.file);
    const std::optional<Layer> to = LayerOf(inc.header);
    if (!to || to->rank != from.rank || from.rank < kMonitor.rank || from.rank > kTracers.rank) {
      continue;
    }
    const std::string a = UnitOf(inc.file);
    const std::string b = UnitOf(inc.header);
    if (a == b) continue;
    graphs[from.rank][a].emplace(b, std::move(inc));
  }
  std::vector<std::string> cycles;
  for (const auto& entry : graphs) {
    const auto& graph = entry.second;
    // Depth-first search; a back edge closes a cycle, reported once.
    std::map<std::string, int> state;  // 0 new, 1 on the path, 2 done
    std::vector<std::string> path;
    std::function<void(const std::string&)> visit = [&](const std::string& unit) {
      state[unit] = 1;
      path.push_back(unit);
      auto edges = graph.find(unit);
      if (edges != graph.end()) {
        for (const auto& [next, inc] : edges->second) {
          if (state[next] == 1) {
            std::string cycle;
            for (auto it = std::find(path.begin(), path.end(), next); it != path.end(); ++it) {
              cycle += *it + " -> ";
            }
            cycle += next + " (closed by " + inc.file + ":" + std::to_string(inc.line) +
                     ": includes \"" + inc.written + "\")";
            cycles.push_back(std::move(cycle));
          } else if (state[next] == 0) {
            visit(next);
          }
        }
      }
      path.pop_back();
      state[unit] = 2;
    };
    for (const auto& [unit, edges] : graph) {
      if (state[unit] == 0) visit(unit);
    }
  }
  return cycles;
}

}  // namespace matrix::layout
