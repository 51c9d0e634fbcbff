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
  movq %rsi, %rdi
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

# The barrier stub that clocked bodies call from inline assembly (apgas/kernel_thread.hpp, cpu_barrier): rdi = the
# kernel-thread record, rsi = kind, rdx = combine, rcx = op, r8 = the caller's vector width (16: SSE, 32: AVX,
# 64: AVX-512). Besides what System V keeps, it keeps xmm6-xmm15 in the width the caller uses them. Record offsets:
# kernel_switch.hpp (64 resume_at, 72 result, 80 width, 128 the vector registers). It saves the
# thread into its record, lets apgas_detail_kernel_barrier_next (C++) do the bookkeeping and pick the thread to run,
# and switches to it. After a switch every load is relative to the resumed thread's record, never to the stack: loads
# from the new stack at the offsets just written on the old one make the processor's memory renaming mispredict.
# The thread that hands over prepares the resumed one (its state and what its barrier returns, in its record).
  .globl apgas_detail_kernel_barrier
  .type apgas_detail_kernel_barrier,@function
  .p2align 4
apgas_detail_kernel_barrier:
  .cfi_startproc
  cmpq $32, %r8
  je 2f
  ja 3f
  movaps %xmm6, 128(%rdi)
  movaps %xmm7, 144(%rdi)
  movaps %xmm8, 160(%rdi)
  movaps %xmm9, 176(%rdi)
  movaps %xmm10, 192(%rdi)
  movaps %xmm11, 208(%rdi)
  movaps %xmm12, 224(%rdi)
  movaps %xmm13, 240(%rdi)
  movaps %xmm14, 256(%rdi)
  movaps %xmm15, 272(%rdi)
  jmp 4f
2:
  vmovaps %ymm6, 128(%rdi)
  vmovaps %ymm7, 160(%rdi)
  vmovaps %ymm8, 192(%rdi)
  vmovaps %ymm9, 224(%rdi)
  vmovaps %ymm10, 256(%rdi)
  vmovaps %ymm11, 288(%rdi)
  vmovaps %ymm12, 320(%rdi)
  vmovaps %ymm13, 352(%rdi)
  vmovaps %ymm14, 384(%rdi)
  vmovaps %ymm15, 416(%rdi)
  vzeroupper
  jmp 4f
3:
  vmovaps %zmm6, 128(%rdi)
  vmovaps %zmm7, 192(%rdi)
  vmovaps %zmm8, 256(%rdi)
  vmovaps %zmm9, 320(%rdi)
  vmovaps %zmm10, 384(%rdi)
  vmovaps %zmm11, 448(%rdi)
  vmovaps %zmm12, 512(%rdi)
  vmovaps %zmm13, 576(%rdi)
  vmovaps %zmm14, 640(%rdi)
  vmovaps %zmm15, 704(%rdi)
  vzeroupper
4:
  movq %r8, 80(%rdi)
  movq (%rsp), %rax
  movq %rax, 64(%rdi)
  leaq 8(%rsp), %rax
  movq %rbx, 0x00(%rdi)
  movq %rbp, 0x08(%rdi)
  movq %r12, 0x10(%rdi)
  movq %r13, 0x18(%rdi)
  movq %r14, 0x20(%rdi)
  movq %r15, 0x28(%rdi)
  movq %rax, 0x30(%rdi)
  leaq 5f(%rip), %rax
  movq %rax, 0x38(%rdi)
  andq $-16, %rsp
  .cfi_undefined rip
  call apgas_detail_kernel_barrier_next@PLT
  movq %rax, %rdi
  movq 0x00(%rdi), %rbx
  movq 0x08(%rdi), %rbp
  movq 0x10(%rdi), %r12
  movq 0x18(%rdi), %r13
  movq 0x20(%rdi), %r14
  movq 0x28(%rdi), %r15
  movq 0x30(%rdi), %rsp
  jmp *0x38(%rdi)
5:
  movq 80(%rdi), %r8
  movq 72(%rdi), %rax
  cmpq $32, %r8
  je 6f
  ja 7f
  movaps 128(%rdi), %xmm6
  movaps 144(%rdi), %xmm7
  movaps 160(%rdi), %xmm8
  movaps 176(%rdi), %xmm9
  movaps 192(%rdi), %xmm10
  movaps 208(%rdi), %xmm11
  movaps 224(%rdi), %xmm12
  movaps 240(%rdi), %xmm13
  movaps 256(%rdi), %xmm14
  movaps 272(%rdi), %xmm15
  jmp *64(%rdi)
6:
  vmovaps 128(%rdi), %ymm6
  vmovaps 160(%rdi), %ymm7
  vmovaps 192(%rdi), %ymm8
  vmovaps 224(%rdi), %ymm9
  vmovaps 256(%rdi), %ymm10
  vmovaps 288(%rdi), %ymm11
  vmovaps 320(%rdi), %ymm12
  vmovaps 352(%rdi), %ymm13
  vmovaps 384(%rdi), %ymm14
  vmovaps 416(%rdi), %ymm15
  jmp *64(%rdi)
7:
  vmovaps 128(%rdi), %zmm6
  vmovaps 192(%rdi), %zmm7
  vmovaps 256(%rdi), %zmm8
  vmovaps 320(%rdi), %zmm9
  vmovaps 384(%rdi), %zmm10
  vmovaps 448(%rdi), %zmm11
  vmovaps 512(%rdi), %zmm12
  vmovaps 576(%rdi), %zmm13
  vmovaps 640(%rdi), %zmm14
  vmovaps 704(%rdi), %zmm15
  jmp *64(%rdi)
  .cfi_endproc
  .size apgas_detail_kernel_barrier,.-apgas_detail_kernel_barrier
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
  mov x0, x1
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
