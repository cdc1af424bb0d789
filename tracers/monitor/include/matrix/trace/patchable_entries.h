// Patchable function entries: method tracing without -finstrument-functions's
// two calls per function (docs/method-tracing.md, "Patchable entries").
//
// A target built with matrix_trace_methods(<target> PATCHABLE) has five
// one-byte nops at the entry of every function and a five-byte nop before
// every return and tail call, and no hooks: it runs as if untraced. Patch()
// rewrites them, with one of two mechanisms (Mechanism below; by default the
// one it measures to be cheaper on this CPU), so that a thread that runs a
// MethodTracer writes the same method-in and method-out records as the
// -finstrument-functions hooks, and every other thread goes on untraced.
// Unpatch() puts the nops back.
//
//   auto stats = matrix::PatchableEntries::Patch();   // any thread, any time
//   auto tracer = matrix::MethodTracer::Start();      // on the looper thread
//   ...
//   matrix::PatchableEntries::Unpatch();              // optional
//
// Limits (x86-64 Linux only; elsewhere Patch() returns Unimplemented):
//  * An exception unwinding through a traced frame writes its method-out
//    record (as the fallback does). longjmp out of traced frames loses their
//    method-out records (wrapping stubs: their shadow-stack entries stay in
//    use until an enclosing traced function returns); with wrapping stubs,
//    calls deeper than kShadowDepth are not recorded at all.
//  * Every out-of-line function of the target is patched: there is no
//    exclude list (template code from system headers emitted in the target
//    is traced, as with clang's fallback).
//  * The target's text pages become private copies while patched.
//
// Thread safety: Patch() and Unpatch() serialize on a global mutex and may
// run while other threads execute the patched code (see the .cc for why).

#ifndef MATRIX_TRACE_PATCHABLE_ENTRIES_H_
#define MATRIX_TRACE_PATCHABLE_ENTRIES_H_

#include <cstddef>
#include <cstdint>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"

namespace matrix {

class PatchableEntries {
 public:
  // Nested traced calls recorded per thread; deeper calls are not recorded.
  static constexpr size_t kShadowDepth = 256;

  // How a patched function writes its records.
  enum class Mechanism {
    // Patch() times both on this CPU (a few milliseconds, once) and uses the
    // cheaper.
    kAuto,
    // The entry jumps to a stub that writes the method-in record, calls the
    // function's body and writes the method-out record when it returns (the
    // caller's return address waits on a per-thread shadow stack). The
    // cheaper on AMD Zen.
    kWrap,
    // The entry jumps to a stub that writes the method-in record and jumps
    // on; each return site (a five-byte nop before every `ret` and tail
    // call, which PATCHABLE builds also have) calls a stub of its own that
    // writes the method-out record. No shadow stack: the cheaper on Intel. A
    // module built without return sites, a function one of whose return
    // sites finds no room for its stub, and every function when the C++
    // runtime is linked in statically (exceptions would skip the method-out
    // records) are wrapped instead.
    kReturnSites,
  };

  struct Options {
    Mechanism mechanism = Mechanism::kAuto;
  };

  struct Stats {
    size_t modules = 0;            // Loaded modules with a __patchable_function_entries section.
    size_t entries = 0;            // Entries found (5 nops each).
    size_t return_sites = 0;       // Return sites found (in functions with an entry).
    size_t patched = 0;            // Entries now jumping to a stub.
    size_t with_return_sites = 0;  // Of those, patched with kReturnSites.
    size_t skipped = 0;            // Entries left alone: not 5 nops, or no room for a stub.
    Mechanism mechanism = Mechanism::kAuto;  // What this call used.
    // kAuto's measurement: the fastest traced call of a leaf with each, in ns
    // (0 when it did not measure).
    double wrap_ns = 0;
    double return_sites_ns = 0;
  };

  // True where Patch() can work (x86-64 Linux).
  static bool Supported();

  // Patches the entries of every loaded module built with PATCHABLE, with
  // `options.mechanism` (entries patched with the other one are switched).
  // Idempotent; entries of modules loaded since the last call are added.
  // Any thread.
  static absl::StatusOr<Stats> Patch(const Options& options);
  static absl::StatusOr<Stats> Patch() { return Patch(Options()); }

  // Restores the five nops of every patched entry. Any thread. Stubs stay
  // mapped (a thread may still be running one).
  static absl::Status Unpatch();

  // Number of entries currently patched.
  static size_t PatchedCount();

  // The five bytes at a patchable entry `fn` (for tests).
  static void ReadEntryBytes(const void* fn, uint8_t out[5]);
};

namespace internal {

// Runs `fn` on the calling thread (which no MethodTracer traces) with a
// writer of its own, a scratch ring no tracer reads: Patch()'s measurement.
void WithScratchWriter(absl::FunctionRef<void()> fn);

// Called by MethodTracer on the thread it traces, right after its writer is
// set up (`writer` is that thread's writer state) and right before it is
// cleared.
void PatchedEntriesAttachThread(void* writer);
void PatchedEntriesDetachThread();

// The layout of method_tracer.cc's per-thread writer state, read by the
// patched-entry stubs (static_asserted there).
inline constexpr size_t kWriterSlotsOffset = 0;
inline constexpr size_t kWriterMaskOffset = 8;
inline constexpr size_t kWriterNextOffset = 16;
inline constexpr size_t kWriterEpochBitsOffset = 24;
inline constexpr size_t kWriterStampOffset = 40;

// The calling thread's writer state (method_tracer.cc), whose fields the
// stubs address relative to the thread pointer.
void* CurrentThreadWriterState();

// The hooks' write path (method_tracer.cc): appends a method-in (exit =
// false) or method-out record for `fn` if the calling thread is traced.
void AppendMethodRecord(bool exit, void* fn);

}  // namespace internal
}  // namespace matrix

#endif  // MATRIX_TRACE_PATCHABLE_ENTRIES_H_
