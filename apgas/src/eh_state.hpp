#pragma once
// The C++ run-time's exception-handling state of the running thread, which fibers must carry with them.
//
// The Itanium C++ ABI (2.2.2, used by GCC and Clang on x86-64 and AArch64, with libstdc++ or libc++abi) keeps, per
// OS thread, the stack of exceptions being handled (`caughtExceptions`: the innermost catch handler's exception,
// linked to the enclosing ones) and the count of exceptions thrown but not yet caught (`uncaughtExceptions`, what
// std::uncaught_exceptions() reads). A fiber that parks inside a catch handler (a `finish`, `when` or `at` there)
// and is resumed elsewhere, or after another fiber on the thread caught exceptions of its own, would otherwise end
// its handler on a stack that is not its own: `throw;` rethrows another activity's exception, and ending the handler
// frees an exception another handler still uses. So every switch between fibers saves the thread's state into the
// fiber it leaves and installs the one of the fiber it resumes (scheduler.cpp, switch_to); a new fiber starts with
// none. The threads of a clocked kernel block share their OS thread without the scheduler (kernel_cpu.cpp) and
// are held to having no handler open at a barrier instead.
#include <cstdint>

#if defined(__ARM_EABI_UNWINDER__)
#error "apgas: the exception state of a fiber (apgas/src/eh_state.hpp) assumes the Itanium C++ ABI's layout"
#endif

namespace apgas::detail {

/// The ABI's `__cxa_eh_globals` (its layout is part of the ABI; the type is opaque in <cxxabi.h>).
struct eh_state {
  void* caught = nullptr;        // caughtExceptions
  unsigned int uncaught = 0;     // uncaughtExceptions
  bool operator==(const eh_state&) const = default;
};

/// The running thread's state. Not inlined and not const (unlike the ABI's declaration): a fiber may resume on
/// another thread, so the address must be read again after every switch.
eh_state* thread_eh_state() noexcept;

}  // namespace apgas::detail
