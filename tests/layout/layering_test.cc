// The layering test: no file of a lower layer includes a
// header of a higher one (core -> tracers/monitor -> tracers/evidence ->
// tracers -> plugins -> adapters -> tools/samples; tests/layout/layering.h),
// and inside the tracer folders no two files include each other.
// The first case checks the real tree; the others run the same check on small
// fixture trees, to show it finds an upward include and names file and line.

#include "layering.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace matrix::layout {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

std::vector<std::string> Strings(const std::vector<Violation>& violations) {
  std::vector<std::string> out;
  for (const Violation& v : violations) out.push_back(v.ToString());
  return out;
}

TEST(LayeringTest, SourceTreeHasNoUpwardInclude) {
  const fs::path root = MATRIX_SOURCE_DIR;
  // The scan saw the tree (a wrong root would pass vacuously).
  EXPECT_GT(CountLayeredFiles(root), 100);
  const std::vector<Violation> violations = CheckLayering(root);
  EXPECT_THAT(Strings(violations), IsEmpty())
      << "a lower layer includes a higher one: move the declaration down or invert the "
         "dependency (docs/architecture.md, \"Folders and layers\")";
}

TEST(LayeringTest, TracerFoldersHaveNoIncludeRunningBackUp) {
  EXPECT_THAT(CheckIncludeCycles(MATRIX_SOURCE_DIR), IsEmpty())
      << "two files of one folder include each other (through their headers or sources): "
         "move what both need into a header of its own";
}

TEST(LayeringTest, LayerOfFollowsTheFolders) {
  EXPECT_EQ(LayerOf("core/src/looper.cc")->rank, 0);
  EXPECT_EQ(LayerOf("proto/matrix/proto/issue.proto")->rank, 0);
  EXPECT_EQ(LayerOf("tracers/monitor/src/looper_monitor.cc")->rank, 1);
  EXPECT_EQ(LayerOf("tracers/evidence/include/matrix/trace/symbolizer.h")->rank, 2);
  EXPECT_EQ(LayerOf("tracers/src/frame_tracer.cc")->rank, 3);
  EXPECT_EQ(LayerOf("plugins/src/trace_plugin.cc")->rank, 4);
  EXPECT_EQ(LayerOf("plugins/include/matrix/plugins/trace_plugin.h")->rank, 4);
  EXPECT_EQ(LayerOf("plugins/glib/src/glib_monitor.cc")->rank, 5);
  EXPECT_EQ(LayerOf("plugins/render_loop/include/matrix/render_loop/render_loop_monitor.h")->rank,
            5);
  EXPECT_EQ(LayerOf("tools/matrix-report/main.cc")->rank, 6);
  EXPECT_EQ(LayerOf("samples/demo/main.cc")->rank, 6);
  EXPECT_FALSE(LayerOf("tests/core/looper_test.cc").has_value());
  EXPECT_FALSE(LayerOf("docs/architecture.md").has_value());
}

// A scratch source tree, removed at the end of the test.
class FixtureTree {
 public:
  FixtureTree()
      : root_(fs::temp_directory_path() /
              ("matrix-layering-" + std::to_string(::getpid()) + "-" +
               ::testing::UnitTest::GetInstance()->current_test_info()->name())) {
    fs::remove_all(root_);
  }
  ~FixtureTree() { fs::remove_all(root_); }
  void Write(const std::string& rel, const std::string& text) {
    fs::create_directories((root_ / rel).parent_path());
    std::ofstream(root_ / rel) << text;
  }
  const fs::path& root() const { return root_; }

 private:
  fs::path root_;
};

TEST(LayeringTest, DownwardIncludesPass) {
  FixtureTree tree;
  tree.Write("core/include/matrix/core/looper.h", "#pragma once\n#include <vector>\n");
  tree.Write("proto/matrix/proto/issue.proto", "syntax = \"proto3\";\n");
  tree.Write("tracers/monitor/include/matrix/trace/looper_monitor.h",
             "#include \"matrix/core/looper.h\"\n#include \"matrix/proto/issue.pb.h\"\n");
  tree.Write("tracers/evidence/src/call_tree.cc", "#include \"matrix/trace/looper_monitor.h\"\n");
  tree.Write("tracers/include/matrix/trace/frame_tracer.h",
             "#include \"matrix/trace/looper_monitor.h\"\n");
  tree.Write("plugins/include/matrix/plugins/trace_plugin.h",
             "#include \"matrix/trace/frame_tracer.h\"\n");
  tree.Write("plugins/src/file_util.h", "#include <string>\n");
  tree.Write("plugins/src/trace_plugin.cc", "#include \"file_util.h\"\n");
  tree.Write("plugins/glib/include/matrix/glib/glib_monitor.h",
             "#include \"matrix/plugins/trace_plugin.h\"\n");
  tree.Write("plugins/gtk/src/gtk_monitor.cc", "#include \"matrix/glib/glib_monitor.h\"\n");
  tree.Write("samples/gtk/main.cc", "  #  include <matrix/glib/glib_monitor.h>\n");
  EXPECT_THAT(Strings(CheckLayering(tree.root())), IsEmpty());
}

TEST(LayeringTest, UpwardIncludeFailsNamingFileAndLine) {
  FixtureTree tree;
  tree.Write("core/include/matrix/core/looper.h", "#pragma once\n");
  tree.Write("plugins/include/matrix/plugins/trace_plugin.h", "#pragma once\n");
  tree.Write("tracers/include/matrix/trace/tracer.h",
             "#pragma once\n#include \"matrix/core/looper.h\"\n"
             "// #include \"matrix/plugins/trace_plugin.h\" (a comment is not an include)\n"
             "#include \"matrix/plugins/trace_plugin.h\"\n");
  const std::vector<Violation> violations = CheckLayering(tree.root());
  ASSERT_EQ(violations.size(), 1u);
  EXPECT_EQ(violations[0].file, "tracers/include/matrix/trace/tracer.h");
  EXPECT_EQ(violations[0].line, 4);
  EXPECT_EQ(violations[0].header, "plugins/include/matrix/plugins/trace_plugin.h");
  EXPECT_THAT(violations[0].ToString(),
              HasSubstr("tracers/include/matrix/trace/tracer.h:4: includes "
                        "\"matrix/plugins/trace_plugin.h\""));
}

TEST(LayeringTest, EachUpwardStepIsCaught) {
  FixtureTree tree;
  tree.Write("tracers/monitor/include/matrix/trace/ui_thread_monitor.h", "\n");
  tree.Write("tracers/evidence/include/matrix/trace/symbolizer.h", "\n");
  tree.Write("tracers/include/matrix/trace/tracer.h", "\n");
  tree.Write("plugins/include/matrix/plugins/trace_plugin.h", "\n");
  tree.Write("plugins/qt/include/matrix/qt/qt_monitor.h", "\n");
  tree.Write("tools/matrix-report/include/matrix/report/cli.h", "\n");
  tree.Write("proto/matrix/proto/issue.proto", "\n");
  // Each file includes the header one layer up.
  tree.Write("core/src/matrix.cc", "#include \"matrix/trace/ui_thread_monitor.h\"\n");
  tree.Write("tracers/monitor/src/ui_thread_monitor.cc",
             "#include \"matrix/trace/ui_thread_monitor.h\"\n#include \"matrix/trace/symbolizer.h\"\n");
  tree.Write("tracers/evidence/src/symbolizer.cc", "#include <matrix/trace/tracer.h>\n");
  tree.Write("tracers/src/tracer.cc", "#include \"matrix/plugins/trace_plugin.h\"\n");
  tree.Write("plugins/src/trace_plugin.cc", "#include \"matrix/qt/qt_monitor.h\"\n");
  tree.Write("plugins/qt/src/qt_monitor.cc", "#include \"matrix/report/cli.h\"\n");
  EXPECT_THAT(Strings(CheckLayering(tree.root())),
              ElementsAre(HasSubstr("core/src/matrix.cc:1:"),
                          HasSubstr("plugins/qt/src/qt_monitor.cc:1:"),
                          HasSubstr("plugins/src/trace_plugin.cc:1:"),
                          HasSubstr("tracers/evidence/src/symbolizer.cc:1:"),
                          HasSubstr("tracers/monitor/src/ui_thread_monitor.cc:2:"),
                          HasSubstr("tracers/src/tracer.cc:1:")));
}

TEST(LayeringTest, IncludeCycleInsideAFolderFailsNamingTheClosingInclude) {
  FixtureTree tree;
  tree.Write("tracers/monitor/include/matrix/trace/heartbeat.h",
             "#pragma once\n#include \"matrix/trace/looper_monitor.h\"\n");
  tree.Write("tracers/monitor/include/matrix/trace/looper_monitor.h", "#pragma once\n");
  tree.Write("tracers/monitor/src/looper_monitor.cc",
             "#include \"matrix/trace/looper_monitor.h\"\n#include \"matrix/trace/heartbeat.h\"\n");
  // Same folder, one direction only: fine.
  tree.Write("tracers/evidence/include/matrix/trace/a.h", "#pragma once\n");
  tree.Write("tracers/evidence/src/b.cc", "#include \"matrix/trace/a.h\"\n");
  EXPECT_THAT(CheckIncludeCycles(tree.root()),
              ElementsAre(AllOf(HasSubstr("heartbeat -> looper_monitor -> heartbeat"),
                                HasSubstr("tracers/monitor/src/looper_monitor.cc:2"))));
}

}  // namespace
}  // namespace matrix::layout
