#pragma once
// Fiber stacks: mmap'd, with a PROT_NONE guard page below the usable area. Every live stack is registered so that
// the SIGSEGV handler can tell a guard-page hit (an activity overflowed its stack: reported, then the process
// dies) from any other fault (passed on to the previous handler).

#include <boost/context/stack_context.hpp>

#include <cstddef>

namespace apgas::detail {

class guarded_stack_allocator {
 public:
  explicit guarded_stack_allocator(std::size_t usable_bytes) noexcept : size_(usable_bytes) {}
  boost::context::stack_context allocate();                 // throws std::bad_alloc
  void deallocate(boost::context::stack_context& sc) noexcept;

 private:
  std::size_t size_;
};

/// Install the process-wide SIGSEGV handler (idempotent, thread-safe).
void install_overflow_handler();
/// Give the calling thread an alternate signal stack (the handler must not run on the overflowed stack).
void enter_signal_stack();
void leave_signal_stack();
/// The process's memory mappings now (lines of /proc/self/maps) and their limit (/proc/sys/vm/max_map_count); 0
/// where unknown. Each guarded stack takes two mappings: this, not memory, is what usually limits the fibers.
void count_memory_mappings(long& maps, long& max_maps) noexcept;

}  // namespace apgas::detail
