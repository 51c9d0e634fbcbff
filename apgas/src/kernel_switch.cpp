// The kernel-thread context switch (see kernel_switch.hpp): plain assembly, one function per architecture, and the
// start trampoline that calls a fresh thread's entry with its argument.
#include "kernel_switch.hpp"

#include <cstdint>

#if defined(__x86_64__)
// System V: rbx, rbp, r12-r15 are callee-saved. The return address is taken off the stack and jumped to (a `ret`
// after the stack switch measured 1.6x slower here).
asm(R"(
  .text
  .globl apgas_detail_kernel_switch
  .type apgas_detail_kernel_switch,@function
  .p2align 4
apgas_detail_kernel_switch:
  .cfi_startproc
  movq (%rsp), %rax
  leaq 8(%rsp), %rcx
  movq %rbx, 0x00(%rdi)
  movq %rbp, 0x08(%rdi)
  movq %r12, 0x10(%rdi)
  movq %r13, 0x18(%rdi)
  movq %r14, 0x20(%rdi)
  movq %r15, 0x28(%rdi)
  movq %rcx, 0x30(%rdi)
  movq %rax, 0x38(%rdi)
  movq 0x00(%rsi), %rbx
  movq 0x08(%rsi), %rbp
  movq 0x10(%rsi), %r12
  movq 0x18(%rsi), %r13
  movq 0x20(%rsi), %r14
  movq 0x28(%rsi), %r15
  movq 0x30(%rsi), %rsp
  jmp *0x38(%rsi)
  .cfi_endproc
  .size apgas_detail_kernel_switch,.-apgas_detail_kernel_switch

  .globl apgas_detail_kernel_trampoline
  .type apgas_detail_kernel_trampoline,@function
  .p2align 4
apgas_detail_kernel_trampoline:
  .cfi_startproc
  .cfi_undefined rip
  movq %r12, %rdi
  callq *%r13
  ud2
  .cfi_endproc
  .size apgas_detail_kernel_trampoline,.-apgas_detail_kernel_trampoline
)");
#elif defined(__aarch64__)
// AAPCS64: x19-x28, x29 (frame pointer), x30 (link register), sp and the low halves of v8-v15 are callee-saved.
asm(R"(
  .text
  .globl apgas_detail_kernel_switch
  .type apgas_detail_kernel_switch,%function
  .p2align 4
apgas_detail_kernel_switch:
  .cfi_startproc
  stp x19, x20, [x0, #0]
  stp x21, x22, [x0, #16]
  stp x23, x24, [x0, #32]
  stp x25, x26, [x0, #48]
  stp x27, x28, [x0, #64]
  stp x29, x30, [x0, #80]
  mov x9, sp
  str x9, [x0, #96]
  stp d8, d9, [x0, #104]
  stp d10, d11, [x0, #120]
  stp d12, d13, [x0, #136]
  stp d14, d15, [x0, #152]
  ldp x19, x20, [x1, #0]
  ldp x21, x22, [x1, #16]
  ldp x23, x24, [x1, #32]
  ldp x25, x26, [x1, #48]
  ldp x27, x28, [x1, #64]
  ldp x29, x30, [x1, #80]
  ldr x9, [x1, #96]
  mov sp, x9
  ldp d8, d9, [x1, #104]
  ldp d10, d11, [x1, #120]
  ldp d12, d13, [x1, #136]
  ldp d14, d15, [x1, #152]
  ret
  .cfi_endproc
  .size apgas_detail_kernel_switch,.-apgas_detail_kernel_switch

  .globl apgas_detail_kernel_trampoline
  .type apgas_detail_kernel_trampoline,%function
  .p2align 4
apgas_detail_kernel_trampoline:
  .cfi_startproc
  .cfi_undefined x30
  mov x0, x19
  blr x20
  brk #0
  .cfi_endproc
  .size apgas_detail_kernel_trampoline,.-apgas_detail_kernel_trampoline
)");
#endif

extern "C" void apgas_detail_kernel_trampoline();

namespace apgas::detail {

void kernel_context_start(kernel_context& c, void* stack_top, void (*entry)(void*), void* arg) noexcept {
  auto top = reinterpret_cast<std::uintptr_t>(stack_top) & ~std::uintptr_t{15};
  for (void*& r : c.regs) r = nullptr;
#if defined(__x86_64__)
  // Entered by a jump with rsp 16-byte aligned: the trampoline's call then gives entry the alignment of a call.
  c.regs[2] = arg;                                                        // r12
  c.regs[3] = reinterpret_cast<void*>(entry);                             // r13
  c.regs[6] = reinterpret_cast<void*>(top);                               // rsp
  c.regs[7] = reinterpret_cast<void*>(&apgas_detail_kernel_trampoline);   // rip
#elif defined(__aarch64__)
  c.regs[0] = arg;                                                        // x19
  c.regs[1] = reinterpret_cast<void*>(entry);                             // x20
  c.regs[11] = reinterpret_cast<void*>(&apgas_detail_kernel_trampoline);  // x30: where ret goes
  c.regs[12] = reinterpret_cast<void*>(top);                              // sp
#endif
}

}  // namespace apgas::detail
