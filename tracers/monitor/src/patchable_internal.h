// Internals shared by the patchable-entry files (not a public header):
//   patchable_trampolines.cc  the stub template, its slow paths, the
//                             per-thread state the stubs read;
//   patchable_stubs.cc        a stub from the template and its unwind table;
//   patchable_entries.cc      finding the entries and patching them.
//
// Thread safety: the per-thread state is the calling thread's own; BuildStub()
// and UnwindTable are used under PatchableEntries' mutex.

#ifndef MATRIX_TRACERS_MONITOR_SRC_PATCHABLE_INTERNAL_H_
#define MATRIX_TRACERS_MONITOR_SRC_PATCHABLE_INTERNAL_H_

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <vector>

#if defined(__x86_64__) && defined(__linux__)
#define MATRIX_PATCHABLE_SUPPORTED 1
#endif

namespace matrix {
namespace internal {

// A traced frame's entry on the per-thread shadow stack.
struct ShadowEntry {
  uintptr_t ret;  // The caller's return address.
  uintptr_t rbx;  // The caller's rbx.
  uintptr_t r12;  // The caller's r12 (the stub keeps the method-out record's index in r12).
  uintptr_t unused;
};
static_assert(sizeof(ShadowEntry) == 32, "the stubs index entries by 32 bytes");

}  // namespace internal
}  // namespace matrix

extern "C" {
// Per-thread state read by the stubs. writer != nullptr, and limit != nullptr,
// only on a traced thread.
struct MatrixPatchThread {
  void* writer;
  matrix::internal::ShadowEntry* top;
  matrix::internal::ShadowEntry* limit;
  matrix::internal::ShadowEntry* base;
};
extern __attribute__((visibility("hidden"), tls_model("initial-exec"))) constinit thread_local
    MatrixPatchThread matrix_patch_thread;
}  // extern "C"

#if defined(MATRIX_PATCHABLE_SUPPORTED)

#include <unwind.h>

extern "C" {
// Unwinding through a stub's frame (patchable_trampolines.cc).
_Unwind_Reason_Code matrix_patch_personality(int version, _Unwind_Action actions,
                                             _Unwind_Exception_Class, _Unwind_Exception*,
                                             _Unwind_Context* context);
// The stub template (patchable_trampolines.cc) and the offsets of its CFI
// points.
extern const uint8_t matrix_patch_stub_tpl[];
extern const uint8_t matrix_patch_stub_tpl_end[];
extern const uint32_t matrix_patch_stub_cfi[];
// The return-site templates (Mechanism::kReturnSites): a function's entry
// stub and a return site's exit stub.
extern const uint8_t matrix_patch_rs_tpl[];
extern const uint8_t matrix_patch_rs_tpl_end[];
extern const uint8_t matrix_patch_rs_exit_tpl[];
extern const uint8_t matrix_patch_rs_exit_tpl_end[];
// The stubs' cold path: saves the caller-saved registers around a record.
void matrix_patch_append_saved();
}  // extern "C"

namespace matrix {
namespace internal {

inline constexpr size_t kEntryBytes = 5;
inline constexpr size_t kStubSize = 464;  // The template, rounded up (checked).
inline constexpr size_t kReturnSitesStubSize = 192;  // The same for the return-site stubs:
inline constexpr size_t kReturnSiteExitSize = 160;   // a function's entry, a site's exit.
// A return site: the five-byte nop -mrecord-return lists (0f 1f 44 00 00).
inline constexpr size_t kReturnSiteBytes = 5;

// The thread-pointer offsets (initial-exec TLS: the same for every thread)
// the stubs address with %fs:disp32.
struct TlsOffsets {
  int32_t thread = 0;  // matrix_patch_thread
  int32_t writer = 0;  // method_tracer.cc's writer state
};
TlsOffsets GetTlsOffsets();

// Where the function at `entry` goes on after its patchable nops: past -pg's
// call to __fentry__ when there is one (a PATCHABLE build's), else A+5.
uintptr_t BodyAfterEntry(uintptr_t entry);

// The wrapping stub of the function at `entry`, to be placed at `stub`; it
// calls the function's body at `body`.
void BuildStub(uintptr_t stub, uintptr_t entry, uintptr_t body, const TlsOffsets& tls,
               uint8_t out[kStubSize]);

// The return-site entry stub of the function at `entry`, to be placed at
// `stub`: it jumps on to `body`.
void BuildReturnSitesStub(uintptr_t stub, uintptr_t entry, uintptr_t body, const TlsOffsets& tls,
                          uint8_t out[kReturnSitesStubSize]);
// The exit stub of a return site of the function at `entry`, to be placed at
// `stub`; it returns to the site.
void BuildReturnSiteExit(uintptr_t stub, uintptr_t entry, const TlsOffsets& tls,
                         uint8_t out[kReturnSiteExitSize]);

// patchable_exceptions.cc: the entries now patched with return sites (for
// the method-out records of frames an exception unwinds), and whether this
// process's throws and catches reach it (not when the C++ runtime is linked
// in statically).
void PublishReturnSiteEntries(std::vector<uintptr_t> entries);
bool ReturnSiteExceptionsCovered();

// The patchable entry of the function whose code holds `pc`, among the
// sorted `entries`, or 0. The function is the start of the unwind entry
// (FDE) that covers `pc` (libgcc's _Unwind_Find_FDE, which works on stripped
// binaries); its entry is at that start or just after it (an endbr64).
uintptr_t EntryOfFunctionAt(uintptr_t pc, const std::vector<uintptr_t>& entries);

// Unwind tables for the stubs (.eh_frame format, registered with libgcc's
// __register_frame): one CIE naming the stubs' personality routine, one FDE
// per stub whose "LSDA" is the traced function's address.
class UnwindTable {
 public:
  UnwindTable();
  void AddStub(uintptr_t stub, uintptr_t entry);
  // Registers the table in place of `replaced` (the table returned by the
  // last call, or null) and returns it; returns `replaced` when the table is
  // empty. Every stub's FDE is in the one table registered: libgcc (before
  // GCC 13) stops at the first registered table whose range starts below a
  // pc, so tables whose ranges interleave would hide each other's stubs.
  // The new table is registered before the old one goes, so a stub in use is
  // always found. Tables stay allocated (an unwinder may still read one).
  void* Register(void* replaced);

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
  void Finish(size_t start);

  std::vector<uint8_t> out_;
  size_t fdes_ = 0;
};

}  // namespace internal
}  // namespace matrix

#endif  // MATRIX_PATCHABLE_SUPPORTED

#endif  // MATRIX_TRACERS_MONITOR_SRC_PATCHABLE_INTERNAL_H_
