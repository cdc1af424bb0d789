// push's checkpoint files and bounded line reading, without a server
// (tools/matrix-report/src/internal/fleet_checkpoint.h, bounded_read.h): the
// temporary names, concurrent saves, escaped names, the files a load
// refuses, and the line cap with a small cap.

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "internal/bounded_read.h"
#include "internal/fleet_checkpoint.h"
#include "report_test_util.h"

namespace matrix::report::internal {
namespace {

using ::testing::HasSubstr;
using test_util::ScratchDir;

Checkpoint OneMark(const std::string& path) {
  Checkpoint checkpoint;
  checkpoint[{.dev = 1, .ino = 2}] = {.offset = 30, .line = 3, .head = 0xabc, .path = path};
  return checkpoint;
}

TEST(FleetCheckpointTest, EachTemporaryFileHasANameOfItsOwn) {
  ScratchDir scratch("temp");
  const std::string path = scratch.path() + "/.matrix-push-0123456789abcdef";
  std::string first;
  std::string second;
  absl::StatusOr<ScopedFd> a = CreateTempBeside(path, first);
  absl::StatusOr<ScopedFd> b = CreateTempBeside(path, second);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_NE(first, second);
  EXPECT_THAT(first, HasSubstr(".matrix-push-0123456789abcdef.tmp."));
  EXPECT_TRUE(std::filesystem::is_regular_file(first));
  EXPECT_TRUE(std::filesystem::is_regular_file(second));
}

TEST(FleetCheckpointTest, ConcurrentSavesOfOneCheckpointAllSucceed) {
  ScratchDir scratch("concurrent");
  const std::string path = scratch.path() + "/.matrix-push-0123456789abcdef";
  std::vector<std::string> errors[2];
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        absl::Status saved = SaveCheckpoint(path, OneMark(absl::StrCat("/r/", t, "/", i)));
        if (!saved.ok()) errors[t].push_back(std::string(saved.message()));
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_THAT(errors[0], ::testing::IsEmpty());
  EXPECT_THAT(errors[1], ::testing::IsEmpty());
  absl::StatusOr<Checkpoint> loaded = LoadCheckpoint(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->size(), 1u);
  // No temporary file is left behind.
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(scratch.path())) {
    (void)entry;
    ++files;
  }
  EXPECT_EQ(files, 1);
}

TEST(FleetCheckpointTest, NamesWithControlCharactersRoundTripOnOneLine) {
  ScratchDir scratch("escape");
  const std::string path = scratch.path() + "/.matrix-push-0123456789abcdef";
  const std::string name = "/r/a\nb\rc\\x0a\\\x7f\t.jsonl";
  EXPECT_EQ(EscapeCheckpointPath(name).find_first_of("\n\r\t\x7f"), std::string::npos);
  ASSERT_TRUE(SaveCheckpoint(path, OneMark(name)).ok());
  std::ifstream in(path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string text = buffer.str();
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1) << text;
  absl::StatusOr<Checkpoint> loaded = LoadCheckpoint(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ASSERT_EQ(loaded->size(), 1u);
  EXPECT_EQ(loaded->begin()->second.path, name);
  EXPECT_EQ(loaded->begin()->second.offset, 30);
  std::string back;
  EXPECT_FALSE(UnescapeCheckpointPath("bad\\q", back));
}

TEST(FleetCheckpointTest, MissingCheckpointIsEmpty) {
  ScratchDir scratch("missing");
  absl::StatusOr<Checkpoint> loaded = LoadCheckpoint(scratch.path() + "/.matrix-push-x");
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_TRUE(loaded->empty());
}

TEST(FleetCheckpointTest, LoadRefusesWhatIsNotAPlainFileOfOurs) {
  ScratchDir scratch("refused");
  const std::string real = scratch.path() + "/real";
  ASSERT_TRUE(SaveCheckpoint(real, OneMark("/r/x.jsonl")).ok());

  const std::string link = scratch.path() + "/link";
  std::filesystem::create_symlink(real, link);
  EXPECT_THAT(LoadCheckpoint(link).status().message(), HasSubstr("symbolic link"));

  const std::string fifo = scratch.path() + "/fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  const absl::Time start = absl::Now();
  EXPECT_THAT(LoadCheckpoint(fifo).status().message(), HasSubstr("not a regular file (a FIFO)"));
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));

  const std::string dir = scratch.path() + "/dir";
  std::filesystem::create_directory(dir);
  EXPECT_THAT(LoadCheckpoint(dir).status().message(), HasSubstr("a directory"));

  // Larger than a checkpoint can be (sparse: nothing is written or read).
  const std::string huge = scratch.path() + "/huge";
  { std::ofstream(huge) << ""; }
  std::filesystem::resize_file(huge, static_cast<uintmax_t>(kMaxCheckpointBytes) + 1);
  EXPECT_THAT(LoadCheckpoint(huge).status().message(), HasSubstr("more than a checkpoint's"));

  if (geteuid() == 0) {
    ASSERT_EQ(chown(real.c_str(), 65534, 65534), 0);
    EXPECT_THAT(LoadCheckpoint(real).status().message(), HasSubstr("owned by user 65534"));
  }
}

// ---- ReadLineBounded --------------------------------------------------------

struct Line {
  std::string text;
  LineRead read;
};

std::vector<Line> ReadAll(const std::string& input, size_t cap) {
  std::istringstream in(input);
  std::vector<Line> lines;
  std::string text;
  for (LineRead read = ReadLineBounded(in, cap, text); read.got;
       read = ReadLineBounded(in, cap, text)) {
    lines.push_back({text, read});
  }
  return lines;
}

TEST(BoundedReadTest, LinesUpToTheCapAreReadAndLongerOnesDropped) {
  // Caps of 4: "abcd" fits, "abcde" does not.
  const std::vector<Line> lines = ReadAll("abcd\nabcde\n\nxy\nabcdefghij", 4);
  ASSERT_EQ(lines.size(), 5u);
  EXPECT_EQ(lines[0].text, "abcd");
  EXPECT_FALSE(lines[0].read.too_long);
  EXPECT_TRUE(lines[0].read.terminated);
  EXPECT_EQ(lines[0].read.bytes, 5);
  EXPECT_EQ(lines[1].text, "");
  EXPECT_TRUE(lines[1].read.too_long);
  EXPECT_TRUE(lines[1].read.terminated);
  EXPECT_EQ(lines[1].read.bytes, 6);  // Consumed to its newline.
  EXPECT_EQ(lines[2].text, "");
  EXPECT_FALSE(lines[2].read.too_long);
  EXPECT_EQ(lines[2].read.bytes, 1);
  EXPECT_EQ(lines[3].text, "xy");
  // The last line, without its newline and too long.
  EXPECT_TRUE(lines[4].read.too_long);
  EXPECT_FALSE(lines[4].read.terminated);
  EXPECT_EQ(lines[4].read.bytes, 10);
}

// The descriptor's reader, a 64 KiB block at a time, reads what the stream
// reader reads: lines across blocks, one of exactly the cap, longer ones
// across several blocks, a last line without its newline.
TEST(BoundedReadTest, DescriptorReaderReadsWhatTheStreamReaderReads) {
  ScratchDir scratch("blocks");
  constexpr size_t kCap = 70000;
  std::string input;
  for (size_t length : {10u, 65530u, 20u, 70000u, 70001u, 0u, 200000u, 3u, 131072u, 7u}) {
    input += std::string(length, static_cast<char>('a' + length % 26));
    input += '\n';
  }
  input += "tail";
  const std::string path = scratch.path() + "/lines";
  std::ofstream(path, std::ios::binary) << input;
  const std::vector<Line> expected = ReadAll(input, kCap);
  absl::StatusOr<RegularFile> file = OpenRegularFile(path, /*follow_symlinks=*/false);
  ASSERT_TRUE(file.ok()) << file.status();
  FdStreamBuf buffer(file->fd.get());
  std::vector<Line> got;
  std::string text;
  for (LineRead read = ReadLineBounded(buffer, kCap, text); read.got;
       read = ReadLineBounded(buffer, kCap, text)) {
    got.push_back({text, read});
  }
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].text, expected[i].text) << i;
    EXPECT_EQ(got[i].read.bytes, expected[i].read.bytes) << i;
    EXPECT_EQ(got[i].read.too_long, expected[i].read.too_long) << i;
    EXPECT_EQ(got[i].read.terminated, expected[i].read.terminated) << i;
  }
  EXPECT_TRUE(got[4].read.too_long);
  EXPECT_FALSE(got[3].read.too_long);
  EXPECT_FALSE(got.back().read.terminated);
  EXPECT_EQ(got.back().text, "tail");
  EXPECT_EQ(buffer.error(), 0);
}

TEST(BoundedReadTest, RegularFilesOnly) {
  ScratchDir scratch("open");
  const std::string file = scratch.Write("a.jsonl", {"x"});
  absl::StatusOr<RegularFile> opened = OpenRegularFile(file, /*follow_symlinks=*/false);
  ASSERT_TRUE(opened.ok()) << opened.status();
  EXPECT_EQ(opened->st.st_size, 2);
  // The descriptor blocks again (O_NONBLOCK was only for the open).
  EXPECT_EQ(fcntl(opened->fd.get(), F_GETFL) & O_NONBLOCK, 0);
  const std::string link = scratch.path() + "/link.jsonl";
  std::filesystem::create_symlink(file, link);
  EXPECT_TRUE(OpenRegularFile(link, /*follow_symlinks=*/true).ok());
  EXPECT_FALSE(OpenRegularFile(link, /*follow_symlinks=*/false).ok());
  EXPECT_THAT(OpenRegularFile("/dev/zero", true).status().message(),
              HasSubstr("not a regular file (a character device)"));
  EXPECT_TRUE(absl::IsNotFound(OpenRegularFile(scratch.path() + "/none", true).status()));
}

}  // namespace
}  // namespace matrix::report::internal
