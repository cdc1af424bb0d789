#include "matrix/plugins/block_canary_log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace matrix {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const absl::TimeZone kUtc = absl::UTCTimeZone();
const absl::Time kNow = absl::FromCivil(absl::CivilSecond(2025, 11, 21, 10, 0, 0), kUtc);

class BlockLogWriterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = absl::StrCat(::testing::TempDir(), "/block_log_", getpid(), "_",
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::system(absl::StrCat("rm -rf '", dir_, "'").c_str());
  }
  void TearDown() override { std::system(absl::StrCat("rm -rf '", dir_, "'").c_str()); }

  BlockLogWriter::Options Options(int max_files = 500) {
    BlockLogWriter::Options o;
    o.directory = dir_;
    o.time_zone = kUtc;
    o.max_files = max_files;
    return o;
  }

  static BlockInfo Info(int64_t cost_ms) {
    BlockInfo info;
    info.qualifier = "q";
    info.time_cost_ms = cost_ms;
    info.time_start = kNow - absl::Milliseconds(cost_ms);
    info.time_end = kNow;
    info.samples = {BlockStackSample{kNow - absl::Milliseconds(cost_ms / 2),
                                     {BlockFrame{"app::A()", 4, "app"}}}};
    return info;
  }

  static void SetAge(const std::string& path, absl::Duration age) {
    const timespec t = absl::ToTimespec(kNow - age);
    const timespec times[2] = {t, t};
    ASSERT_EQ(utimensat(AT_FDCWD, path.c_str(), times, 0), 0) << path;
  }

  static std::string Read(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

  std::string dir_;
};

TEST_F(BlockLogWriterTest, FileName_IsLooperAndTheWriteTime) {
  EXPECT_EQ(BlockLogWriter::FileName(kNow + absl::Milliseconds(7), kUtc),
            "looper-2025-11-21_10-00-00.007.log");
}

TEST_F(BlockLogWriterTest, Write_CreatesPrivateDirectoryAndReadableFile) {
  BlockLogWriter writer(Options());
  absl::StatusOr<std::string> path = writer.Write(Info(1500), kNow);
  ASSERT_TRUE(path.ok()) << path.status();
  EXPECT_EQ(*path, dir_ + "/looper-2025-11-21_10-00-00.000.log");
  struct stat st;
  ASSERT_EQ(stat(dir_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  ASSERT_EQ(stat(path->c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(Read(*path), FormatBlockLog(Info(1500), kNow, kUtc));

  absl::StatusOr<BlockInfo> back = ReadBlockLog(*path, kUtc);
  ASSERT_TRUE(back.ok()) << back.status();
  BlockInfo expected = Info(1500);
  expected.log_file = *path;
  EXPECT_EQ(*back, expected);
}

TEST_F(BlockLogWriterTest, Write_SameMillisecondTwice_GivesTwoFiles) {
  BlockLogWriter writer(Options());
  absl::StatusOr<std::string> a = writer.Write(Info(1100), kNow);
  absl::StatusOr<std::string> b = writer.Write(Info(1200), kNow);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(*a, *b);
  EXPECT_EQ(*b, dir_ + "/looper-2025-11-21_10-00-00.000-1.log");
  EXPECT_EQ(ReadBlockLog(*a, kUtc)->time_cost_ms, 1100);
  EXPECT_EQ(ReadBlockLog(*b, kUtc)->time_cost_ms, 1200);
  // No temporary file is left behind.
  absl::StatusOr<std::vector<std::string>> files = writer.ListLogFiles();
  ASSERT_TRUE(files.ok());
  EXPECT_EQ(files->size(), 2u);
  EXPECT_EQ(std::system(absl::StrCat("test -z \"$(ls -A '", dir_, "' | grep tmp)\"").c_str()), 0);
}

TEST_F(BlockLogWriterTest, CleanObsolete_DeletesFilesOlderThanTwoDays) {
  BlockLogWriter writer(Options());
  std::string fresh = *writer.Write(Info(1100), kNow - absl::Hours(1));
  std::string almost = *writer.Write(Info(1200), kNow - absl::Hours(47));
  std::string old = *writer.Write(Info(1300), kNow - absl::Hours(49));
  SetAge(fresh, absl::Hours(1));
  SetAge(almost, absl::Hours(47) + absl::Minutes(59));
  SetAge(old, absl::Hours(48) + absl::Seconds(1));
  // Someone else's file in the directory is not ours to delete.
  const std::string other = dir_ + "/notes.log";
  std::ofstream(other) << "keep me";
  SetAge(other, absl::Hours(100));

  absl::StatusOr<int> deleted = writer.CleanObsolete(kNow);
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_EQ(*deleted, 1);
  EXPECT_EQ(access(old.c_str(), F_OK), -1);
  EXPECT_EQ(access(fresh.c_str(), F_OK), 0);
  EXPECT_EQ(access(almost.c_str(), F_OK), 0);
  EXPECT_EQ(access(other.c_str(), F_OK), 0);
}

TEST_F(BlockLogWriterTest, CleanObsolete_KeepsOnlyTheNewestMaxFiles) {
  BlockLogWriter writer(Options(/*max_files=*/2));
  std::vector<std::string> paths;
  for (int i = 0; i < 4; ++i) {
    paths.push_back(*writer.Write(Info(1000 + i), kNow + absl::Seconds(i)));
    SetAge(paths.back(), absl::Minutes(10 - i));  // Later files are newer.
  }
  absl::StatusOr<int> deleted = writer.CleanObsolete(kNow);
  ASSERT_TRUE(deleted.ok());
  EXPECT_EQ(*deleted, 2);
  EXPECT_THAT(*writer.ListLogFiles(), ElementsAre(paths[3], paths[2]));
}

TEST_F(BlockLogWriterTest, CleanObsolete_MissingDirectory_DeletesNothing) {
  BlockLogWriter writer(Options());
  absl::StatusOr<int> deleted = writer.CleanObsolete(kNow);
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_EQ(*deleted, 0);
}

TEST_F(BlockLogWriterTest, ListLogFiles_NewestFirst) {
  BlockLogWriter writer(Options());
  std::string a = *writer.Write(Info(1100), kNow);
  std::string b = *writer.Write(Info(1200), kNow + absl::Seconds(1));
  SetAge(a, absl::Minutes(1));
  SetAge(b, absl::Minutes(2));
  EXPECT_THAT(*writer.ListLogFiles(), ElementsAre(a, b));
}

TEST_F(BlockLogWriterTest, Delete_OnlyBlockFilesOfItsDirectory) {
  BlockLogWriter writer(Options());
  std::string a = *writer.Write(Info(1100), kNow);
  EXPECT_EQ(writer.Delete("/etc/passwd").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(writer.Delete(dir_ + "/notes.txt").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(writer.Delete(a).ok());
  EXPECT_EQ(writer.Delete(a).code(), absl::StatusCode::kNotFound);
  writer.Write(Info(1100), kNow).IgnoreError();
  writer.Write(Info(1100), kNow).IgnoreError();
  EXPECT_TRUE(writer.DeleteAll().ok());
  EXPECT_TRUE(writer.ListLogFiles()->empty());
}

TEST_F(BlockLogWriterTest, Write_DirectoryIsAFile_Fails) {
  std::ofstream(dir_) << "not a directory";
  BlockLogWriter writer(Options());
  absl::StatusOr<std::string> path = writer.Write(Info(1100), kNow);
  EXPECT_FALSE(path.ok());
  EXPECT_THAT(path.status().message(), HasSubstr("not a directory"));
  std::remove(dir_.c_str());
}

// --- File safety -----------------------------------------------------------------

TEST_F(BlockLogWriterTest, Write_WhenTheDirectoryIsASymlink_FailsNamingIt) {
  const std::string elsewhere = dir_ + "_elsewhere";
  ASSERT_EQ(mkdir(elsewhere.c_str(), 0700), 0);
  ASSERT_EQ(symlink(elsewhere.c_str(), dir_.c_str()), 0);
  BlockLogWriter writer(Options());
  absl::StatusOr<std::string> path = writer.Write(Info(1100), kNow);
  ASSERT_FALSE(path.ok());
  EXPECT_EQ(path.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(path.status().message(), HasSubstr(dir_));
  EXPECT_THAT(path.status().message(), HasSubstr("symbolic link"));
  EXPECT_EQ(std::system(absl::StrCat("test -z \"$(ls -A '", elsewhere, "')\"").c_str()), 0);
  std::system(absl::StrCat("rm -rf '", elsewhere, "'").c_str());
}

TEST_F(BlockLogWriterTest, Write_OverAPlantedTemporaryFileSymlink_NeverWritesThroughIt) {
  ASSERT_EQ(mkdir(dir_.c_str(), 0700), 0);
  const std::string victim = dir_ + "/victim.txt";
  std::ofstream(victim) << "precious\n";
  const std::string temp = absl::StrCat(dir_, "/.", BlockLogWriter::FileName(kNow, kUtc), ".",
                                        getpid(), ".tmp");
  ASSERT_EQ(symlink(victim.c_str(), temp.c_str()), 0);

  BlockLogWriter writer(Options());
  absl::StatusOr<std::string> path = writer.Write(Info(1100), kNow);
  ASSERT_TRUE(path.ok()) << path.status();
  EXPECT_EQ(Read(victim), "precious\n");
  struct stat st;
  ASSERT_EQ(lstat(path->c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(Read(*path), FormatBlockLog(Info(1100), kNow, kUtc));
  EXPECT_NE(lstat(temp.c_str(), &st), 0);  // The planted link is gone, not followed.
}

TEST_F(BlockLogWriterTest, ListLogFiles_SkipsSymlinks) {
  BlockLogWriter writer(Options());
  const std::string a = *writer.Write(Info(1100), kNow);
  const std::string victim = dir_ + "/victim.txt";
  std::ofstream(victim) << "precious\n";
  ASSERT_EQ(symlink(victim.c_str(), (dir_ + "/looper-planted.log").c_str()), 0);
  EXPECT_THAT(*writer.ListLogFiles(), ElementsAre(a));
}

TEST_F(BlockLogWriterTest, Write_AfterTheDirectoryWasRemoved_RecreatesIt) {
  BlockLogWriter writer(Options());
  ASSERT_TRUE(writer.Write(Info(1100), kNow).ok());
  std::system(absl::StrCat("rm -rf '", dir_, "'").c_str());
  absl::StatusOr<std::string> path = writer.Write(Info(1200), kNow);
  ASSERT_TRUE(path.ok()) << path.status();
  EXPECT_EQ(ReadBlockLog(*path, kUtc)->time_cost_ms, 1200);
}

TEST_F(BlockLogWriterTest, ReadBlockLog_CorruptFile_NamesTheFileAndKeepsIt) {
  BlockLogWriter writer(Options());
  std::string path = *writer.Write(Info(1100), kNow);
  std::ofstream(path, std::ios::trunc) << "\r\n**********************\r\ngarbage\r\n";
  absl::StatusOr<BlockInfo> info = ReadBlockLog(path, kUtc);
  ASSERT_FALSE(info.ok());
  EXPECT_EQ(info.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(info.status().message(), HasSubstr(path));
  EXPECT_EQ(access(path.c_str(), F_OK), 0);
  EXPECT_EQ(ReadBlockLog(dir_ + "/looper-none.log").status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace matrix
