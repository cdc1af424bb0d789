#include "own_pages.h"

#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "matrix/core/file_path.h"

namespace matrix::agent {

namespace {

// /proc/self/pagemap's bits (Documentation/admin-guide/mm/pagemap.rst).
constexpr uint64_t kPagePresent = uint64_t{1} << 63;
constexpr uint64_t kPageSwapped = uint64_t{1} << 62;
constexpr uint64_t kPageFileOrSharedAnon = uint64_t{1} << 61;

struct PageRange {
  uintptr_t begin;
  uintptr_t end;
};

// One object of the loader's list, with what releasing its pages needs.
struct ObjectPages {
  LoadedObject object;
  std::vector<PageRange> read_only;  // its read-only PT_LOAD segments
  std::vector<PageRange> writable;   // its writable ones
  bool text_relocations = false;
  bool holds_this_code = false;
};

uintptr_t PageSize() { return static_cast<uintptr_t>(sysconf(_SC_PAGESIZE)); }

// The dynamic section's names, flags and needed list. glibc rewrites the
// address entries of a writable dynamic section to run-time addresses; a
// read-only one (the vDSO's) keeps link-time ones.
void ReadDynamic(const dl_phdr_info& info, const ElfW(Phdr) & dynamic_header, ObjectPages& out) {
  const auto* dyn = reinterpret_cast<const ElfW(Dyn)*>(info.dlpi_addr + dynamic_header.p_vaddr);
  uintptr_t strtab = 0;
  std::vector<size_t> needed;
  size_t soname = 0;
  bool has_soname = false;
  for (; dyn->d_tag != DT_NULL; ++dyn) {
    switch (dyn->d_tag) {
      case DT_STRTAB:
        strtab = dyn->d_un.d_ptr;
        break;
      case DT_NEEDED:
        needed.push_back(dyn->d_un.d_val);
        break;
      case DT_SONAME:
        soname = dyn->d_un.d_val;
        has_soname = true;
        break;
      case DT_TEXTREL:
        out.text_relocations = true;
        break;
      case DT_FLAGS:
        if ((dyn->d_un.d_val & DF_TEXTREL) != 0) out.text_relocations = true;
        break;
      default:
        break;
    }
  }
  if (strtab == 0) return;
  if (strtab < info.dlpi_addr) strtab += info.dlpi_addr;
  const char* strings = reinterpret_cast<const char*>(strtab);
  if (has_soname) out.object.name = strings + soname;
  for (size_t offset : needed) out.object.needed.emplace_back(strings + offset);
}

int CollectObject(dl_phdr_info* info, size_t, void* data) {
  auto& objects = *static_cast<std::vector<ObjectPages>*>(data);
  ObjectPages pages;
  pages.object.name = BaseName(info->dlpi_name != nullptr ? info->dlpi_name : "");
  const uintptr_t page = PageSize();
  const auto here = reinterpret_cast<uintptr_t>(&ReleaseOwnLibraryPages);
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& header = info->dlpi_phdr[i];
    if (header.p_type == PT_DYNAMIC) ReadDynamic(*info, header, pages);
    if (header.p_type != PT_LOAD || header.p_memsz == 0) continue;
    const uintptr_t start = info->dlpi_addr + header.p_vaddr;
    const PageRange range = {start & ~(page - 1),
                             (start + header.p_memsz + page - 1) & ~(page - 1)};
    ((header.p_flags & PF_W) != 0 ? pages.writable : pages.read_only).push_back(range);
    if (here >= start && here < start + header.p_memsz) pages.holds_this_code = true;
  }
  objects.push_back(std::move(pages));
  return 0;
}

// The objects `from` reaches through DT_NEEDED, by name, marked in `reached`.
void Reach(const std::vector<LoadedObject>& objects, size_t from, std::vector<bool>& reached) {
  std::vector<size_t> stack = {from};
  reached[from] = true;
  while (!stack.empty()) {
    const size_t i = stack.back();
    stack.pop_back();
    for (const std::string& name : objects[i].needed) {
      for (size_t j = 0; j < objects.size(); ++j) {
        if (reached[j] || objects[j].name != name) continue;
        reached[j] = true;
        stack.push_back(j);
      }
    }
  }
}

}  // namespace

std::vector<bool> OnlyNeededBy(const std::vector<LoadedObject>& objects, size_t agent) {
  std::vector<bool> mine(objects.size(), false);
  if (agent >= objects.size()) return mine;
  Reach(objects, agent, mine);
  std::vector<bool> others(objects.size(), false);
  for (size_t i = 0; i < objects.size(); ++i) {
    if (!mine[i] && !others[i]) Reach(objects, i, others);
  }
  for (size_t i = 0; i < objects.size(); ++i) mine[i] = mine[i] && !others[i];
  return mine;
}

namespace {

// ReleaseFilePages() with /proc/self/pagemap open as `pagemap`.
ReleasedPages ReleaseFilePagesWith(int pagemap, uintptr_t begin, uintptr_t end) {
  ReleasedPages result;
  if (end <= begin || pagemap < 0) return result;
  const uintptr_t page = PageSize();
  constexpr size_t kChunk = 512;
  uint64_t entries[kChunk];
  uintptr_t run_begin = begin;  // the run of releasable pages being built
  auto release_run = [&](uintptr_t run_end) {
    if (run_end > run_begin) {
      madvise(reinterpret_cast<void*>(run_begin), run_end - run_begin, MADV_DONTNEED);
    }
  };
  for (uintptr_t at = begin; at < end;) {
    const size_t count = std::min<size_t>(kChunk, (end - at) / page);
    const ssize_t read = pread(pagemap, entries, count * sizeof(uint64_t),
                               static_cast<off_t>(at / page * sizeof(uint64_t)));
    if (read != static_cast<ssize_t>(count * sizeof(uint64_t))) {
      release_run(at);  // what was read is known; leave the rest mapped
      run_begin = end;
      break;
    }
    for (size_t i = 0; i < count; ++i, at += page) {
      const uint64_t entry = entries[i];
      if ((entry & (kPagePresent | kPageSwapped)) == 0) continue;  // not mapped
      ++result.pages_resident;
      if ((entry & kPagePresent) != 0 && (entry & kPageFileOrSharedAnon) != 0) {
        ++result.pages_released;  // the file's page
        continue;
      }
      // The process's own copy (written, maybe swapped out): keep it and what
      // it holds.
      ++result.pages_kept;
      release_run(at);
      run_begin = at + page;
    }
  }
  release_run(end);
  return result;
}

int OpenPagemap() { return open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC); }

}  // namespace

ReleasedPages ReleaseFilePages(uintptr_t begin, uintptr_t end) {
  const int pagemap = OpenPagemap();
  const ReleasedPages result = ReleaseFilePagesWith(pagemap, begin, end);
  if (pagemap >= 0) close(pagemap);
  return result;
}

ReleasedPages ReleaseOwnLibraryPages() {
  std::vector<ObjectPages> loaded;
  dl_iterate_phdr(&CollectObject, &loaded);
  std::vector<LoadedObject> objects;
  size_t agent = loaded.size();
  for (size_t i = 0; i < loaded.size(); ++i) {
    objects.push_back(loaded[i].object);
    if (loaded[i].holds_this_code) agent = i;
  }
  const std::vector<bool> mine = OnlyNeededBy(objects, agent);
  ReleasedPages total;
  const int pagemap = OpenPagemap();
  if (pagemap < 0) return total;
  for (size_t i = 0; i < loaded.size(); ++i) {
    if (!mine[i] || loaded[i].text_relocations) continue;
    ++total.libraries;
    for (const PageRange& range : loaded[i].read_only) {
      // Pages a writable segment shares are not the read-only segment's alone.
      PageRange clipped = range;
      for (const PageRange& w : loaded[i].writable) {
        if (w.begin < clipped.end && w.end > clipped.begin) {
          if (w.begin <= clipped.begin)
            clipped.begin = std::min(w.end, clipped.end);
          else
            clipped.end = w.begin;
        }
      }
      const ReleasedPages released = ReleaseFilePagesWith(pagemap, clipped.begin, clipped.end);
      total.pages_resident += released.pages_resident;
      total.pages_released += released.pages_released;
      total.pages_kept += released.pages_kept;
    }
  }
  close(pagemap);
  return total;
}

}  // namespace matrix::agent
