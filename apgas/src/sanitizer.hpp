#pragma once
// Sanitizer annotations for fiber switches. ASan must be told the bounds of the stack being switched to (or it
// reports false stack-buffer errors on exceptions and fake-stack frames); TSan must be told which fiber runs, or it
// merges the histories of every fiber of a thread. Both are no-ops in ordinary builds.
// APGAS_DETAIL_ASAN / APGAS_DETAIL_TSAN are defined by the build (APGAS_SANITIZE).

#include <cstddef>

#if defined(APGAS_DETAIL_ASAN)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif
#if defined(APGAS_DETAIL_TSAN)
#include <sanitizer/tsan_interface.h>
#endif

namespace apgas::detail::san {

struct fiber_marks {
  void* asan_fake_stack = nullptr;    // ASan's fake-stack of this fiber while it is suspended
  const void* stack_bottom = nullptr; // lowest usable address (for ASan); null for an OS thread until learnt
  std::size_t stack_size = 0;
  void* tsan_fiber = nullptr;         // TSan's fiber object
};

/// Call on the stack being left, right before the switch. `leaving_for_good`: the fiber will never run again.
inline void before_switch(fiber_marks& from, const fiber_marks& to, bool leaving_for_good = false) {
#if defined(APGAS_DETAIL_ASAN)
  __sanitizer_start_switch_fiber(leaving_for_good ? nullptr : &from.asan_fake_stack, to.stack_bottom, to.stack_size);
#else
  (void)from;
  (void)leaving_for_good;
#endif
#if defined(APGAS_DETAIL_TSAN)
  __tsan_switch_to_fiber(to.tsan_fiber, 0);
#else
  (void)to;
#endif
}

/// Call first thing on the stack just entered. `from` learns its stack bounds if it is an OS thread's stack.
inline void after_switch(fiber_marks& now, fiber_marks* from) {
#if defined(APGAS_DETAIL_ASAN)
  const void* old_bottom = nullptr;
  std::size_t old_size = 0;
  __sanitizer_finish_switch_fiber(now.asan_fake_stack, &old_bottom, &old_size);
  if (from != nullptr && from->stack_bottom == nullptr) {
    from->stack_bottom = old_bottom;
    from->stack_size = old_size;
  }
#else
  (void)now;
  (void)from;
#endif
}

inline void create_fiber(fiber_marks& m) {
#if defined(APGAS_DETAIL_TSAN)
  m.tsan_fiber = __tsan_create_fiber(0);
#else
  (void)m;
#endif
}
inline void adopt_thread(fiber_marks& m) {
#if defined(APGAS_DETAIL_TSAN)
  m.tsan_fiber = __tsan_get_current_fiber();
#else
  (void)m;
#endif
}
inline void destroy_fiber(fiber_marks& m) {
#if defined(APGAS_DETAIL_TSAN)
  if (m.tsan_fiber != nullptr) __tsan_destroy_fiber(m.tsan_fiber);
  m.tsan_fiber = nullptr;
#else
  (void)m;
#endif
}
/// TSan: run code as `target` (used around Boost's creation jump, which briefly enters the new stack).
inline void tsan_enter(const fiber_marks& target) {
#if defined(APGAS_DETAIL_TSAN)
  __tsan_switch_to_fiber(target.tsan_fiber, 0);
#else
  (void)target;
#endif
}

}  // namespace apgas::detail::san
