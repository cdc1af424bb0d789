#include "matrix/core/file_path.h"

#include "gtest/gtest.h"

namespace matrix {
namespace {

TEST(FilePathTest, BaseNameIsWhatFollowsTheLastSlash) {
  EXPECT_EQ(BaseName("/usr/lib/x86_64-linux-gnu/libgtk-3.so.0"), "libgtk-3.so.0");
  EXPECT_EQ(BaseName("reports/app.jsonl"), "app.jsonl");
  EXPECT_EQ(BaseName("/glxgears"), "glxgears");
}

TEST(FilePathTest, BaseNameOfANameWithoutSlashIsTheName) {
  EXPECT_EQ(BaseName("[vdso]"), "[vdso]");
  EXPECT_EQ(BaseName(""), "");
}

TEST(FilePathTest, BaseNameOfADirectoryPathEndingInSlashIsEmpty) {
  EXPECT_EQ(BaseName("/tmp/reports/"), "");
}

TEST(FilePathTest, DirNameIsWhatPrecedesTheLastSlash) {
  EXPECT_EQ(DirName("/usr/lib/libc.so.6"), "/usr/lib");
  EXPECT_EQ(DirName("reports/app.jsonl"), "reports");
  EXPECT_EQ(DirName("a/b/c"), "a/b");
}

TEST(FilePathTest, DirNameOfANameWithoutSlashIsTheCurrentDirectory) {
  EXPECT_EQ(DirName("app.jsonl"), ".");
  EXPECT_EQ(DirName(""), ".");
}

TEST(FilePathTest, DirNameOfAFileAtTheRootIsTheRoot) { EXPECT_EQ(DirName("/app.jsonl"), "/"); }

TEST(FilePathTest, TheHalvesViewThePathItself) {
  constexpr std::string_view path = "/opt/app/bin/app";
  static_assert(BaseName(path) == "app");
  static_assert(DirName(path) == "/opt/app/bin");
  EXPECT_EQ(BaseName(path).data(), path.data() + 13);
  EXPECT_EQ(DirName(path).data(), path.data());
}

}  // namespace
}  // namespace matrix
