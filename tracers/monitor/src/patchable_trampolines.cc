// The trampolines of patchable function entries: the stub template, its slow
// paths and the per-thread state it reads (see patchable_entries.h and
// docs/method-tracing.md, "Patchable entries"). patchable_stubs.cc builds a
// stub from the template; patchable_entries.cc patches the entries.
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

#include <cstdint>

#include "matrix/trace/method_record.h"
#include "matrix/trace/patchable_entries.h"
#include "patchable_internal.h"

extern "C" {
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

// The method-out record addresses the writer state through a pointer, with
// these offsets written out in the template.
static_assert(matrix::internal::kWriterSlotsOffset == 0 &&
                  matrix::internal::kWriterMaskOffset == 8 &&
                  matrix::internal::kWriterNextOffset == 16 &&
                  matrix::internal::kWriterEpochBitsOffset == 24 &&
                  matrix::internal::kWriterStampOffset == 40,
              "the stub template's writer-state offsets");

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
    auto* entry =
        reinterpret_cast<matrix::internal::ShadowEntry*>(_Unwind_GetGR(context, 3));  // rbx
    if (matrix_patch_thread.writer != nullptr) {
      matrix::internal::AppendMethodRecord(
          true, reinterpret_cast<void*>(_Unwind_GetLanguageSpecificData(context)));
    }
    matrix_patch_thread.top = entry;
  }
  return _URC_CONTINUE_UNWIND;
}

}  // extern "C"

// The stub template: copied for every function, with the placeholders below
// replaced (each is found and rewritten by BuildStub(), patchable_stubs.cc):
//   %fs:0x717171Tk  the thread-pointer offsets of matrix_patch_thread's
//                   fields (T = 0: 1 writer, 2 top, 3 limit) and of
//                   method_tracer.cc's writer state (T = 1: 1 slots, 2 mask,
//                   3 next, 4 epoch bits, 6 stamp),
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
  # The method-in record, with r11 and r12 only: stamp ^ epoch bits is the
  # time low unless the epoch moved.
  movabsq $0x7171717171717131, %r12
  movq %fs:0x71717116, %r11
  xorq %fs:0x71717114, %r11
  cmpq $0x3fff, %r11
  ja .Lmps_enter_slow
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
  movabsq $0x7171717171717134, %r11
  movq 40(%rcx), %r10
  xorq 24(%rcx), %r10
  cmpq $0x3fff, %r10
  ja .Lmps_exit_slow
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

# The return-site templates (Mechanism::kReturnSites): an entry stub per
# function, jumped to from its patched entry, and an exit stub per return
# site (the five-byte nop before a `ret` or a tail call's `jmp`), which the
# patched site calls. Each writes one record, as a hook does, and keeps every
# register but r11 and xmm15: r10 (a nested function's static chain) is kept
# in xmm15 while the record is written, the argument registers are live at
# the entry and before a tail call, rax, rdx, xmm0 and xmm1 hold the return
# value, and xmm8-15 are never live across a call or return. The
# placeholders are the wrapping stub's: 0x717171{11..16} the writer state,
# 0x71717121 rel32 of the body, ...31 / ...34 the records, ...32 the
# function, ...33 the cold path.
# One record (`record`, the time bits or'd in) appended as method_tracer.cc's
# Append() does, with r10 kept in xmm15; to `slow` when a time record is due.
  .macro MATRIX_RS_RECORD record, slow
  movq %r10, %xmm15
  movabsq $\record, %r10
  movq %fs:0x71717116, %r11
  xorq %fs:0x71717114, %r11
  cmpq $0x3fff, %r11
  ja \slow
  orq %r11, %r10
  movq %fs:0x71717113, %r11
  andq %fs:0x71717112, %r11
  shlq $3, %r11
  addq %fs:0x71717111, %r11
  movq %r10, (%r11)
  incq %fs:0x71717113
  movq %xmm15, %r10
  .endm

  .section .rodata.matrix_patch_rs,"a"
  .p2align 4
  .globl matrix_patch_rs_tpl
  .hidden matrix_patch_rs_tpl
matrix_patch_rs_tpl:
  movq %fs:0x71717111, %r11
  testq %r11, %r11
  je .Lmprs_body
  MATRIX_RS_RECORD 0x7171717171717131, .Lmprs_enter_slow
.Lmprs_body:
  .byte 0xe9
  .long 0x71717121
.Lmprs_enter_slow:
  movq %xmm15, %r10
  pushq $0
  movabsq $0x7171717171717132, %r11
  call *.Lmprs_append(%rip)
  leaq 8(%rsp), %rsp
  jmp .Lmprs_body
  .p2align 3
.Lmprs_append:
  .quad 0x7171717171717133
  .globl matrix_patch_rs_tpl_end
  .hidden matrix_patch_rs_tpl_end
matrix_patch_rs_tpl_end:

  .p2align 4
  .globl matrix_patch_rs_exit_tpl
  .hidden matrix_patch_rs_exit_tpl
matrix_patch_rs_exit_tpl:
  movq %fs:0x71717111, %r11
  testq %r11, %r11
  je .Lmprx_ret
  MATRIX_RS_RECORD 0x7171717171717134, .Lmprx_slow
.Lmprx_ret:
  ret
.Lmprx_slow:
  movq %xmm15, %r10
  pushq $1
  movabsq $0x7171717171717132, %r11
  call *.Lmprx_append(%rip)
  leaq 8(%rsp), %rsp
  ret
  .p2align 3
.Lmprx_append:
  .quad 0x7171717171717133
  .globl matrix_patch_rs_exit_tpl_end
  .hidden matrix_patch_rs_exit_tpl_end
matrix_patch_rs_exit_tpl_end:

# -pg's call after a PATCHABLE entry's nops: until Patch(), an entry calls
# here and returns (patched entries jump over the call). Not hidden: a
# PATCHABLE shared object may take it from the program.
  .text
  .p2align 4
  .globl __fentry__
  .type __fentry__, @function
__fentry__:
  ret
  .size __fentry__, .-__fentry__

# -mrecord-return lists the return sites in a read-only __return_loc of
# absolute addresses; one writable input section makes the output section
# writable, so that a PIE or shared object relocates it without text
# relocations.
  .section __return_loc,"aw",@progbits
  .quad 0

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

#endif  // MATRIX_PATCHABLE_SUPPORTED
