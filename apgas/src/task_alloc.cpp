// Task allocation. Tasks are small (a vtable, five words of runtime state and the closure) and short-lived, and a
// task is often freed by another worker than the one that made it. Each thread keeps a free list per size class
// (64-byte steps up to 256 bytes) and takes blocks from it first; a block freed on a thread joins that thread's
// list, up to a cap, beyond which it goes back to the global heap. Under ASan the cache is bypassed so that
// use-after-free of a task is still caught.
#include <apgas/detail/task.hpp>

#include <cstddef>
#include <new>
#include <utility>

namespace apgas::detail {
namespace {

#if !defined(APGAS_DETAIL_ASAN)
constexpr std::size_t step = 64;
constexpr std::size_t classes = 4;
constexpr std::size_t max_cached = 4096;

struct free_block {
  free_block* next;
};

// Trivial, so that reaching it is one thread-local access with no initialisation guard (in the shared library the
// guard check was a second dependent load on every spawn). Its blocks go back to the heap at thread exit through
// t_cache_owner, which the first block cached on a thread brings to life. operator new and delete read it directly,
// not through a noipa accessor as the scheduler's state is read: nothing in them can switch fibers, so the thread
// cannot change under them.
struct task_cache {
  free_block* heads[classes];
  std::size_t counts[classes];
  bool owned;
};

constinit thread_local task_cache t_cache{};

struct cache_owner {
  ~cache_owner() {
    for (auto& head : t_cache.heads) {
      while (head != nullptr) ::operator delete(std::exchange(head, head->next));
    }
    t_cache = task_cache{};
  }
};
thread_local cache_owner t_cache_owner;
#endif

}  // namespace

void* task::operator new(std::size_t size) {
#if !defined(APGAS_DETAIL_ASAN)
  const std::size_t c = (size - 1) / step;
  if (c < classes) {
    task_cache& tc = t_cache;
    if (free_block* b = tc.heads[c]) {
      tc.heads[c] = b->next;
      tc.counts[c] -= 1;
      return b;
    }
    return ::operator new((c + 1) * step);
  }
#endif
  return ::operator new(size);
}

void task::operator delete(void* p, std::size_t size) noexcept {
#if !defined(APGAS_DETAIL_ASAN)
  const std::size_t c = (size - 1) / step;
  if (c < classes) {
    task_cache& tc = t_cache;
    if (tc.counts[c] < max_cached) {
      if (!tc.owned) {
        tc.owned = true;
        (void)&t_cache_owner;  // odr-use: constructs it on this thread, so that it empties the cache at thread exit
      }
      tc.heads[c] = ::new (p) free_block{tc.heads[c]};
      tc.counts[c] += 1;
      return;
    }
    ::operator delete(p);
    return;
  }
#endif
#if defined(__cpp_sized_deallocation)
  ::operator delete(p, size);
#else
  ::operator delete(p);  // (Clang before 17 declares the sized form only with -fsized-deallocation)
#endif
}

}  // namespace apgas::detail
