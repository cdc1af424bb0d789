// Patchable function entries (see patchable_entries.h and
// docs/method-tracing.md, "Patchable entries").
//
// How a patched entry works (x86-64). GCC's -fpatchable-function-entry=5
// puts five one-byte nops at the entry A of every function. Patch() rewrites
// them as `jmp stub` (e9 + rel32), where the stub is generated for that
// function from the template below (the function's address, its records and
// the thread-pointer offsets of the per-thread state are immediates):
//
//   stub:  top < limit on this thread?   ; %fs-relative (initial-exec TLS)
//            no -> jmp A+5                ; not traced: back into the function
//          reserve a shadow-stack entry; caller's return address, rbx, r12 -> it
//          method-in record, inline        ; as method_tracer.cc's Append()
//          call A+5                        ; the body
//          method-out record, inline
//          pop the entry; return to the caller
//
// so a thread that runs no MethodTracer pays two TLS loads, a compare and two
// direct jumps, and no call (limit is null except on the traced thread). On
// the traced thread the stub CALLS the function body at A+5 with the stack
// exactly as the caller left it (the return-address slot now holds the
// stub's own return address). The return stack buffer stays balanced (the
// entry is a jmp, the body is a call), so no return is mispredicted, unlike
// return-address hijacking (uftrace).
//
// Exceptions: while the body runs, rbx holds the address of its shadow-stack
// entry (rbx is callee-saved, so the body keeps it). The stub's FDE
// (UnwindTable, registered with __register_frame) says "the return address
// is at [rbx], the caller's rbx at [rbx+8], its r12 at [rbx+16]", so the
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
#include <string_view>
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
  uintptr_t r12;  // The caller's r12 (the stub keeps the method-out record's index in r12).
  uintptr_t unused;
};
static_assert(sizeof(ShadowEntry) == 32, "the stubs index entries by 32 bytes");

}  // namespace
}  // namespace matrix

extern "C" {
// Per-thread state read by the stubs. writer != nullptr, and limit != nullptr,
// only on a traced thread.
struct MatrixPatchThread {
  void* writer;
  matrix::ShadowEntry* top;
  matrix::ShadowEntry* limit;
  matrix::ShadowEntry* base;
};
__attribute__((visibility("hidden"), tls_model("initial-exec"))) constinit thread_local
    MatrixPatchThread matrix_patch_thread{};
}  // extern "C"

namespace matrix {
namespace internal {

// The stubs trace a call only while top < limit: limit stays null except
// while a tracer is attached, so it is set last and cleared first.
void PatchedEntriesAttachThread(void* writer) {
  MatrixPatchThread& t = matrix_patch_thread;
  if (t.base == nullptr) {
    t.base = new ShadowEntry[PatchableEntries::kShadowDepth]();
    t.top = t.base;
  }
  t.writer = writer;
  __atomic_signal_fence(__ATOMIC_SEQ_CST);
  t.limit = t.base + PatchableEntries::kShadowDepth;
}

void PatchedEntriesDetachThread() {
  MatrixPatchThread& t = matrix_patch_thread;
  t.limit = nullptr;
  __atomic_signal_fence(__ATOMIC_SEQ_CST);
  t.writer = nullptr;
  // Traced frames still running (the tracer stopped inside one) pop their
  // entries when they return: keep the stack for them.
  if (t.top == t.base) {
    delete[] t.base;
    t.base = t.top = nullptr;
  }
}

}  // namespace internal
}  // namespace matrix

#if defined(MATRIX_PATCHABLE_SUPPORTED)

extern "C" {

// Cold path of a stub (a time record is due): all registers saved.
__attribute__((visibility("hidden"), used)) MATRIX_NO_INSTRUMENT void matrix_patch_append_record(
    uint32_t exit, void* fn) {
  matrix::internal::AppendMethodRecord(exit != 0, fn);
}

// Unwinding through a stub's frame: write the method-out record of the
// function being unwound (the stub's FDE carries it as its "LSDA") and pop
// its shadow-stack entry. The unwinder reads the entry (through the CFI)
// after this returns; popping only moves `top`, so the entry is intact until
// something is called again.
__attribute__((visibility("hidden"), used)) MATRIX_NO_INSTRUMENT _Unwind_Reason_Code
matrix_patch_personality(int version, _Unwind_Action actions, _Unwind_Exception_Class,
                         _Unwind_Exception*, _Unwind_Context* context) {
  if (version != 1) return _URC_FATAL_PHASE1_ERROR;
  if ((actions & _UA_CLEANUP_PHASE) != 0) {
    auto* entry = reinterpret_cast<matrix::ShadowEntry*>(_Unwind_GetGR(context, 3));  // rbx
    if (matrix_patch_thread.writer != nullptr) {
      matrix::internal::AppendMethodRecord(
          true, reinterpret_cast<void*>(_Unwind_GetLanguageSpecificData(context)));
    }
    matrix_patch_thread.top = entry;
  }
  return _URC_CONTINUE_UNWIND;
}

// The stub template (below) and the offsets of its CFI points.
extern const uint8_t matrix_patch_stub_tpl[];
extern const uint8_t matrix_patch_stub_tpl_end[];
extern const uint32_t matrix_patch_stub_cfi[];

// The stubs' cold path (below).
void matrix_patch_append_saved();

// libgcc's registration of run-time generated unwind tables.
void __register_frame(void*);

}  // extern "C"

// The stub template: copied for every function, with the placeholders below
// replaced (each is found and rewritten by WriteStub()):
//   %fs:0x717171Tk  the thread-pointer offsets of matrix_patch_thread's
//                   fields (T = 0: 1 writer, 2 top, 3 limit) and of
//                   method_tracer.cc's writer state (T = 1: 1 slots, 2 mask,
//                   3 next, 4 epoch, 5 now_ns),
//   0x71717121      rel32 of A+5 (the body), 0x71717122 the same for a call,
//   0x7171717171717131 / ...34  the method-in / method-out record of A
//                   without time bits, ...32 A, ...33 matrix_patch_append_saved.
//
// A thread that runs no MethodTracer pays two TLS loads, a compare and a
// jump back to A+5. On the traced thread the stub reserves a shadow-stack
// entry, saves the caller's return address, rbx and r12 there, writes the
// method-in record inline (as method_tracer.cc's Append() does) with r11 and
// r12 only (every argument register, r10 and the vector registers are kept),
// and CALLS the body at A+5. r12 (callee-saved) then holds the index the
// method-out record gets if the body writes no record: a leaf's exit then
// needs no dependent load of the writer's index (the compare with it is
// predicted per stub). After the body the stub writes the method-out record
// (rax, rdx, xmm0-1 are live; r10 and r11 are not), pops the entry and
// returns to the caller.
//
// Exceptions: see the top of this file.
asm(R"(
  .section .rodata.matrix_patch_stub,"a"
  .p2align 4
  .globl matrix_patch_stub_tpl
  .hidden matrix_patch_stub_tpl
matrix_patch_stub_tpl:
  # Traced thread with room on the shadow stack? (top = limit = 0 elsewhere.)
  movq %fs:0x71717102, %r11
  cmpq %fs:0x71717103, %r11
  .byte 0x0f, 0x83
  .long 0x71717121
  addq $32, %r11
  movq %r11, %fs:0x71717102
  movq %r12, -16(%r11)
  movq (%rsp), %r12
  movq %r12, -32(%r11)
  movq %rbx, -24(%r11)
  leaq -32(%r11), %rbx
.Lmps_saved:
  # The method-in record, with r11 and r12 only.
  movq %fs:0x71717115, %r12
  movq %r12, %r11
  shrq $24, %r11
  cmpq %fs:0x71717114, %r11
  jne .Lmps_enter_slow
  shrq $10, %r12
  andl $0x3fff, %r12d
  movabsq $0x7171717171717131, %r11
  orq %r11, %r12
  movq %fs:0x71717113, %r11
  andq %fs:0x71717112, %r11
  shlq $3, %r11
  addq %fs:0x71717111, %r11
  movq %r12, (%r11)
  movq %fs:0x71717113, %r12
  incq %r12
  movq %r12, %fs:0x71717113
.Lmps_enter_done:
  # r12 = the index the method-out record gets if the body writes none.
  leaq 8(%rsp), %rsp
.Lmps_call:
  .byte 0xe8
  .long 0x71717122
  # The method-out record: rcx = the writer state, or null if the tracer
  # stopped inside the body.
  movq %fs:0x71717101, %rcx
  testq %rcx, %rcx
  je .Lmps_pop
  movq 32(%rcx), %r11
  movq %r11, %r10
  shrq $24, %r10
  cmpq 24(%rcx), %r10
  jne .Lmps_exit_slow
  shrq $10, %r11
  andl $0x3fff, %r11d
  movabsq $0x7171717171717134, %r10
  orq %r10, %r11
  cmpq 16(%rcx), %r12
  jne .Lmps_exit_nested
.Lmps_exit_store:
  movq 8(%rcx), %r10
  andq %r12, %r10
  movq (%rcx), %rsi
  movq %r11, (%rsi,%r10,8)
  incq %r12
  movq %r12, 16(%rcx)
.Lmps_pop:
  movq 0(%rbx), %r11
  movq 8(%rbx), %r10
  movq 16(%rbx), %r12
  movq %rbx, %fs:0x71717102
.Lmps_popped:
  movq %r10, %rbx
.Lmps_restored:
  pushq %r11
.Lmps_pushed:
  ret
.Lmps_exit_nested:
  # The body wrote records.
  movq 16(%rcx), %r12
  jmp .Lmps_exit_store
.Lmps_enter_slow:
  pushq $0
.Lmps_es_pushed:
  movabsq $0x7171717171717132, %r11
  call *.Lmps_append(%rip)
  leaq 8(%rsp), %rsp
.Lmps_es_popped:
  movq %fs:0x71717113, %r12
  jmp .Lmps_enter_done
.Lmps_exit_slow:
  pushq $1
.Lmps_xs_pushed:
  movabsq $0x7171717171717132, %r11
  call *.Lmps_append(%rip)
  leaq 8(%rsp), %rsp
.Lmps_xs_popped:
  jmp .Lmps_pop
  .p2align 3
.Lmps_append:
  .quad 0x7171717171717133
  .globl matrix_patch_stub_tpl_end
  .hidden matrix_patch_stub_tpl_end
matrix_patch_stub_tpl_end:

  .p2align 2
  .globl matrix_patch_stub_cfi
  .hidden matrix_patch_stub_cfi
matrix_patch_stub_cfi:
  .long .Lmps_saved - matrix_patch_stub_tpl
  .long .Lmps_call - matrix_patch_stub_tpl
  .long .Lmps_popped - matrix_patch_stub_tpl
  .long .Lmps_restored - matrix_patch_stub_tpl
  .long .Lmps_pushed - matrix_patch_stub_tpl
  .long .Lmps_exit_nested - matrix_patch_stub_tpl
  .long .Lmps_enter_slow - matrix_patch_stub_tpl
  .long .Lmps_es_pushed - matrix_patch_stub_tpl
  .long .Lmps_es_popped - matrix_patch_stub_tpl
  .long .Lmps_exit_slow - matrix_patch_stub_tpl
  .long .Lmps_xs_pushed - matrix_patch_stub_tpl
  .long .Lmps_xs_popped - matrix_patch_stub_tpl
  .long matrix_patch_stub_tpl_end - matrix_patch_stub_tpl

# In: r11 = fn, [rsp+8] = kind (0 in, 1 out). Saves every caller-saved
# register and xmm0-7 around matrix_patch_append_record.
  .text
  .p2align 4
  .globl matrix_patch_append_saved
  .hidden matrix_patch_append_saved
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
constexpr size_t kStubSize = 464;  // The template, rounded up (checked).
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

// The thread-pointer offsets (initial-exec TLS: the same for every thread)
// the stubs address with %fs:disp32.
struct TlsOffsets {
  int32_t thread = 0;  // matrix_patch_thread
  int32_t writer = 0;  // method_tracer.cc's writer state
};

int32_t TpOffset(const void* p) {
  uintptr_t tp;
  asm("movq %%fs:0, %0" : "=r"(tp));
  const int64_t off =
      static_cast<int64_t>(reinterpret_cast<uintptr_t>(p)) - static_cast<int64_t>(tp);
  MATRIX_CHECK(off >= INT32_MIN && off <= INT32_MAX, "initial-exec TLS offset out of range");
  return static_cast<int32_t>(off);
}

TlsOffsets GetTlsOffsets() {
  return {TpOffset(&matrix_patch_thread), TpOffset(internal::CurrentThreadWriterState())};
}

size_t StubTemplateSize() {
  return static_cast<size_t>(matrix_patch_stub_tpl_end - matrix_patch_stub_tpl);
}

void WriteStub(uintptr_t stub, uintptr_t entry, const TlsOffsets& tls) {
  uint8_t b[kStubSize];
  memset(b, 0xcc, sizeof(b));
  const size_t n = StubTemplateSize();
  MATRIX_CHECK(n <= kStubSize, "stub template overflow");
  memcpy(b, matrix_patch_stub_tpl, n);
  // Every occurrence of `placeholder` becomes value(position).
  auto replace = [&](uint64_t placeholder, size_t width, auto value) {
    int found = 0;
    for (size_t i = 0; i + width <= n; ++i) {
      if (memcmp(b + i, &placeholder, width) != 0) continue;
      const uint64_t v = value(i);
      memcpy(b + i, &v, width);
      ++found;
      i += width - 1;
    }
    MATRIX_CHECK(found > 0, "stub template placeholder missing");
  };
  auto constant = [](uint64_t v) { return [v](size_t) { return v; }; };
  auto rel32 = [&](uint64_t target) {
    return [target, stub](size_t at) {
      const int64_t rel = static_cast<int64_t>(target) - static_cast<int64_t>(stub + at + 4);
      MATRIX_CHECK(rel >= INT32_MIN && rel <= INT32_MAX, "stub out of rel32 range");
      return static_cast<uint64_t>(static_cast<uint32_t>(static_cast<int32_t>(rel)));
    };
  };
  auto tls32 = [](int32_t base, size_t field) {
    return [base, field](size_t) {
      return static_cast<uint64_t>(static_cast<uint32_t>(base + static_cast<int32_t>(field)));
    };
  };
  replace(0x7171717171717131, 8, constant(EncodeFunctionRecord(record::kKindEnter, entry, 0)));
  replace(0x7171717171717134, 8, constant(EncodeFunctionRecord(record::kKindExit, entry, 0)));
  replace(0x7171717171717132, 8, constant(entry));
  replace(0x7171717171717133, 8,
          constant(reinterpret_cast<uint64_t>(&matrix_patch_append_saved)));
  replace(0x71717101, 4, tls32(tls.thread, offsetof(MatrixPatchThread, writer)));
  replace(0x71717102, 4, tls32(tls.thread, offsetof(MatrixPatchThread, top)));
  replace(0x71717103, 4, tls32(tls.thread, offsetof(MatrixPatchThread, limit)));
  replace(0x71717111, 4, tls32(tls.writer, internal::kWriterSlotsOffset));
  replace(0x71717112, 4, tls32(tls.writer, internal::kWriterMaskOffset));
  replace(0x71717113, 4, tls32(tls.writer, internal::kWriterNextOffset));
  replace(0x71717114, 4, tls32(tls.writer, internal::kWriterEpochOffset));
  replace(0x71717115, 4, tls32(tls.writer, internal::kWriterNowNsOffset));
  replace(0x71717121, 4, rel32(entry + kEntryBytes));
  replace(0x71717122, 4, rel32(entry + kEntryBytes));
  WriteCode(stub, b, kStubSize);
}

// Unwind tables for the stubs (.eh_frame format, registered with libgcc's
// __register_frame): one CIE naming matrix_patch_personality, one FDE per
// stub whose "LSDA" is the traced function's address. The CFI follows the
// template's points (matrix_patch_stub_cfi).
class UnwindTable {
 public:
  UnwindTable() {
    const size_t start = out_.size();
    Put32(0);  // Length, set below.
    Put32(0);  // CIE id.
    Put8(1);   // Version.
    for (char c : std::string_view("zPLR")) Put8(static_cast<uint8_t>(c));
    Put8(0);
    Put8(1);              // Code alignment.
    Put8(0x78);           // Data alignment -8.
    Put8(16);             // Return address: r16 (rip).
    Put8(1 + 8 + 1 + 1);  // Augmentation data.
    Put8(0x00);           // Personality: absolute pointer.
    Put64(reinterpret_cast<uint64_t>(&matrix_patch_personality));
    Put8(0x00);  // LSDA: absolute.
    Put8(0x00);  // FDE addresses: absolute.
    Bytes({0x0c, 0x07, 0x08});  // CFA = rsp + 8.
    Bytes({0x90, 0x01});        // Return address at CFA - 8.
    Finish(start);
  }

  void AddStub(uintptr_t stub, uintptr_t entry) {
    const uint32_t* p = matrix_patch_stub_cfi;
    const uint32_t saved = p[0], call = p[1], popped = p[2], restored = p[3], pushed = p[4],
                   exit_nested = p[5], enter_slow = p[6], es_pushed = p[7], es_popped = p[8],
                   exit_slow = p[9], xs_pushed = p[10], xs_popped = p[11], size = p[12];
    const size_t start = out_.size();
    Put32(0);
    Put32(static_cast<uint32_t>(out_.size() - 0));  // CIE pointer: back to offset 0.
    Put64(stub);
    Put64(size);
    Put8(8);  // Augmentation data: the LSDA.
    Put64(entry);
    uint32_t at = 0;
    auto advance = [&](uint32_t to) {
      MATRIX_CHECK(to >= at, "stub CFI out of order");
      const uint32_t d = to - at;
      if (d < 64) {
        Put8(static_cast<uint8_t>(0x40 | d));
      } else if (d < 256) {
        Bytes({0x02, static_cast<uint8_t>(d)});
      } else {
        Put8(0x03);
        Put8(static_cast<uint8_t>(d));
        Put8(static_cast<uint8_t>(d >> 8));
      }
      at = to;
    };
    // The return address at [rbx], the caller's rbx at [rbx+8], its r12 at
    // [rbx+16].
    const std::initializer_list<uint8_t> kSavedInEntry = {
        0x10, 0x10, 0x02, 0x73, 0x00, 0x10, 0x03, 0x02, 0x73, 0x08, 0x10, 0x0c, 0x02, 0x73, 0x10};
    // CFA = rsp + k, rsp = CFA - k: the body's CFA is rsp + 0 (the unwinder
    // tells frames apart by CFA).
    auto cfa_above_rsp = [&](uint8_t k) {
      Bytes({0x0e, k, 0x16, 0x07, 0x02, static_cast<uint8_t>(0x30 + k), 0x1c});
    };
    advance(saved);
    Bytes(kSavedInEntry);
    advance(call);
    cfa_above_rsp(1);
    advance(popped);
    // Return address in r11, rbx in r10, r12 restored.
    Bytes({0x09, 0x10, 0x0b, 0x09, 0x03, 0x0a, 0xcc});
    advance(restored);
    Bytes({0xc3});  // rbx restored.
    advance(pushed);
    Bytes({0x0e, 0x08, 0xc7, 0x90, 0x01});  // CFA = rsp + 8, return address at CFA - 8.
    advance(exit_nested);  // As after the call.
    Bytes(kSavedInEntry);
    cfa_above_rsp(1);
    advance(enter_slow);  // As at `saved`.
    Bytes({0x0e, 0x08, 0xc7});
    advance(es_pushed);
    Bytes({0x0e, 0x10});
    advance(es_popped);
    Bytes({0x0e, 0x08});
    advance(exit_slow);
    cfa_above_rsp(1);
    advance(xs_pushed);
    cfa_above_rsp(9);
    advance(xs_popped);
    cfa_above_rsp(1);
    Finish(start);
    ++fdes_;
  }

  // Registers the table (kept for the life of the process, as the stubs).
  void Register() {
    if (fdes_ == 0) return;
    Put32(0);  // Terminator.
    auto* table = new uint8_t[out_.size()];
    memcpy(table, out_.data(), out_.size());
    __register_frame(table);
  }

 private:
  void Put8(uint8_t v) { out_.push_back(v); }
  void Put32(uint32_t v) {
    for (int i = 0; i < 4; ++i) Put8(static_cast<uint8_t>(v >> (8 * i)));
  }
  void Put64(uint64_t v) {
    for (int i = 0; i < 8; ++i) Put8(static_cast<uint8_t>(v >> (8 * i)));
  }
  void Bytes(std::initializer_list<uint8_t> bytes) {
    for (uint8_t b : bytes) Put8(b);
  }
  // Pads the record at `start` to 8 bytes with DW_CFA_nop and sets its length.
  void Finish(size_t start) {
    while ((out_.size() - start) % 8 != 0) Put8(0);
    const uint32_t length = static_cast<uint32_t>(out_.size() - start - 4);
    memcpy(out_.data() + start, &length, 4);
  }

  std::vector<uint8_t> out_;
  size_t fdes_ = 0;
};

// Chooses the stub's place: rel32 made of harmless one-byte instructions.
//
// The low byte r0 fixes where the stub starts in its 64-byte line: the
// choices are tried earliest in the line first. The stub is the target of
// the entry's jump, and a target late in a line costs the front end an
// extra fetch on every traced call (BM_TracedCall/patched_looper_thread:
// +0.27 ns with the stub 37 bytes into its line, none at 10, 13, 14 or 17).
bool PlaceStub(State& s, uintptr_t entry, Site* site) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) {
  std::array<uint8_t, 5> low_bytes;
  std::copy(std::begin(kSafeBytes), std::end(kSafeBytes), low_bytes.begin());
  std::stable_sort(low_bytes.begin(), low_bytes.end(), [entry](uint8_t a, uint8_t b) {
    return (entry + kEntryBytes + a) % 64 < (entry + kEntryBytes + b) % 64;
  });
  for (uint8_t r3 : kSafeHighBytes) {
    for (uint8_t r2 : kSafeBytes) {
      for (uint8_t r1 : kSafeBytes) {
        for (uint8_t r0 : low_bytes) {
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

  const TlsOffsets tls = GetTlsOffsets();
  UnwindTable unwind;
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
      WriteStub(site.stub, a, tls);
      unwind.AddStub(site.stub, a);
    }
    to_patch.push_back(a);
  }
  for (uintptr_t page : s.stub_pages) {
    mprotect(reinterpret_cast<void*>(page), kPage, PROT_READ | PROT_EXEC);
  }
  unwind.Register();  // Before any jump to the new stubs.
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
