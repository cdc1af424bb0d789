// The agent's release of its libraries' pages (tools/matrix-run/agent/own_pages.h):
// which loaded objects are the agent's alone, and which pages of a read-only
// file mapping are unmapped.

#include "own_pages.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace matrix::agent {
namespace {

// A program that needs libc and libx11 (which needs libxcb and libc), with the
// agent preloaded: the agent needs libprotobuf (which needs libz, libstdc++
// and libc), libabsl_base and libc; libx11 needs libz too.
std::vector<LoadedObject> Program() {
  return {
      {"", {"libx11.so.6", "libc.so.6"}},                                             // 0 program
      {"libmatrix-agent.so", {"libprotobuf.so.32", "libabsl_base.so", "libc.so.6"}},  // 1
      {"libx11.so.6", {"libxcb.so.1", "libz.so.1", "libc.so.6"}},                     // 2
      {"libc.so.6", {"ld-linux-x86-64.so.2"}},                                        // 3
      {"libprotobuf.so.32", {"libz.so.1", "libstdc++.so.6", "libc.so.6"}},            // 4
      {"libabsl_base.so", {"libabsl_log_severity.so", "libc.so.6"}},                  // 5
      {"libxcb.so.1", {"libc.so.6"}},                                                 // 6
      {"libz.so.1", {"libc.so.6"}},                                                   // 7
      {"libstdc++.so.6", {"libm.so.6", "libc.so.6"}},                                 // 8
      {"libabsl_log_severity.so", {}},                                                // 9
      {"libm.so.6", {"libc.so.6"}},                                                   // 10
      {"ld-linux-x86-64.so.2", {}},                                                   // 11
      {"linux-vdso.so.1", {}},                                                        // 12
  };
}

TEST(OnlyNeededByTest, TheAgentAndWhatNothingElseNeeds) {
  const std::vector<bool> mine = OnlyNeededBy(Program(), 1);
  std::vector<std::string> names;
  for (size_t i = 0; i < mine.size(); ++i) {
    if (mine[i]) names.push_back(Program()[i].name);
  }
  // libz is libx11's too, libc the program's; libstdc++ and libm only the
  // agent's (the program is C).
  EXPECT_EQ(names,
            (std::vector<std::string>{"libmatrix-agent.so", "libprotobuf.so.32", "libabsl_base.so",
                                      "libstdc++.so.6", "libabsl_log_severity.so", "libm.so.6"}));
}

TEST(OnlyNeededByTest, ALibraryAnotherPreloadOrDlopenNeedsIsNotTheAgents) {
  std::vector<LoadedObject> objects = Program();
  // A library opened before the agent's constructor ran, needing libstdc++.
  objects.push_back({"libplugin.so", {"libstdc++.so.6"}});
  const std::vector<bool> mine = OnlyNeededBy(objects, 1);
  EXPECT_TRUE(mine[1]);
  EXPECT_TRUE(mine[4]);    // libprotobuf
  EXPECT_FALSE(mine[8]);   // libstdc++: the plugin's
  EXPECT_FALSE(mine[10]);  // libm: libstdc++'s, so the plugin's
  EXPECT_FALSE(mine[13]);
}

TEST(OnlyNeededByTest, NoAgentNothing) {
  const std::vector<bool> mine = OnlyNeededBy(Program(), Program().size());
  EXPECT_EQ(mine, std::vector<bool>(Program().size(), false));
}

class FileMappingTest : public ::testing::Test {
 protected:
  static constexpr size_t kPages = 64;

  void SetUp() override {
    page_ = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    char path[] = "/tmp/own_pages_test_XXXXXX";
    const int fd = mkstemp(path);
    ASSERT_GE(fd, 0);
    unlink(path);
    std::string contents(kPages * page_, '\0');
    for (size_t i = 0; i < kPages; ++i) contents[i * page_] = static_cast<char>('a' + i % 26);
    ASSERT_EQ(write(fd, contents.data(), contents.size()), static_cast<ssize_t>(contents.size()));
    fsync(fd);
    void* map = mmap(nullptr, kPages * page_, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    ASSERT_NE(map, MAP_FAILED);
    base_ = static_cast<char*>(map);
  }

  void TearDown() override {
    if (base_ != nullptr) munmap(base_, kPages * page_);
  }

  char Read(size_t page) const { return *static_cast<volatile char*>(base_ + page * page_); }

  bool Present(size_t page) const {
    const int fd = open("/proc/self/pagemap", O_RDONLY);
    uint64_t entry = 0;
    const off_t at =
        static_cast<off_t>(reinterpret_cast<uintptr_t>(base_ + page * page_) / page_ * 8);
    const bool read = fd >= 0 && pread(fd, &entry, sizeof(entry), at) == sizeof(entry);
    if (fd >= 0) close(fd);
    return read && (entry >> 63) != 0;
  }

  uintptr_t Begin() const { return reinterpret_cast<uintptr_t>(base_); }
  uintptr_t End() const { return Begin() + kPages * page_; }

  size_t page_ = 0;
  char* base_ = nullptr;
};

TEST_F(FileMappingTest, TheFilesPagesAreUnmappedAndReadBackTheSame) {
  for (size_t i = 0; i < kPages; ++i) ASSERT_EQ(Read(i), 'a' + i % 26);
  for (size_t i = 0; i < kPages; ++i) ASSERT_TRUE(Present(i)) << i;

  const ReleasedPages released = ReleaseFilePages(Begin(), End());

  EXPECT_EQ(released.pages_resident, kPages);
  EXPECT_EQ(released.pages_released, kPages);
  EXPECT_EQ(released.pages_kept, 0u);
  for (size_t i = 0; i < kPages; ++i) EXPECT_FALSE(Present(i)) << i;
  for (size_t i = 0; i < kPages; ++i) EXPECT_EQ(Read(i), 'a' + i % 26) << i;
}

TEST_F(FileMappingTest, APageTheProcessWroteKeepsWhatItWrote) {
  for (size_t i = 0; i < kPages; ++i) Read(i);
  // As a debugger's breakpoint or a text relocation would: the page becomes
  // the process's own copy.
  ASSERT_EQ(mprotect(base_ + 10 * page_, page_, PROT_READ | PROT_WRITE), 0);
  base_[10 * page_] = 'Z';
  ASSERT_EQ(mprotect(base_ + 10 * page_, page_, PROT_READ), 0);

  const ReleasedPages released = ReleaseFilePages(Begin(), End());

  EXPECT_EQ(released.pages_kept, 1u);
  EXPECT_EQ(released.pages_released, kPages - 1);
  EXPECT_TRUE(Present(10));
  EXPECT_EQ(Read(10), 'Z');
  EXPECT_FALSE(Present(9));
  EXPECT_FALSE(Present(11));
  EXPECT_EQ(Read(11), 'a' + 11 % 26);
}

}  // namespace
}  // namespace matrix::agent
