// Keeps docs/matrix-report.md true: every example block in it is the built
// matrix-report binary's output on the checked-in demo fixture
// (testdata/demo/matrix-reports, a real matrix-demo run), byte for byte.
//
// A block in the doc is
//
//   <!-- matrix-report: ARGS -->
//   ```
//   $ matrix-report ARGS
//   OUTPUT
//   ```
//   <!-- /matrix-report -->
//
// where ARGS are the arguments (split on spaces, no quoting), optionally
// followed by "| head -N" (the first N lines of the output). The binary runs
// in testdata/demo with TZ=UTC, so it reads ./matrix-reports by default.
//
// Regenerate the blocks after a change to the tool or the fixture:
//   MATRIX_REPORT_UPDATE_DOC=1 build/tests/tools/tools_matrix_report_doc_test
// (tools/matrix-report/update_demo_fixture.sh re-captures the fixture from a
// demo run first, then does this).

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

extern char** environ;

namespace {

const std::string kBinary = MATRIX_REPORT_BINARY;
const std::string kDemoDir = std::string(MATRIX_REPORT_TESTDATA) + "/demo";
const std::string kDoc = MATRIX_REPORT_DOC;

constexpr std::string_view kOpen = "<!-- matrix-report: ";
constexpr std::string_view kOpenEnd = " -->";
constexpr std::string_view kClose = "<!-- /matrix-report -->";
constexpr std::string_view kHead = " | head -";

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

struct Result {
  int code = -1;
  std::string out;
  std::string err;
};

// Runs the binary with `args` in the fixture directory, TZ=UTC.
Result Run(const std::vector<std::string>& args) {
  const std::string base = absl::StrCat(::testing::TempDir(), "/matrix-report-doc-", getpid());
  const std::string out_path = base + ".out";
  const std::string err_path = base + ".err";
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addchdir_np(&actions, kDemoDir.c_str());
  std::vector<std::string> env = {"TZ=UTC"};
  for (char** e = environ; *e != nullptr; ++e) {
    if (!absl::StartsWith(*e, "TZ=")) env.push_back(*e);
  }
  std::vector<char*> envp;
  for (std::string& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<char*> argv = {const_cast<char*>(kBinary.c_str())};
  for (const std::string& arg : args) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  pid_t pid = 0;
  Result result;
  const int spawned = posix_spawn(&pid, kBinary.c_str(), &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  EXPECT_EQ(spawned, 0) << "cannot run " << kBinary;
  if (spawned != 0) return result;
  int status = 0;
  EXPECT_EQ(waitpid(pid, &status, 0), pid);
  result.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  result.out = ReadFile(out_path);
  result.err = ReadFile(err_path);
  std::filesystem::remove(out_path);
  std::filesystem::remove(err_path);
  return result;
}

// One example block of the doc: [begin, end) is the text between the
// markers' lines.
struct Block {
  std::string command;  // ARGS, as in the marker.
  size_t begin = 0;
  size_t end = 0;
  int line = 0;  // of the opening marker, 1-based
};

std::vector<Block> FindBlocks(const std::string& doc) {
  std::vector<Block> blocks;
  size_t pos = 0;
  while ((pos = doc.find(kOpen, pos)) != std::string::npos) {
    Block block;
    block.line = 1 + static_cast<int>(std::count(doc.begin(), doc.begin() + pos, '\n'));
    const size_t eol = doc.find('\n', pos);
    const size_t close = doc.find(kClose, pos);
    if (eol == std::string::npos || close == std::string::npos) {
      ADD_FAILURE() << kDoc << ":" << block.line << ": marker without its end line or "
                    << kClose;
      break;
    }
    std::string marker = doc.substr(pos + kOpen.size(), eol - pos - kOpen.size());
    if (absl::EndsWith(marker, absl::string_view(kOpenEnd.data(), kOpenEnd.size()))) {
      marker.resize(marker.size() - kOpenEnd.size());
    } else {
      ADD_FAILURE() << kDoc << ":" << block.line << ": a marker line ends with \"" << kOpenEnd
                    << "\"";
    }
    block.command = marker;
    block.begin = eol + 1;
    block.end = close;
    blocks.push_back(block);
    pos = close + kClose.size();
  }
  return blocks;
}

// The block text the command gives today.
std::string Render(const std::string& command) {
  std::string args_text = command;
  int head = -1;
  if (const size_t pipe = command.find(kHead); pipe != std::string::npos) {
    args_text = command.substr(0, pipe);
    EXPECT_TRUE(absl::SimpleAtoi(command.substr(pipe + kHead.size()), &head) && head > 0)
        << "only \"| head -N\" may follow the arguments: " << command;
  }
  EXPECT_EQ(command.find_first_of("'\"\\"), std::string::npos)
      << "arguments are split on spaces, without quoting: " << command;
  std::vector<std::string> args = absl::StrSplit(args_text, ' ', absl::SkipEmpty());
  const Result r = Run(args);
  EXPECT_EQ(r.code, 0) << command << "\n" << r.err;
  EXPECT_EQ(r.err, "") << command;
  std::string out = r.out;
  if (head > 0) {
    size_t cut = 0;
    for (int i = 0; i < head && cut != std::string::npos; ++i) {
      cut = out.find('\n', cut);
      if (cut != std::string::npos) ++cut;
    }
    if (cut != std::string::npos) out.resize(cut);
  }
  return absl::StrCat("```\n$ matrix-report ", command, "\n", out, "```\n");
}

TEST(MatrixReportDocTest, ExampleBlocksAreTheBinarysOutputOnTheDemoFixture) {
  ASSERT_TRUE(std::filesystem::is_directory(kDemoDir + "/matrix-reports")) << kDemoDir;
  std::string doc = ReadFile(kDoc);
  ASSERT_FALSE(doc.empty()) << "cannot read " << kDoc;
  const std::vector<Block> blocks = FindBlocks(doc);
  // The doc shows at least summary, group, show (several kinds) and export.
  ASSERT_GE(blocks.size(), 8u) << "example blocks in " << kDoc;

  const char* update = std::getenv("MATRIX_REPORT_UPDATE_DOC");
  if (update != nullptr && std::string(update) == "1") {
    // Back to front, so the earlier blocks' offsets stay valid.
    for (auto it = blocks.rbegin(); it != blocks.rend(); ++it) {
      doc.replace(it->begin, it->end - it->begin, Render(it->command));
    }
    std::ofstream(kDoc, std::ios::binary | std::ios::trunc) << doc;
    std::printf("rewrote %zu example blocks of %s\n", blocks.size(), kDoc.c_str());
    return;
  }
  for (const Block& block : blocks) {
    EXPECT_EQ(doc.substr(block.begin, block.end - block.begin), Render(block.command))
        << kDoc << ":" << block.line << ": the example of `matrix-report " << block.command
        << "` differs from the tool's output on " << kDemoDir
        << ". If the change is intended, regenerate the doc's blocks:\n"
           "  MATRIX_REPORT_UPDATE_DOC=1 build/tests/tools/tools_matrix_report_doc_test";
  }
}

}  // namespace
