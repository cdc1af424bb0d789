// Patchable function entries: method tracing without -finstrument-functions's
// two calls per function (docs/method-tracing.md, "Patchable entries").
//
// A target built with matrix_trace_methods(<target> PATCHABLE) has five
// one-byte nops at the entry of every function (-fpatchable-function-entry=5)
// and no hooks: it runs as if untraced. Patch() turns each entry into a jump
// to a small per-function stub; the stub returns to the function at once
// unless the calling thread runs a MethodTracer, in which case it writes the
// same method-in and method-out records as the -finstrument-functions hooks.
// Unpatch() puts the nops back.
//
//   auto stats = matrix::PatchableEntries::Patch();   // any thread, any time
//   auto tracer = matrix::MethodTracer::Start();      // on the looper thread
//   ...
//   matrix::PatchableEntries::Unpatch();              // optional
//
// Limits (x86-64 Linux only; elsewhere Patch() returns Unimplemented):
//  * An exception unwinding through a traced frame writes its method-out
//    record (as the fallback does). longjmp out of traced frames leaves
//    their shadow-stack entries in use until an enclosing traced function
//    returns; calls deeper than kShadowDepth are not recorded at all.
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

#include "absl/status/statusor.h"

namespace matrix {

class PatchableEntries {
 public:
  // Nested traced calls recorded per thread; deeper calls are not recorded.
  static constexpr size_t kShadowDepth = 256;

  struct Stats {
    size_t modules = 0;  // Loaded modules with a __patchable_function_entries section.
    size_t entries = 0;  // Entries found (5 nops each).
    size_t patched = 0;  // Entries now jumping to a stub.
    size_t skipped = 0;  // Entries left alone: not 5 nops, or no room for a stub.
  };

  // True where Patch() can work (x86-64 Linux).
  static bool Supported();

  // Patches the entries of every loaded module built with PATCHABLE.
  // Idempotent; entries of modules loaded since the last call are added.
  // Any thread.
  static absl::StatusOr<Stats> Patch();

  // Restores the five nops of every patched entry. Any thread. Stubs stay
  // mapped (a thread may still be running one).
  static absl::Status Unpatch();

  // Number of entries currently patched.
  static size_t PatchedCount();

  // The five bytes at a patchable entry `fn` (for tests).
  static void ReadEntryBytes(const void* fn, uint8_t out[5]);
};

namespace internal {

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
