#pragma once
// The context switch between the threads of a clocked kernel block on a CPU place (decision 0009).
//
// A block's threads never leave their OS thread and never meet the scheduler, so they need much less than a fiber of
// the scheduler: one call saves the callee-saved registers, the stack pointer and the resume address of the calling
// thread into its context and loads another's. The registers go into the context record, not onto the stack: a
// switch that pushes and pops on two different stacks at the same offsets makes the processor's memory renaming
// mispredict (measured: 13-15 ns per switch against 4 ns). Not saved: the floating-point control words (MXCSR and the
// x87 control word on x86-64, FPCR on AArch64), which the threads of one block share as they share the OS thread.

#include <cstddef>

namespace apgas::detail {

#if defined(__x86_64__)
struct kernel_context {
  void* regs[8];  // rbx rbp r12 r13 r14 r15 rsp rip
};
#elif defined(__aarch64__)
struct kernel_context {
  void* regs[22];  // x19..x28 x29 x30 sp d8..d15 (and one for alignment)
};
#else
#error "apgas: the kernel-thread switch (apgas/src/kernel_switch.cpp) is written for x86-64 and AArch64"
#endif

/// The layout of a kernel-thread record (apgas/src/kernel_cpu.cpp) that the barrier stub relies on: the context at 0;
/// where the body goes on, what the barrier returns and the body's vector width in the next cache line; the vector
/// registers it keeps (xmm6-15 in their widest form, zmm: 10 x 64 bytes) after that.
inline constexpr std::size_t kernel_record_resume_at = 64;
inline constexpr std::size_t kernel_record_result = 72;
inline constexpr std::size_t kernel_record_width = 80;
inline constexpr std::size_t kernel_record_vec = 128;
inline constexpr std::size_t kernel_vector_save_bytes = 10 * 64;

extern "C" {
/// Save the caller's registers into *from and continue where *to was saved (or starts), with the first argument
/// register holding `to` (a thread parked in the barrier stub finds its record there).
void apgas_detail_kernel_switch(kernel_context* from, const kernel_context* to) noexcept;
}

/// Make `c` start entry(arg) on the stack whose highest address is `stack_top`, when first switched to. entry must
/// never return (it ends by switching away for good).
void kernel_context_start(kernel_context& c, void* stack_top, void (*entry)(void*), void* arg) noexcept;

}  // namespace apgas::detail
