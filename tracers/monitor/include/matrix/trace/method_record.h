// File: matrix/trace/method_record.h
//
// The packed 64-bit record that method tracing writes for every function
// enter and exit on the traced (looper) thread, and the pure functions that
// encode and decode it. MethodTracer (method_tracer.h) writes records;
// CallTree (call_tree.h) reads them. Tests build record sequences by hand
// with the Make*() functions below.
//
//   std::vector<uint64_t> records = {
//       matrix::MakeDispatchBeginRecord(begin),
//       matrix::MakeRecord(matrix::RecordKind::kEnter, fn_a, begin),
//       matrix::MakeRecord(matrix::RecordKind::kExit, fn_a, begin + absl::Milliseconds(3)),
//       matrix::MakeDispatchEndRecord(begin + absl::Milliseconds(4)),
//   };
//   matrix::CallTree tree = matrix::CallTree::Build(records);
//
// Layout (bit 63 is the most significant):
//
//   kind (63..62) | payload (61..0)
//   00 enter      | address (61..14, 48 bits) | time low (13..0)
//   01 exit       | address (61..14, 48 bits) | time low (13..0)
//   10 scope      | 0 enter / 1 exit (61) | site address >> 4 (60..14, 47 bits) | time low (13..0)
//   11 time       | subkind (61..60) | absolute time in ns (59..0)
//
// Time low is bits 23..10 of the writer's time in nanoseconds (units of
// 1.024 us, a window of 16.78 ms). The writer emits a time record whenever
// bits 59..24 of its time (the "epoch") differ from the last time record it
// wrote, so a reader that has seen one time record decodes every later
// enter/exit time exactly, however long the gaps between records. Time
// records also mark dispatch begin and end with the exact dispatch time.
//
// Function addresses on x86-64 and AArch64 user space fit in 48 bits. Scope
// records (MATRIX_TRACE_SCOPE, method_tracer.h) carry the address of a
// 16-byte aligned TraceSite, so the name is read from the site itself.
//
// Thread safety: pure functions and constants; callable from any thread.

#ifndef MATRIX_TRACE_METHOD_RECORD_H_
#define MATRIX_TRACE_METHOD_RECORD_H_

#include <cstdint>

#include "matrix/core/time_ticks.h"

// Functions on the hook path, and every inline function that an instrumented
// translation unit could see in our headers, carry this attribute so that
// -finstrument-functions never instruments the tracer itself, and a
// PATCHABLE target (patchable_entries.h) gives them no patchable entry.
#if defined(__has_attribute) && __has_attribute(patchable_function_entry)
#define MATRIX_NO_INSTRUMENT \
  __attribute__((no_instrument_function, patchable_function_entry(0, 0)))
#else
#define MATRIX_NO_INSTRUMENT __attribute__((no_instrument_function))
#endif

namespace matrix {

// What a record says.
enum class RecordKind : uint8_t {
  kEnter = 0,          // A function was entered (function address).
  kExit = 1,           // A function returned (function address).
  kScopeEnter = 2,     // A MATRIX_TRACE_SCOPE began (TraceSite address).
  kScopeExit = 3,      // A MATRIX_TRACE_SCOPE ended (TraceSite address).
  kTime = 4,           // The writer's time (epoch change).
  kDispatchBegin = 5,  // A looper dispatch began at the exact time carried.
  kDispatchEnd = 6,    // A looper dispatch ended at the exact time carried
                       // (the epoch of what follows stays the one before).
  kInvalid = 7,        // Reserved encodings and empty (zero) slots.
};

namespace record {

inline constexpr int kKindShift = 62;
inline constexpr uint64_t kKindEnter = 0;
inline constexpr uint64_t kKindExit = 1;
inline constexpr uint64_t kKindScope = 2;
inline constexpr uint64_t kKindTime = 3;

inline constexpr int kAddressShift = 14;
inline constexpr int kAddressBits = 48;
inline constexpr uint64_t kAddressMask = (uint64_t{1} << kAddressBits) - 1;

inline constexpr int kScopeExitBit = 61;
inline constexpr int kSiteAlignShift = 4;  // TraceSite is alignas(16).
inline constexpr int kSiteBits = 47;
inline constexpr uint64_t kSiteMask = (uint64_t{1} << kSiteBits) - 1;

inline constexpr int kTimeLowShift = 10;  // Units of 1024 ns.
inline constexpr int kTimeLowBits = 14;
inline constexpr uint64_t kTimeLowMask = (uint64_t{1} << kTimeLowBits) - 1;
// Bits of the time (ns) above the low part: a time record is written when
// they change.
inline constexpr int kEpochShift = kTimeLowShift + kTimeLowBits;  // 24

inline constexpr int kTimeSubkindShift = 60;
inline constexpr uint64_t kTimeSubkindTick = 0;
inline constexpr uint64_t kTimeSubkindDispatchBegin = 1;
inline constexpr uint64_t kTimeSubkindDispatchEnd = 2;
inline constexpr int kTimeBits = 60;
inline constexpr uint64_t kTimeMask = (uint64_t{1} << kTimeBits) - 1;

static_assert(kAddressShift + kAddressBits == kKindShift, "address field layout");
static_assert(kAddressShift + kSiteBits == kScopeExitBit, "site field layout");
static_assert(kTimeLowBits == kAddressShift, "time low fills the bits below the address");
static_assert(kTimeBits == kTimeSubkindShift, "time field layout");
static_assert(kEpochShift == 24, "epoch is 2^24 ns = 16.78 ms");

}  // namespace record

// The time range a record can carry: [0, 2^60) ns (36 years of uptime).
inline constexpr int64_t kMaxRecordTimeNs = static_cast<int64_t>(record::kTimeMask);

MATRIX_NO_INSTRUMENT constexpr uint64_t RecordTimeLow(int64_t now_ns) {
  return (static_cast<uint64_t>(now_ns) >> record::kTimeLowShift) & record::kTimeLowMask;
}

MATRIX_NO_INSTRUMENT constexpr uint64_t RecordEpoch(int64_t now_ns) {
  return static_cast<uint64_t>(now_ns) >> record::kEpochShift;
}

// The time part of a record stamped at `now_ns`, with the epoch in place:
// bits 63..24 of the time, RecordTimeLow() in bits 13..0, zero between. A
// writer keeps RecordEpochBits() of its last time record; while
// `stamp ^ epoch_bits` is at most record::kTimeLowMask it is the time low of
// a record in that epoch, so one xor and one compare stamp a record.
MATRIX_NO_INSTRUMENT constexpr uint64_t RecordEpochBits(int64_t now_ns) {
  return static_cast<uint64_t>(now_ns) & ~((uint64_t{1} << record::kEpochShift) - 1);
}
MATRIX_NO_INSTRUMENT constexpr uint64_t RecordStamp(int64_t now_ns) {
  return RecordEpochBits(now_ns) | RecordTimeLow(now_ns);
}
// The time (ns, truncated to 1024 ns) that `stamp` stands for.
MATRIX_NO_INSTRUMENT constexpr int64_t RecordStampTime(uint64_t stamp) {
  return static_cast<int64_t>((stamp & ~record::kTimeLowMask) |
                              ((stamp & record::kTimeLowMask) << record::kTimeLowShift));
}

// A function enter (kind kEnter) or exit (kExit) of `address` at `now_ns`.
MATRIX_NO_INSTRUMENT constexpr uint64_t EncodeFunctionRecord(uint64_t kind, uintptr_t address,
                                                             int64_t now_ns) {
  return (kind << record::kKindShift) |
         ((static_cast<uint64_t>(address) & record::kAddressMask) << record::kAddressShift) |
         RecordTimeLow(now_ns);
}

// A scope enter or exit of the TraceSite at `site_address` (16-byte aligned).
MATRIX_NO_INSTRUMENT constexpr uint64_t EncodeScopeRecord(bool exit, uintptr_t site_address,
                                                          int64_t now_ns) {
  return (record::kKindScope << record::kKindShift) |
         (static_cast<uint64_t>(exit) << record::kScopeExitBit) |
         (((static_cast<uint64_t>(site_address) >> record::kSiteAlignShift) & record::kSiteMask)
          << record::kAddressShift) |
         RecordTimeLow(now_ns);
}

// A time record of subkind record::kTimeSubkind*.
MATRIX_NO_INSTRUMENT constexpr uint64_t EncodeTimeRecord(uint64_t subkind, int64_t now_ns) {
  return (record::kKindTime << record::kKindShift) | (subkind << record::kTimeSubkindShift) |
         (static_cast<uint64_t>(now_ns) & record::kTimeMask);
}
// The same for a time already in [0, kMaxRecordTimeNs] (no masking).
MATRIX_NO_INSTRUMENT constexpr uint64_t EncodeTimeRecordInRange(uint64_t subkind,
                                                                int64_t now_ns) {
  return (record::kKindTime << record::kKindShift) | (subkind << record::kTimeSubkindShift) |
         static_cast<uint64_t>(now_ns);
}

// Decoding.

MATRIX_NO_INSTRUMENT constexpr RecordKind GetRecordKind(uint64_t r) {
  switch (r >> record::kKindShift) {
    case record::kKindEnter:
      return r == 0 ? RecordKind::kInvalid : RecordKind::kEnter;
    case record::kKindExit:
      return RecordKind::kExit;
    case record::kKindScope:
      return ((r >> record::kScopeExitBit) & 1) ? RecordKind::kScopeExit : RecordKind::kScopeEnter;
    default:
      switch ((r >> record::kTimeSubkindShift) & 3) {
        case record::kTimeSubkindTick:
          return RecordKind::kTime;
        case record::kTimeSubkindDispatchBegin:
          return RecordKind::kDispatchBegin;
        case record::kTimeSubkindDispatchEnd:
          return RecordKind::kDispatchEnd;
        default:
          return RecordKind::kInvalid;
      }
  }
}

MATRIX_NO_INSTRUMENT constexpr bool IsTimeRecord(uint64_t r) {
  return (r >> record::kKindShift) == record::kKindTime;
}

// The function or TraceSite address of an enter/exit/scope record.
MATRIX_NO_INSTRUMENT constexpr uintptr_t GetRecordAddress(uint64_t r) {
  if ((r >> record::kKindShift) == record::kKindScope) {
    return static_cast<uintptr_t>(((r >> record::kAddressShift) & record::kSiteMask)
                                  << record::kSiteAlignShift);
  }
  return static_cast<uintptr_t>((r >> record::kAddressShift) & record::kAddressMask);
}

// The absolute time (ns) of a time record.
MATRIX_NO_INSTRUMENT constexpr int64_t GetRecordTimeNs(uint64_t r) {
  return static_cast<int64_t>(r & record::kTimeMask);
}

// The full time (ns, truncated to 1024 ns) of an enter/exit/scope record,
// given the time carried by the last tick or dispatch-begin record before it
// (a dispatch end does not move the writer's epoch; a decoder clamps what
// follows it to its time).
MATRIX_NO_INSTRUMENT constexpr int64_t DecodeRecordTime(uint64_t r, int64_t last_time_record_ns) {
  return static_cast<int64_t>((RecordEpoch(last_time_record_ns) << record::kEpochShift) |
                              ((r & record::kTimeLowMask) << record::kTimeLowShift));
}

// Convenience for tests and tools: whole records from TimeTicks.
MATRIX_NO_INSTRUMENT inline uint64_t MakeRecord(RecordKind kind, uintptr_t address, TimeTicks now) {
  const int64_t ns = now.ToNanoseconds();
  switch (kind) {
    case RecordKind::kEnter:
      return EncodeFunctionRecord(record::kKindEnter, address, ns);
    case RecordKind::kExit:
      return EncodeFunctionRecord(record::kKindExit, address, ns);
    case RecordKind::kScopeEnter:
      return EncodeScopeRecord(false, address, ns);
    case RecordKind::kScopeExit:
      return EncodeScopeRecord(true, address, ns);
    case RecordKind::kTime:
      return EncodeTimeRecord(record::kTimeSubkindTick, ns);
    case RecordKind::kDispatchBegin:
      return EncodeTimeRecord(record::kTimeSubkindDispatchBegin, ns);
    case RecordKind::kDispatchEnd:
      return EncodeTimeRecord(record::kTimeSubkindDispatchEnd, ns);
    case RecordKind::kInvalid:
      break;
  }
  return 0;
}
MATRIX_NO_INSTRUMENT inline uint64_t MakeTimeRecord(TimeTicks now) {
  return EncodeTimeRecord(record::kTimeSubkindTick, now.ToNanoseconds());
}
MATRIX_NO_INSTRUMENT inline uint64_t MakeDispatchBeginRecord(TimeTicks now) {
  return EncodeTimeRecord(record::kTimeSubkindDispatchBegin, now.ToNanoseconds());
}
MATRIX_NO_INSTRUMENT inline uint64_t MakeDispatchEndRecord(TimeTicks now) {
  return EncodeTimeRecord(record::kTimeSubkindDispatchEnd, now.ToNanoseconds());
}

}  // namespace matrix

#endif  // MATRIX_TRACE_METHOD_RECORD_H_
