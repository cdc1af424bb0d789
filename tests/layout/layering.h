// File: tests/layout/layering.h
//
// The layering rule of matrix-cpp's source tree, as a check the test suite
// runs (docs/architecture.md, "Folders and layers"). Each folder is a layer;
// a file may include headers of its own layer and of the layers below it,
// never of a layer above:
//
//   0 core       core/, proto/              (matrix::core, matrix::proto, matrix::testing)
//   1 monitor    tracers/monitor/           (matrix::trace_monitor)
//   2 evidence   tracers/evidence/          (matrix::trace_evidence)
//   3 tracers    tracers/ (the rest)        (matrix::trace)
//   4 plugins    plugins/include, plugins/src (matrix::plugins)
//   5 adapters   plugins/<loop>/            (matrix::glib, matrix::qt, ...)
//   6 tools      tools/, samples/
//
// A header's layer is the folder it lives in: "matrix/trace/looper_monitor.h"
// is tracers/monitor/include/matrix/trace/looper_monitor.h, so layer 1, and
// "matrix/proto/issue.pb.h" is generated from proto/matrix/proto/issue.proto.
// Headers found nowhere in the tree (system, Abseil, toolkits) are not checked.
//
//   std::vector<matrix::layout::Violation> v = matrix::layout::CheckLayering(root);
//   for (const auto& x : v) std::cerr << x.ToString() << "\n";
//
// Thread safety: thread-compatible (reads the file system).

#ifndef MATRIX_TESTS_LAYOUT_LAYERING_H_
#define MATRIX_TESTS_LAYOUT_LAYERING_H_

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace matrix::layout {

struct Layer {
  int rank;
  std::string_view name;
};

// The layer of a file given by its path relative to the source root
// ("tracers/monitor/src/looper_monitor.cc"), or nullopt for files outside the
// layered folders (tests/, docs/, cmake/, build trees).
std::optional<Layer> LayerOf(std::string_view relative_path);

struct Violation {
  std::string file;      // relative to the source root
  int line = 0;          // 1-based
  std::string include;   // as written between the quotes or brackets
  std::string header;    // where the included header lives, relative to the root
  Layer from;
  Layer to;
  std::string ToString() const;
};

// Scans every source and header (.h .hpp .cc .cpp .c) under the layered
// folders of `root` and returns each include of a higher layer's header.
std::vector<Violation> CheckLayering(const std::filesystem::path& root);

// Inside tracers/monitor, tracers/evidence and tracers (the rest), no
// include runs back up: a file and its header ("x.cc" and "x.h") are one
// unit, and the units of a folder include each other without a cycle. Returns
// each cycle as "a -> b -> a (closed by file:line: includes \"...\")".
std::vector<std::string> CheckIncludeCycles(const std::filesystem::path& root);

// The number of files CheckLayering read under `root` (to show it saw the tree).
int CountLayeredFiles(const std::filesystem::path& root);

}  // namespace matrix::layout

#endif  // MATRIX_TESTS_LAYOUT_LAYERING_H_
