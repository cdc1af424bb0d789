// The pages of the libraries that only the agent brings into a program
// (docs/performance.md, "matrix-run agent").
//
// A fault on a file mapping maps the 64 KiB around the page it needs (the
// kernel's fault-around). The loader reads libprotobuf.so's and Abseil's
// symbol tables and relocations, and their static initializers run a little
// of their code, so each leaves whole windows of tables and code resident
// that the agent does not read again: 2.9 MB of a program's resident set.
// ReleaseOwnLibraryPages(), from the agent's constructor (which runs after
// its libraries' own), unmaps the pages resident in each read-only segment of
// the agent and of every library that only the agent needs (MADV_DONTNEED).
// What the agent reads later (a symbol looked up, the code that writes a
// report) is mapped again from the page cache at a minor fault, with its
// window; the tables the loader read once and the initializers' code are not.
// A library the program needs too (libc, and whatever else it links) is left
// as it is, and so is every page a write made the
// process's own (a text relocation, a debugger's breakpoint): only pages that
// are the file's are unmapped, and nothing a page holds changes.
//
// Thread safety: ReleaseOwnLibraryPages() reads the loader's list of objects
// (dl_iterate_phdr, which locks it); it and ReleaseFilePages() may run on any
// thread, once or more (the agent calls the first once, from its
// constructor). OnlyNeededBy() is a pure function.

#ifndef MATRIX_TOOLS_MATRIX_RUN_AGENT_OWN_PAGES_H_
#define MATRIX_TOOLS_MATRIX_RUN_AGENT_OWN_PAGES_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace matrix::agent {

// One loaded object, as the loader's list and its dynamic section give it.
struct LoadedObject {
  std::string name;                 // DT_SONAME, else the file's base name
  std::vector<std::string> needed;  // DT_NEEDED, in order
};

// Which of `objects` only `agent` needs: the agent itself and every library
// reached from it by DT_NEEDED that no other object reaches (the program, its
// libraries, other preloaded or opened objects). A needed name that names no
// loaded object is skipped.
std::vector<bool> OnlyNeededBy(const std::vector<LoadedObject>& objects, size_t agent);

// What ReleaseOwnLibraryPages() or ReleaseFilePages() did.
struct ReleasedPages {
  int libraries = 0;          // objects whose pages were released (the agent counts)
  size_t pages_resident = 0;  // of their read-only segments, before
  size_t pages_released = 0;  // of those, unmapped
  size_t pages_kept = 0;      // resident and the process's own (written): left mapped
};

// [begin, end), page-aligned: MADV_DONTNEED over every run of pages that are
// not resident or are the file's (per /proc/self/pagemap). Without pagemap,
// nothing.
ReleasedPages ReleaseFilePages(uintptr_t begin, uintptr_t end);

// The above for the read-only segments of the agent (the object that holds
// this function) and of the libraries only it needs. Objects with text
// relocations are skipped.
ReleasedPages ReleaseOwnLibraryPages();

}  // namespace matrix::agent

#endif  // MATRIX_TOOLS_MATRIX_RUN_AGENT_OWN_PAGES_H_
