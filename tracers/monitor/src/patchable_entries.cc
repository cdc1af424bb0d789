// Patchable function entries (see patchable_entries.h and
// docs/method-tracing.md, "Patchable entries").
//
// How a patched entry works (x86-64). GCC's -fpatchable-function-entry=5
// puts five one-byte nops at the entry A of every function. Patch() rewrites
// them as `jmp stub` (e9 + rel32), where the stub is per function:
//
//   stub:  movabs $(A << 14), %r11   ; A as a record's address bits
//          cmpq $0, %fs:writer        ; this thread's matrix_patch_thread.writer
//          jne  matrix_patch_enter    ; traced: the trampoline below
//          jmp  A+5                   ; not traced: back into the function
//
// so a thread that runs no MethodTracer pays two direct jumps, a move and
// one TLS compare, and no call. On the traced thread matrix_patch_enter writes
// the method-in record, moves the caller's return address (and rbx) to a
// per-thread shadow stack, and CALLS the function body at A+5 with the stack
// exactly as the caller left it (the return-address slot now holds the
// trampoline's own return address). When the body returns, the trampoline
// writes the method-out record and returns to the caller. The return stack
// buffer stays balanced (the entry is a jmp, the body is a call), so no
// return is mispredicted, unlike return-address hijacking (uftrace).
//
// Exceptions: while the body runs, rbx holds the address of its shadow-stack
// entry (rbx is callee-saved, so the body keeps it). The trampoline's CFI
// says "the return address is at [rbx], the caller's rbx at [rbx+8]", so the
// unwinder walks through it, and its personality routine writes the
// method-out record and pops the entry in the cleanup phase, as
// -finstrument-functions's cleanup does.
//
// Patching while other threads run the code. A thread may have been
// preempted between two of the five nops. We never make it execute half an
// instruction: the rel32 of each jump is chosen so that each of its four
// bytes is itself a harmless one-byte instruction (nop, cmc, clc, stc, cld:
// flags are dead and DF is 0 at a function entry), i.e. the stub is placed
// at one of 5^4 addresses 50 MB to 1.9 GB below the function. Patching writes
// bytes A+1..A+4 first (every mix of old and new bytes is one-byte
// instructions), serializes every core of the process (membarrier
// SYNC_CORE), then writes the single byte A = e9. Unpatching reverses it.
// This is the ordering the kernel's text_poke_bp uses, without needing int3.

#include "matrix/trace/patchable_entries.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "matrix/core/check.h"
#include "matrix/trace/method_record.h"

#if defined(__x86_64__) && defined(__linux__)
#define MATRIX_PATCHABLE_SUPPORTED 1
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <linux/membarrier.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <unwind.h>
#endif

namespace matrix {
namespace {

struct ShadowEntry {
  uintptr_t ret;  // The caller's return address.
  uintptr_t rbx;  // The caller's rbx.
  uintptr_t enc;  // The traced function's entry, as a record's address bits (A << 14).
  uintptr_t unused;
};
static_assert(sizeof(ShadowEntry) == 32, "the trampoline indexes entries by 32 bytes");

}  // namespace
}  // namespace matrix

extern "C" {
// Per-thread state read by the stubs and the trampoline (offsets are fixed:
// 0 writer, 8 top, 16 limit). writer != nullptr only on a traced thread.
struct MatrixPatchThread {
  void* writer;
  matrix::ShadowEntry* top;
  matrix::ShadowEntry* limit;
  matrix::ShadowEntry* base;
};
__attribute__((visibility("hidden"), tls_model("initial-exec"))) constinit thread_local
    MatrixPatchThread matrix_patch_thread{};
// The thread-pointer offset of method_tracer.cc's writer state (initial-exec
// TLS: the same for every thread); set when a thread is first traced.
__attribute__((visibility("hidden"))) int64_t matrix_patch_writer_tpoff = 0;
}  // extern "C"

namespace matrix {
namespace internal {

void PatchedEntriesAttachThread(void* writer) {
  MatrixPatchThread& t = matrix_patch_thread;
  if (t.base == nullptr) {
    t.base = new ShadowEntry[PatchableEntries::kShadowDepth]();
    t.top = t.base;
    t.limit = t.base + PatchableEntries::kShadowDepth;
  }
  uintptr_t tp;
  asm("movq %%fs:0, %0" : "=r"(tp));
  matrix_patch_writer_tpoff =
      static_cast<int64_t>(reinterpret_cast<uintptr_t>(writer)) - static_cast<int64_t>(tp);
  __atomic_signal_fence(__ATOMIC_SEQ_CST);
  t.writer = writer;
}

void PatchedEntriesDetachThread() {
  MatrixPatchThread& t = matrix_patch_thread;
  t.writer = nullptr;
  __atomic_signal_fence(__ATOMIC_SEQ_CST);
  // Traced frames still running (the tracer stopped inside one) pop their
  // entries when they return: keep the stack for them.
  if (t.top == t.base) {
    delete[] t.base;
    t.base = t.top = t.limit = nullptr;
  }
}

}  // namespace internal
}  // namespace matrix

#if defined(MATRIX_PATCHABLE_SUPPORTED)

extern "C" {

// Cold path of the trampoline (a time record is due): all registers saved.
__attribute__((visibility("hidden"), used)) MATRIX_NO_INSTRUMENT void matrix_patch_append_record(
    uint32_t exit, void* fn) {
  matrix::internal::AppendMethodRecord(exit != 0, fn);
}

// Unwinding through the trampoline's frame: write the method-out record of
// the function being unwound and pop its shadow-stack entry. The unwinder
// reads the entry (through the CFI) after this returns; popping only moves
// `top`, so the entry is intact until something is called again.
__attribute__((visibility("hidden"), used)) MATRIX_NO_INSTRUMENT _Unwind_Reason_Code
matrix_patch_personality(int version, _Unwind_Action actions, _Unwind_Exception_Class,
                         _Unwind_Exception*, _Unwind_Context* context) {
  if (version != 1) return _URC_FATAL_PHASE1_ERROR;
  if ((actions & _UA_CLEANUP_PHASE) != 0) {
    auto* entry = reinterpret_cast<matrix::ShadowEntry*>(_Unwind_GetGR(context, 3));  // rbx
    if (matrix_patch_thread.writer != nullptr) {
      matrix::internal::AppendMethodRecord(true, reinterpret_cast<void*>(entry->enc >> 14));
    }
    matrix_patch_thread.top = entry;
  }
  return _URC_CONTINUE_UNWIND;
}

void matrix_patch_enter();

}  // extern "C"

// The trampoline. In: r11 = the function's entry A << 14, [rsp] = the caller's
// return address. Preserves every argument register (rdi, rsi, rdx, rcx, r8,
// r9, rax for varargs, r10 for the static chain, xmm0-7) on the way in and
// the return registers (rax, rdx, xmm0-1) on the way out; the way out uses
// only registers that are dead after a return (rcx, rsi, rdi, r8-r11).
//
// MATRIX_APPEND writes one record, as method_tracer.cc's Append() does:
// w = the thread-pointer offset of the writer state, enc = A << 14, t1-t3
// scratch (t3 may be enc: it is read first).
asm(R"(
  .macro MATRIX_APPEND kind, slow, w, enc, t1, t2, t3
  movq %fs:32(\w), \t1
  movq (\t1), \t1
  movq \t1, \t2
  shrq $24, \t2
  cmpq %fs:24(\w), \t2
  jne \slow
  shrq $10, \t1
  andq $0x3fff, \t1
  orq \enc, \t1
  .if \kind
  btsq $62, \t1
  .endif
  movq %fs:16(\w), \t2
  movq \t2, \t3
  andq %fs:8(\w), \t3
  shlq $3, \t3
  addq %fs:0(\w), \t3
  movq \t1, (\t3)
  incq \t2
  movq \t2, %fs:16(\w)
  movq %fs:40(\w), \t3
  movq \t2, (\t3)
  .endm

  .text
  .p2align 4
  .globl matrix_patch_enter
  .hidden matrix_patch_enter
  .type matrix_patch_enter, @function
matrix_patch_enter:
  .cfi_startproc
  .cfi_personality 0x9b, DW.ref.matrix_patch_personality
  pushq %rax
  .cfi_adjust_cfa_offset 8
  pushq %rcx
  .cfi_adjust_cfa_offset 8
  pushq %rdx
  .cfi_adjust_cfa_offset 8
  movq matrix_patch_thread@gottpoff(%rip), %rax
  movq %fs:8(%rax), %rcx
  cmpq %fs:16(%rax), %rcx
  jae .Lmpe_skip
  leaq 32(%rcx), %rdx
  movq %rdx, %fs:8(%rax)
  movq 24(%rsp), %rdx
  movq %rdx, 0(%rcx)
  movq %rbx, 8(%rcx)
  movq %r11, 16(%rcx)
  movq %rcx, %rbx
  .cfi_escape 0x10, 0x03, 0x02, 0x73, 0x08
  movq matrix_patch_writer_tpoff(%rip), %rcx
  MATRIX_APPEND 0, .Lmpe_enter_slow, %rcx, %r11, %rax, %rdx, %r11
.Lmpe_enter_done:
  popq %rdx
  .cfi_adjust_cfa_offset -8
  popq %rcx
  .cfi_adjust_cfa_offset -8
  popq %rax
  .cfi_adjust_cfa_offset -8
  movq 16(%rbx), %r11
  shrq $14, %r11
  addq $5, %r11
  addq $8, %rsp
  # The unwinder's view of this call: return address at [rbx], the caller's
  # rbx at [rbx+8], the caller's rsp = rsp. The CFA is declared one byte
  # above rsp, with rsp = CFA - 1 spelled out: the unwinder tells frames
  # apart by CFA, and the body's CFA is rsp too.
  .cfi_def_cfa_offset 1
  .cfi_escape 0x16, 0x07, 0x02, 0x31, 0x1c
  .cfi_escape 0x10, 0x10, 0x02, 0x73, 0x00
  call *%r11
  .cfi_def_cfa_offset 0
  .cfi_restore 7
  movq matrix_patch_writer_tpoff(%rip), %r9
  cmpq $0, %fs:0(%r9)
  je .Lmpe_exit_done
  movq 16(%rbx), %r10
  MATRIX_APPEND 1, .Lmpe_exit_slow, %r9, %r10, %rsi, %rdi, %r8
.Lmpe_exit_done:
  movq matrix_patch_thread@gottpoff(%rip), %rcx
  movq 0(%rbx), %r11
  .cfi_register 16, 11
  movq 8(%rbx), %r10
  movq %rbx, %fs:8(%rcx)
  movq %r10, %rbx
  .cfi_restore 3
  pushq %r11
  .cfi_adjust_cfa_offset 8
  .cfi_offset 16, -8
  ret

.Lmpe_exit_slow:
  .cfi_def_cfa_offset 0
  .cfi_escape 0x10, 0x10, 0x02, 0x73, 0x00
  .cfi_escape 0x10, 0x03, 0x02, 0x73, 0x08
  movq 16(%rbx), %r11
  shrq $14, %r11
  pushq $1
  .cfi_adjust_cfa_offset 8
  call matrix_patch_append_saved
  addq $8, %rsp
  .cfi_adjust_cfa_offset -8
  jmp .Lmpe_exit_done

.Lmpe_enter_slow:
  .cfi_def_cfa_offset 32
  .cfi_offset 16, -8
  pushq $0
  .cfi_adjust_cfa_offset 8
  movq 16(%rbx), %r11
  shrq $14, %r11
  call matrix_patch_append_saved
  addq $8, %rsp
  .cfi_adjust_cfa_offset -8
  jmp .Lmpe_enter_done

.Lmpe_skip:
  .cfi_restore 3
  popq %rdx
  .cfi_adjust_cfa_offset -8
  popq %rcx
  .cfi_adjust_cfa_offset -8
  popq %rax
  .cfi_adjust_cfa_offset -8
  shrq $14, %r11
  addq $5, %r11
  jmp *%r11
  .cfi_endproc
  .size matrix_patch_enter, .-matrix_patch_enter

# In: r11 = fn, [rsp+8] = kind (0 in, 1 out). Saves every caller-saved
# register and xmm0-7 around matrix_patch_append_record.
  .p2align 4
  .type matrix_patch_append_saved, @function
matrix_patch_append_saved:
  .cfi_startproc
  pushq %rdi
  .cfi_adjust_cfa_offset 8
  pushq %rsi
  .cfi_adjust_cfa_offset 8
  pushq %r8
  .cfi_adjust_cfa_offset 8
  pushq %r9
  .cfi_adjust_cfa_offset 8
  pushq %r10
  .cfi_adjust_cfa_offset 8
  pushq %r11
  .cfi_adjust_cfa_offset 8
  pushq %rax
  .cfi_adjust_cfa_offset 8
  pushq %rcx
  .cfi_adjust_cfa_offset 8
  pushq %rdx
  .cfi_adjust_cfa_offset 8
  pushq %rbp
  .cfi_adjust_cfa_offset 8
  .cfi_offset 6, -88
  movq %rsp, %rbp
  .cfi_def_cfa_register 6
  movq 88(%rbp), %rdi
  andq $-16, %rsp
  subq $128, %rsp
  movdqu %xmm0, 0(%rsp)
  movdqu %xmm1, 16(%rsp)
  movdqu %xmm2, 32(%rsp)
  movdqu %xmm3, 48(%rsp)
  movdqu %xmm4, 64(%rsp)
  movdqu %xmm5, 80(%rsp)
  movdqu %xmm6, 96(%rsp)
  movdqu %xmm7, 112(%rsp)
  movq %r11, %rsi
  call matrix_patch_append_record
  movdqu 0(%rsp), %xmm0
  movdqu 16(%rsp), %xmm1
  movdqu 32(%rsp), %xmm2
  movdqu 48(%rsp), %xmm3
  movdqu 64(%rsp), %xmm4
  movdqu 80(%rsp), %xmm5
  movdqu 96(%rsp), %xmm6
  movdqu 112(%rsp), %xmm7
  movq %rbp, %rsp
  .cfi_def_cfa_register 7
  popq %rbp
  .cfi_adjust_cfa_offset -8
  .cfi_restore 6
  popq %rdx
  .cfi_adjust_cfa_offset -8
  popq %rcx
  .cfi_adjust_cfa_offset -8
  popq %rax
  .cfi_adjust_cfa_offset -8
  popq %r11
  .cfi_adjust_cfa_offset -8
  popq %r10
  .cfi_adjust_cfa_offset -8
  popq %r9
  .cfi_adjust_cfa_offset -8
  popq %r8
  .cfi_adjust_cfa_offset -8
  popq %rsi
  .cfi_adjust_cfa_offset -8
  popq %rdi
  .cfi_adjust_cfa_offset -8
  ret
  .cfi_endproc
  .size matrix_patch_append_saved, .-matrix_patch_append_saved

  .hidden DW.ref.matrix_patch_personality
  .weak DW.ref.matrix_patch_personality
  .section .data.rel.local.DW.ref.matrix_patch_personality,"awG",@progbits,DW.ref.matrix_patch_personality,comdat
  .p2align 3
  .type DW.ref.matrix_patch_personality, @object
  .size DW.ref.matrix_patch_personality, 8
DW.ref.matrix_patch_personality:
  .quad matrix_patch_personality
  .text
  .purgem MATRIX_APPEND
)");

namespace matrix {
namespace {

constexpr uint8_t kNop = 0x90;
constexpr uint8_t kJmp = 0xe9;
// One-byte instructions that are harmless at a function entry: nop, cmc,
// clc, stc, cld (flags are dead at a call; DF is 0 by the ABI). Not sahf:
// the first x86-64 CPUs lacked it in 64-bit mode.
constexpr uint8_t kSafeBytes[] = {0x90, 0xf5, 0xf8, 0xf9, 0xfc};
// Most-significant byte: the nearest stubs (50-60 MB below) first.
constexpr uint8_t kSafeHighBytes[] = {0xfc, 0xf9, 0xf8, 0xf5, 0x90};
constexpr size_t kEntryBytes = 5;
constexpr size_t kStubSize = 48;
constexpr uintptr_t kPage = 4096;

struct Site {
  uintptr_t stub = 0;
  uint8_t rel[4] = {};
  bool patched = false;
};

struct Segment {
  uintptr_t start = 0;  // Page-aligned.
  uintptr_t end = 0;
  int prot = 0;
};

struct State {
  absl::Mutex mu;
  absl::flat_hash_map<uintptr_t, Site> sites ABSL_GUARDED_BY(mu);
  std::map<uintptr_t, uintptr_t> stub_ranges ABSL_GUARDED_BY(mu);  // start -> end
  absl::flat_hash_set<uintptr_t> stub_pages ABSL_GUARDED_BY(mu);
  absl::flat_hash_set<uintptr_t> bad_pages ABSL_GUARDED_BY(mu);
  size_t patched = 0;  // Written under mu; read racily by PatchedCount().
};

State& GetState() {
  static State* const state = new State;
  return *state;
}

std::atomic<bool> g_membarrier_registered{false};

// Code bytes are written and read outside the sanitizers' view: stubs live in
// pages they do not know about, and text is not theirs to check.
__attribute__((no_sanitize("address", "thread", "undefined"))) MATRIX_NO_INSTRUMENT void
WriteCode(uintptr_t at, const uint8_t* bytes, size_t n) {
  auto* p = reinterpret_cast<volatile uint8_t*>(at);
  for (size_t i = 0; i < n; ++i) p[i] = bytes[i];
}

__attribute__((no_sanitize("address", "thread", "undefined"))) MATRIX_NO_INSTRUMENT void
ReadCode(uintptr_t at, uint8_t* out, size_t n) {
  auto* p = reinterpret_cast<const volatile uint8_t*>(at);
  for (size_t i = 0; i < n; ++i) out[i] = p[i];
}

// Every thread of the process executes a serializing instruction before this
// returns, so none runs code bytes it fetched before the call.
void SyncCores() {
  if (!g_membarrier_registered.load(std::memory_order_relaxed)) {
    g_membarrier_registered.store(
        syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_SYNC_CORE, 0, 0) == 0,
        std::memory_order_relaxed);
  }
  if (g_membarrier_registered.load(std::memory_order_relaxed)) {
    syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE, 0, 0);
  } else {
    // No membarrier (Linux < 4.16): other cores serialize at their next
    // interrupt or context switch; a thread may run the old bytes until then.
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
  }
}

struct Module {
  std::string path;
  uintptr_t bias = 0;
  std::vector<Segment> text;
};

std::vector<Module> LoadedModules() {
  std::vector<Module> modules;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        auto* out = static_cast<std::vector<Module>*>(data);
        Module m;
        m.path = (info->dlpi_name == nullptr || info->dlpi_name[0] == '\0') ? "/proc/self/exe"
                                                                             : info->dlpi_name;
        m.bias = info->dlpi_addr;
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const ElfW(Phdr)& ph = info->dlpi_phdr[i];
          if (ph.p_type != PT_LOAD || (ph.p_flags & PF_X) == 0) continue;
          Segment seg;
          seg.start = (m.bias + ph.p_vaddr) & ~(kPage - 1);
          seg.end = (m.bias + ph.p_vaddr + ph.p_memsz + kPage - 1) & ~(kPage - 1);
          seg.prot = PROT_EXEC | ((ph.p_flags & PF_R) ? PROT_READ : 0);
          m.text.push_back(seg);
        }
        // The main program is first; later empty names are not files.
        if (!out->empty() && m.path == "/proc/self/exe") return 0;
        if (!m.text.empty()) out->push_back(std::move(m));
        return 0;
      },
      &modules);
  return modules;
}

bool PreadAll(int fd, void* buf, size_t n, off_t at) {
  return pread(fd, buf, n, at) == static_cast<ssize_t>(n);
}

// The in-memory address ranges of the module's __patchable_function_entries
// sections (read from its section headers on disk).
std::vector<std::pair<uintptr_t, size_t>> EntrySections(const Module& m) {
  std::vector<std::pair<uintptr_t, size_t>> out;
  const int fd = open(m.path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return out;
  ElfW(Ehdr) eh;
  if (PreadAll(fd, &eh, sizeof(eh), 0) && memcmp(eh.e_ident, ELFMAG, SELFMAG) == 0 &&
      eh.e_ident[EI_CLASS] == ELFCLASS64 && eh.e_shentsize == sizeof(ElfW(Shdr)) &&
      eh.e_shnum > 0 && eh.e_shstrndx < eh.e_shnum) {
    std::vector<ElfW(Shdr)> sh(eh.e_shnum);
    if (PreadAll(fd, sh.data(), sh.size() * sizeof(ElfW(Shdr)), eh.e_shoff)) {
      const ElfW(Shdr)& strtab = sh[eh.e_shstrndx];
      std::string names(strtab.sh_size, '\0');
      if (PreadAll(fd, names.data(), names.size(), strtab.sh_offset)) {
        for (const ElfW(Shdr)& s : sh) {
          if (s.sh_name >= names.size() || (s.sh_flags & SHF_ALLOC) == 0) continue;
          if (strcmp(names.c_str() + s.sh_name, "__patchable_function_entries") == 0) {
            out.emplace_back(m.bias + s.sh_addr, s.sh_size);
          }
        }
      }
    }
  }
  close(fd);
  return out;
}

const Segment* SegmentOf(const std::vector<Module>& modules, uintptr_t a) {
  for (const Module& m : modules) {
    for (const Segment& seg : m.text) {
      if (a >= seg.start && a + kEntryBytes <= seg.end) return &seg;
    }
  }
  return nullptr;
}

bool EnsureStubPages(State& s, uintptr_t from, uintptr_t to) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) {
  for (uintptr_t page = from & ~(kPage - 1); page < to; page += kPage) {
    if (s.stub_pages.contains(page)) continue;
    if (s.bad_pages.contains(page)) return false;
    void* got = mmap(reinterpret_cast<void*>(page), kPage, PROT_READ | PROT_WRITE | PROT_EXEC,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (got == reinterpret_cast<void*>(page)) {
      s.stub_pages.insert(page);
      continue;
    }
    if (got != MAP_FAILED) munmap(got, kPage);  // A kernel without MAP_FIXED_NOREPLACE.
    s.bad_pages.insert(page);
    return false;
  }
  return true;
}

bool StubRangeFree(State& s, uintptr_t from, uintptr_t to) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) {
  auto it = s.stub_ranges.lower_bound(to);  // First range starting at or after `to`.
  if (it == s.stub_ranges.begin()) return true;
  --it;
  return it->second <= from;
}

void WriteStub(uintptr_t stub, uintptr_t entry, int32_t tls_writer_offset) {
  uint8_t b[kStubSize];
  memset(b, 0xcc, sizeof(b));
  size_t i = 0;
  auto put32 = [&](int64_t v) {
    const int32_t v32 = static_cast<int32_t>(v);
    memcpy(b + i, &v32, 4);
    i += 4;
  };
  const uint64_t target = reinterpret_cast<uint64_t>(&matrix_patch_enter);
  const uint64_t enc = EncodeFunctionRecord(record::kKindEnter, entry, 0);
  // movabs $(A << 14), %r11: the function as a record's address bits (r11
  // is free at a function entry).
  b[i++] = 0x49;
  b[i++] = 0xbb;
  memcpy(b + i, &enc, 8);
  i += 8;
  // cmpq $0, %fs:writer
  for (uint8_t c : {0x64, 0x48, 0x83, 0x3c, 0x25}) b[i++] = c;
  put32(tls_writer_offset);
  b[i++] = 0x00;
  const int64_t rel = static_cast<int64_t>(target) - static_cast<int64_t>(stub + i + 6);
  const bool near = rel >= INT32_MIN && rel <= INT32_MAX;
  if (near) {
    // jne matrix_patch_enter
    b[i++] = 0x0f;
    b[i++] = 0x85;
    put32(rel);
  } else {
    // jne 1f (past the jmp below)
    b[i++] = 0x75;
    b[i++] = 0x05;
  }
  // jmp A+5
  b[i++] = 0xe9;
  put32(static_cast<int64_t>(entry + kEntryBytes) - static_cast<int64_t>(stub + i + 4));
  if (!near) {
    // 1: jmp *0(%rip); .quad matrix_patch_enter
    for (uint8_t c : {0xff, 0x25, 0x00, 0x00, 0x00, 0x00}) b[i++] = c;
    memcpy(b + i, &target, 8);
    i += 8;
  }
  MATRIX_CHECK(i <= kStubSize, "stub overflow");
  WriteCode(stub, b, kStubSize);
}

// Chooses the stub's place: rel32 made of harmless one-byte instructions.
bool PlaceStub(State& s, uintptr_t entry, Site* site) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) {
  for (uint8_t r3 : kSafeHighBytes) {
    for (uint8_t r2 : kSafeBytes) {
      for (uint8_t r1 : kSafeBytes) {
        for (uint8_t r0 : kSafeBytes) {
          const uint32_t u = uint32_t{r0} | (uint32_t{r1} << 8) | (uint32_t{r2} << 16) |
                             (uint32_t{r3} << 24);
          const int64_t rel = static_cast<int32_t>(u);
          const int64_t at = static_cast<int64_t>(entry + kEntryBytes) + rel;
          if (at <= static_cast<int64_t>(kPage)) continue;
          const uintptr_t stub = static_cast<uintptr_t>(at);
          if (!StubRangeFree(s, stub, stub + kStubSize)) continue;
          if (!EnsureStubPages(s, stub, stub + kStubSize)) continue;
          s.stub_ranges[stub] = stub + kStubSize;
          site->stub = stub;
          site->rel[0] = r0;
          site->rel[1] = r1;
          site->rel[2] = r2;
          site->rel[3] = r3;
          return true;
        }
      }
    }
  }
  return false;
}

int32_t TlsWriterOffset() {
  uintptr_t tp;
  asm("movq %%fs:0, %0" : "=r"(tp));
  const int64_t off =
      static_cast<int64_t>(reinterpret_cast<uintptr_t>(&matrix_patch_thread.writer)) -
      static_cast<int64_t>(tp);
  MATRIX_CHECK(off >= INT32_MIN && off <= INT32_MAX, "initial-exec TLS offset out of range");
  return static_cast<int32_t>(off);
}

// Makes the text segments holding `entries` writable (and still executable)
// for `fn`, then restores them.
template <typename Fn>
absl::Status WithWritableText(const std::vector<Module>& modules,
                              const std::vector<uintptr_t>& entries, Fn fn) {
  std::vector<const Segment*> segs;
  for (uintptr_t a : entries) {
    const Segment* seg = SegmentOf(modules, a);
    if (seg != nullptr && std::find(segs.begin(), segs.end(), seg) == segs.end()) {
      segs.push_back(seg);
    }
  }
  for (const Segment* seg : segs) {
    if (mprotect(reinterpret_cast<void*>(seg->start), seg->end - seg->start,
                 PROT_READ | PROT_WRITE | PROT_EXEC) != 0) {
      return absl::PermissionDeniedError(absl::StrCat(
          "mprotect(PROT_WRITE|PROT_EXEC) of text failed: errno ", errno));
    }
  }
  fn();
  for (const Segment* seg : segs) {
    mprotect(reinterpret_cast<void*>(seg->start), seg->end - seg->start, seg->prot);
  }
  return absl::OkStatus();
}

}  // namespace

bool PatchableEntries::Supported() { return true; }

absl::StatusOr<PatchableEntries::Stats> PatchableEntries::Patch() {
  State& s = GetState();
  absl::MutexLock lock(&s.mu);
  Stats stats;
  const std::vector<Module> modules = LoadedModules();
  std::vector<uintptr_t> entries;
  for (const Module& m : modules) {
    const auto sections = EntrySections(m);
    if (!sections.empty()) ++stats.modules;
    for (const auto& [addr, size] : sections) {
      const auto* p = reinterpret_cast<const uint64_t*>(addr);
      for (size_t i = 0; i < size / sizeof(uint64_t); ++i) entries.push_back(p[i]);
    }
  }
  std::sort(entries.begin(), entries.end());
  entries.erase(std::unique(entries.begin(), entries.end()), entries.end());
  stats.entries = entries.size();

  const int32_t tls_offset = TlsWriterOffset();
  // New stubs may go into pages that hold live ones: keep them executable.
  for (uintptr_t page : s.stub_pages) {
    mprotect(reinterpret_cast<void*>(page), kPage, PROT_READ | PROT_WRITE | PROT_EXEC);
  }
  std::vector<uintptr_t> to_patch;
  for (uintptr_t a : entries) {
    auto it = s.sites.find(a);
    if (it != s.sites.end() && it->second.patched) continue;
    uint8_t bytes[kEntryBytes];
    if (SegmentOf(modules, a) == nullptr) {
      ++stats.skipped;
      continue;
    }
    ReadCode(a, bytes, kEntryBytes);
    if (std::any_of(bytes, bytes + kEntryBytes, [](uint8_t b) { return b != kNop; })) {
      ++stats.skipped;
      continue;
    }
    Site& site = s.sites[a];
    if (site.stub == 0) {
      if (!PlaceStub(s, a, &site)) {
        s.sites.erase(a);
        ++stats.skipped;
        continue;
      }
      WriteStub(site.stub, a, tls_offset);
    }
    to_patch.push_back(a);
  }
  for (uintptr_t page : s.stub_pages) {
    mprotect(reinterpret_cast<void*>(page), kPage, PROT_READ | PROT_EXEC);
  }
  if (!to_patch.empty()) {
    std::vector<std::array<uint8_t, 4>> rels;
    for (uintptr_t a : to_patch) {
      const Site& site = s.sites[a];
      rels.push_back({site.rel[0], site.rel[1], site.rel[2], site.rel[3]});
    }
    SyncCores();  // Stubs are visible before any jump to them.
    const absl::Status status = WithWritableText(modules, to_patch, [&] {
      for (size_t i = 0; i < to_patch.size(); ++i) WriteCode(to_patch[i] + 1, rels[i].data(), 4);
      SyncCores();
      for (uintptr_t a : to_patch) WriteCode(a, &kJmp, 1);
      SyncCores();
    });
    if (!status.ok()) return status;
    for (uintptr_t a : to_patch) s.sites[a].patched = true;
    __atomic_fetch_add(&s.patched, to_patch.size(), __ATOMIC_RELAXED);
  }
  stats.patched = __atomic_load_n(&s.patched, __ATOMIC_RELAXED);
  return stats;
}

absl::Status PatchableEntries::Unpatch() {
  State& s = GetState();
  absl::MutexLock lock(&s.mu);
  const std::vector<Module> modules = LoadedModules();
  std::vector<uintptr_t> to_unpatch;
  for (auto& [a, site] : s.sites) {
    if (!site.patched) continue;
    site.patched = false;
    // Only what is still ours: a module may have been unloaded.
    if (SegmentOf(modules, a) == nullptr) continue;
    uint8_t bytes[kEntryBytes];
    ReadCode(a, bytes, kEntryBytes);
    if (bytes[0] != kJmp || memcmp(bytes + 1, site.rel, 4) != 0) continue;
    to_unpatch.push_back(a);
  }
  __atomic_store_n(&s.patched, 0, __ATOMIC_RELAXED);
  if (to_unpatch.empty()) return absl::OkStatus();
  static constexpr uint8_t kNops[4] = {kNop, kNop, kNop, kNop};
  return WithWritableText(modules, to_unpatch, [&] {
    for (uintptr_t a : to_unpatch) WriteCode(a, &kNop, 1);
    SyncCores();
    for (uintptr_t a : to_unpatch) WriteCode(a + 1, kNops, 4);
    SyncCores();
  });
}

size_t PatchableEntries::PatchedCount() {
  return __atomic_load_n(&GetState().patched, __ATOMIC_RELAXED);
}

void PatchableEntries::ReadEntryBytes(const void* fn, uint8_t out[5]) {
  ReadCode(reinterpret_cast<uintptr_t>(fn), out, kEntryBytes);
}

}  // namespace matrix

#else  // !MATRIX_PATCHABLE_SUPPORTED

namespace matrix {

bool PatchableEntries::Supported() { return false; }

absl::StatusOr<PatchableEntries::Stats> PatchableEntries::Patch() {
  return absl::UnimplementedError("patchable entries need x86-64 Linux");
}

absl::Status PatchableEntries::Unpatch() { return absl::OkStatus(); }

size_t PatchableEntries::PatchedCount() { return 0; }

void PatchableEntries::ReadEntryBytes(const void* fn, uint8_t out[5]) {
  memcpy(out, fn, 5);
}

}  // namespace matrix

#endif  // MATRIX_PATCHABLE_SUPPORTED
