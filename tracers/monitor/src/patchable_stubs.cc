// A patched entry's stub, built from the template (patchable_trampolines.cc),
// and the unwind table that lets exceptions pass through stubs.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

#include "matrix/core/check.h"
#include "matrix/trace/method_record.h"
#include "matrix/trace/patchable_entries.h"
#include "patchable_internal.h"

#if defined(MATRIX_PATCHABLE_SUPPORTED)

extern "C" {
// libgcc's lookup of the unwind entry (FDE) that covers `pc`; `bases->func`
// is the start of the range it covers.
struct MatrixDwarfEhBases {
  void* tbase;
  void* dbase;
  void* func;
};
const void* _Unwind_Find_FDE(void* pc, MatrixDwarfEhBases* bases);
// libgcc's registration of run-time generated unwind tables.
void __register_frame(void*);
void* __deregister_frame(void*);
}  // extern "C"

namespace matrix {
namespace internal {
namespace {

int32_t TpOffset(const void* p) {
  uintptr_t tp;
  asm("movq %%fs:0, %0" : "=r"(tp));
  const int64_t off =
      static_cast<int64_t>(reinterpret_cast<uintptr_t>(p)) - static_cast<int64_t>(tp);
  MATRIX_CHECK(off >= INT32_MIN && off <= INT32_MAX, "initial-exec TLS offset out of range");
  return static_cast<int32_t>(off);
}

// Copies the template [tpl, tpl_end) to `b` (`size` bytes, the rest int3)
// and replaces its placeholders for a stub at `stub` of the function at
// `entry` whose body is at `body` (0: a template that goes to no body).
// Placeholders a template does not use are skipped.
void FillTemplate(const uint8_t* tpl, const uint8_t* tpl_end, uintptr_t stub, uintptr_t entry,
                  uintptr_t body, const TlsOffsets& tls, uint8_t* b, size_t size) {
  const bool has_body = body != 0;
  memset(b, 0xcc, size);
  const size_t n = static_cast<size_t>(tpl_end - tpl);
  MATRIX_CHECK(n <= size, "stub template overflow");
  memcpy(b, tpl, n);
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
    return found;
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
  replace(0x71717111, 4, tls32(tls.writer, kWriterSlotsOffset));
  replace(0x71717112, 4, tls32(tls.writer, kWriterMaskOffset));
  replace(0x71717113, 4, tls32(tls.writer, kWriterNextOffset));
  replace(0x71717114, 4, tls32(tls.writer, kWriterEpochBitsOffset));
  replace(0x71717116, 4, tls32(tls.writer, kWriterStampOffset));
  if (has_body) {
    replace(0x71717122, 4, rel32(body));
    MATRIX_CHECK(replace(0x71717121, 4, rel32(body)) > 0, "stub template without its body");
  }
}

}  // namespace

TlsOffsets GetTlsOffsets() {
  return {TpOffset(&matrix_patch_thread), TpOffset(CurrentThreadWriterState())};
}

uintptr_t EntryOfFunctionAt(uintptr_t pc, const std::vector<uintptr_t>& entries) {
  MatrixDwarfEhBases bases{};
  if (_Unwind_Find_FDE(reinterpret_cast<void*>(pc), &bases) == nullptr) return 0;
  const auto func = reinterpret_cast<uintptr_t>(bases.func);
  auto it = std::lower_bound(entries.begin(), entries.end(), func);
  if (it == entries.end() || *it - func > 16 || *it > pc) return 0;
  return *it;
}

uintptr_t BodyAfterEntry(uintptr_t entry) {
  const auto* after = reinterpret_cast<const uint8_t*>(entry + kEntryBytes);
  // -pg -mfentry's call: `call *__fentry__@GOTPCREL(%rip)` (ff 15), which
  // the linker may relax to `addr32 call __fentry__` (67 e8), or a direct
  // `call` (e8) in code that is not position-independent.
  if ((after[0] == 0xff && after[1] == 0x15) || (after[0] == 0x67 && after[1] == 0xe8)) {
    return entry + kEntryBytes + 6;
  }
  if (after[0] == 0xe8) return entry + kEntryBytes + 5;
  return entry + kEntryBytes;
}

void BuildStub(uintptr_t stub, uintptr_t entry, uintptr_t body, const TlsOffsets& tls,
               uint8_t b[kStubSize]) {
  FillTemplate(matrix_patch_stub_tpl, matrix_patch_stub_tpl_end, stub, entry, body, tls, b,
               kStubSize);
}

void BuildReturnSitesStub(uintptr_t stub, uintptr_t entry, uintptr_t body, const TlsOffsets& tls,
                          uint8_t b[kReturnSitesStubSize]) {
  FillTemplate(matrix_patch_rs_tpl, matrix_patch_rs_tpl_end, stub, entry, body, tls, b,
               kReturnSitesStubSize);
}

void BuildReturnSiteExit(uintptr_t stub, uintptr_t entry, const TlsOffsets& tls,
                         uint8_t b[kReturnSiteExitSize]) {
  FillTemplate(matrix_patch_rs_exit_tpl, matrix_patch_rs_exit_tpl_end, stub, entry, /*body=*/0, tls,
               b, kReturnSiteExitSize);
}

// The CIE: personality matrix_patch_personality, return address at CFA - 8.
UnwindTable::UnwindTable() {
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

// One FDE; the CFI follows the template's points (matrix_patch_stub_cfi).
void UnwindTable::AddStub(uintptr_t stub, uintptr_t entry) {
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

void* UnwindTable::Register(void* replaced) {
  if (fdes_ == 0) return replaced;
  Put32(0);  // Terminator.
  auto* table = new uint8_t[out_.size()];
  memcpy(table, out_.data(), out_.size());
  __register_frame(table);
  if (replaced != nullptr) __deregister_frame(replaced);
  return table;
}

void UnwindTable::Finish(size_t start) {
  while ((out_.size() - start) % 8 != 0) Put8(0);
  const uint32_t length = static_cast<uint32_t>(out_.size() - start - 4);
  memcpy(out_.data() + start, &length, 4);
}

}  // namespace internal
}  // namespace matrix

#endif  // MATRIX_PATCHABLE_SUPPORTED
