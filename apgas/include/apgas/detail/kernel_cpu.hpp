#pragma once
#pragma GCC visibility push(default)  // libapgas exports what its public headers declare (docs/building.md)
// Kernel closures on CPU places: the templates that run a block (included by apgas/kernel.hpp; not API). The
// non-template half — the clocked threads, the per-block state, the checking mode — is apgas/src/kernel_cpu.cpp.
//
// A launch is split into tasks over ranges of blocks (halved until one block each, as work is stolen); a task reuses
// its per-block storage from one block to the next. Each block's exception goes to the governing finish on its own,
// so one failed block does not stop the others. Included by apgas/kernel.hpp after the types it uses.

#include <cstddef>
#include <exception>
#include <memory>
#include <new>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

namespace apgas::detail {

/// What the CPU runtime needs to know about a launch (no template parameter in it).
struct cpu_launch_info {
  grid g;                       ///< the validated shape
  body_kind kind = body_kind::plain;
  int max_threads = 0;          ///< launch bounds, 0 = none
  std::size_t shared_bytes = 0; ///< shared memory per block (for the checking mode's GPU limit)
  std::size_t constant_bytes = 0; ///< constant memory of the launch, laid out as a GPU launch lays it out (likewise)
  bool checking = false;
  const char* kernel = "";      ///< the body's type name, for reports
};

/// Validate and complete `info` for the caller's host place: the explicit grid (or auto_grid's CPU shape), and, in
/// checking mode, a GPU's limits. Throws kernel_launch_error naming the value and the limit.
void cpu_prepare(cpu_launch_info& info, const grid* explicit_shape);

/// The calling worker's block state, reset for block `b` of a launch (blocks on a worker never overlap: a body
/// cannot block). Returned as the opaque pointer the handles carry.
void* cpu_block_begin(const cpu_launch_info& info, long b);
/// The block has ended: in checking mode, throws kernel_check_error for what was found.
void cpu_block_end(void* block);
/// In checking mode, the checker for shared array number `index` of the current block; null otherwise.
shared_check* cpu_shared_checker(void* block, int index, void* base, std::size_t n, std::size_t elem_bytes);
/// Run `threads` clocked threads of the current block; thread_fn(ctx, t, self) runs thread t, `self` being what its
/// clocked_thread handle carries.
void cpu_run_clocked(void* block, int threads, void (*thread_fn)(void* ctx, int t, void* self), void* ctx);
/// Plain bodies in checking mode: the thread the next shared accesses belong to.
void cpu_block_set_thread(void* block, int t) noexcept;
/// Spawn tasks that run blocks [0, blocks), governed like an async of the caller; `keep` is released when the last
/// has ended. run(ctx, lo, hi) runs blocks lo..hi-1 and returns; spawn_blocks_cpu splits ranges itself.
void spawn_blocks_cpu(long blocks, std::shared_ptr<void> keep, void (*run)(void* ctx, long lo, long hi));
/// Record a block's exception in the governing finish of the calling task.
void cpu_block_failed(std::exception_ptr e) noexcept;

/// The block index of linear block b (x fastest).
inline dim3 unflatten(long b, dim3 g) noexcept {
  const long xy = static_cast<long>(g.x) * g.y;
  return dim3(static_cast<int>(b % g.x), static_cast<int>((b / g.x) % g.y), static_cast<int>(b / xy));
}

/// Aligned raw storage for n elements of a trivially copyable T (64-byte aligned, or T's alignment where larger:
/// vector loads stay within lines; shared_span relies on it).
template <class T>
class block_buffer {
  static constexpr std::align_val_t align{alignof(T) > 64 ? alignof(T) : 64};

 public:
  explicit block_buffer(std::size_t n) : p_(allocate(n)), n_(n) {}
  ~block_buffer() { ::operator delete(p_, align); }
  block_buffer(const block_buffer&) = delete;
  block_buffer& operator=(const block_buffer&) = delete;
  T* data() const noexcept { return p_; }
  std::size_t size() const noexcept { return n_; }

 private:
  static T* allocate(std::size_t n) {
    // (a size that overflows was refused before: shared_bytes)
    if (n > static_cast<std::size_t>(-1) / sizeof(T)) throw std::bad_array_new_length();
    return static_cast<T*>(::operator new(std::max<std::size_t>(n, 1) * sizeof(T), align));
  }
  T* p_;
  std::size_t n_;
};

/// The checking mode's watch over a shared array, where this translation unit's shared_span can use one.
inline shared_check* shared_checker(void* block, int index, void* base, std::size_t n, std::size_t elem_bytes) {
  if constexpr (APGAS_KERNEL_CHECKS != 0) {
    return cpu_shared_checker(block, index, base, n, elem_bytes);
  } else {
    (void)block, (void)index, (void)base, (void)n, (void)elem_bytes;
    return nullptr;
  }
}

template <class R>
struct block_storage;  // what one task holds for resource R, refilled for each block
template <class T, std::size_t N, bool Fill>
struct block_storage<shared_array<T, N, Fill>> {
  block_buffer<T> buf;
  explicit block_storage(const shared_array<T, N, Fill>& r) : buf(r.n) {}
  void begin_block(const shared_array<T, N, Fill>& r) {
    if constexpr (Fill) {
      for (std::size_t i = 0; i < r.n; ++i) buf.data()[i] = r.value;
    }
  }
  shared_span<T, N> param(const shared_array<T, N, Fill>&, void* block, int index) {
    return {whole_shared_array_t{}, buf.data(), buf.size(),
            shared_checker(block, index, buf.data(), buf.size(), sizeof(T))};
  }
};
template <class T>
struct block_storage<shared_copy<T>> {
  block_buffer<T> buf;
  explicit block_storage(const shared_copy<T>& r) : buf(r.data->size()) {}
  void begin_block(const shared_copy<T>& r) {
    if (!r.data->empty()) std::memcpy(buf.data(), r.data->data(), r.data->size() * sizeof(T));
  }
  shared_span<T> param(const shared_copy<T>&, void* block, int index) {
    return {whole_shared_array_t{}, buf.data(), buf.size(),
            shared_checker(block, index, buf.data(), buf.size(), sizeof(T))};
  }
};
template <class T>
struct block_storage<constant_copy<T>> {
  explicit block_storage(const constant_copy<T>&) {}
  void begin_block(const constant_copy<T>&) {}
  std::span<const T> param(const constant_copy<T>& r, void*, int) { return *r.data; }
};
template <class T>
struct block_storage<global_copy<T>> {
  explicit block_storage(const global_copy<T>&) {}
  void begin_block(const global_copy<T>&) {}
  // One writable buffer for the whole launch, as on a GPU: the launch record's own copy (own_buffer below).
  std::span<T> param(const global_copy<T>& r, void*, int) {
    return std::span<T>(const_cast<T*>(r.data->data()), r.data->size());
  }
};

/// A launch's global_from buffer is its own, filled from the host data, as a GPU launch uploads a fresh one: the
/// body writes into it, so two launches of one kernel closure (in turn or at once) must not share it.
template <class R>
void own_buffer(R&) {}
template <class T>
void own_buffer(global_copy<T>& r) {
  r.data = std::make_shared<std::vector<T>>(*r.data);
}

/// `total` bytes of shared memory per block, and n elements of `elem` bytes more from the next multiple of `align`:
/// the new total, refused (kernel_launch_error) where it does not fit in a size_t (it would wrap around to a small
/// size, and the launch run over its buffers). CPU launches (the checking mode's count) and GPU launches (cuda_place's
/// launch_layout) both count with it, with the GPU's alignments.
inline std::size_t add_shared(std::size_t total, std::size_t n, std::size_t elem, std::size_t align = 1) {
  std::size_t bytes = 0, at = 0, sum = 0;
  if (__builtin_mul_overflow(n, elem, &bytes) || __builtin_add_overflow(total, (align - total % align) % align, &at) ||
      __builtin_add_overflow(at, bytes, &sum)) {
    throw kernel_launch_error(1 /* CUDA_ERROR_INVALID_VALUE, as on a GPU */,
                              "apgas::cuda_kernel: a shared array of " + std::to_string(n) + " elements of " +
                                  std::to_string(elem) + " bytes" +
                                  (total == 0 ? std::string()
                                              : " after " + std::to_string(total) + " bytes of others") +
                                  ": the shared memory per block overflows a size_t");
  }
  return sum;
}
/// Where a GPU launch puts a shared array of T in the dynamic shared memory: at a multiple of this
/// (cuda_place/include/apgas/cuda/kernel.cuh lays them out so).
template <class T>
inline constexpr std::size_t gpu_shared_align = alignof(T) > 16 ? alignof(T) : 16;
/// Shared memory one block of a launch uses on a GPU, with resource r (what the checking mode holds against a GPU's
/// limit: the arrays as a GPU lays them out, each at its alignment).
template <class T, std::size_t N, bool Fill>
std::size_t shared_bytes(std::size_t total, const shared_array<T, N, Fill>& r) {
  return add_shared(total, r.n, sizeof(T), gpu_shared_align<T>);
}
template <class T>
std::size_t shared_bytes(std::size_t total, const shared_copy<T>& r) {
  return add_shared(total, r.data->size(), sizeof(T), gpu_shared_align<T>);
}
template <class R>
std::size_t shared_bytes(std::size_t total, const R&) noexcept {
  return total;
}
/// Constant memory of a launch, with resource r: each constant_from at the next 16-byte boundary, as the GPU launch
/// lays them out in its constant buffer (cuda_place/include/apgas/cuda/kernel.cuh).
template <class T>
std::size_t constant_bytes(std::size_t total, const constant_copy<T>& r) noexcept {
  return (total + 15) / 16 * 16 + r.data->size() * sizeof(T);
}
template <class R>
std::size_t constant_bytes(std::size_t total, const R&) noexcept {
  return total;
}

template <class K>
struct cpu_launch {
  K k;
  cpu_launch_info info;

  using resources_t = decltype(K::resources);
  static constexpr std::size_t nres = std::tuple_size_v<resources_t>;

  template <std::size_t... I>
  void run_range(long lo, long hi, std::index_sequence<I...>) {
    using storage_t = std::tuple<block_storage<std::tuple_element_t<I, resources_t>>...>;
    storage_t st(std::get<I>(k.resources)...);
    for (long b = lo; b < hi; ++b) {
      try {
        void* blk = cpu_block_begin(info, b);
        (std::get<I>(st).begin_block(std::get<I>(k.resources)), ...);
        run_block(blk, b, st, std::index_sequence<I...>{});
        cpu_block_end(blk);
      } catch (...) {
        cpu_block_failed(std::current_exception());
      }
    }
  }

  // Not inlined into run_range: the body then has the registers to itself (inlined, GCC kept the block-level SGEMM's
  // inner loop bound on the stack, a load per iteration; decision 0017). One call per block.
  template <class Storage, std::size_t... I>
  [[gnu::noinline]] void run_block(void* blk, long b, Storage& st, std::index_sequence<I...>) {
    const grid g = info.g;
    const dim3 bid = unflatten(b, g.blocks);
    if constexpr (K::kind == body_kind::clocked) {
      struct ctx_t {
        cpu_launch* self;
        dim3 bid;
        void* blk;
        Storage* st;
      } ctx{this, bid, blk, &st};
      cpu_run_clocked(
          blk, static_cast<int>(g.threads.count()),
          [](void* c, int t, void* me) {
            auto& x = *static_cast<ctx_t*>(c);
            const dim3 bd = x.self->info.g.threads;
            const dim3 tid(t % bd.x, (t / bd.x) % bd.y, t / (bd.x * bd.y));
            x.self->k.body(clocked_thread(tid, x.bid, bd, x.self->info.g.blocks, me),
                           std::get<I>(*x.st).param(std::get<I>(x.self->k.resources), x.blk, static_cast<int>(I))...);
          },
          &ctx);
    } else if constexpr (K::kind == body_kind::block) {
      k.body(thread_block(bid, g.threads, g.blocks, blk),
             std::get<I>(st).param(std::get<I>(k.resources), blk, static_cast<int>(I))...);
    } else {
      const bool checking = info.checking;
      int t = 0;
      for (int z = 0; z < g.threads.z; ++z) {
        for (int y = 0; y < g.threads.y; ++y) {
          for (int x = 0; x < g.threads.x; ++x, ++t) {
            if (checking) cpu_block_set_thread(blk, t);
            k.body(thread_handle(dim3(x, y, z), bid, g.threads, g.blocks),
                   std::get<I>(st).param(std::get<I>(k.resources), blk, static_cast<int>(I))...);
          }
        }
      }
    }
  }
};

/// Validate kernel `k` for the caller's host place and copy what it needs (throws kernel_launch_error).
template <class K>
std::shared_ptr<cpu_launch<K>> prepare_kernel_cpu(const K& k) {
  using traits = shape_traits<decltype(k.shape)>;
  cpu_launch_info info;
  info.kind = K::kind;
  info.max_threads = traits::max_threads;
  info.kernel = type_name<decltype(k.body)>();
  std::apply(
      [&](const auto&... r) {
        ((info.shared_bytes = shared_bytes(info.shared_bytes, r),
          info.constant_bytes = constant_bytes(info.constant_bytes, r)),
         ...);
      },
      k.resources);
  cpu_prepare(info, traits::explicit_grid(k.shape));
  auto launch = std::make_shared<cpu_launch<K>>(cpu_launch<K>{k, info});
  std::apply([](auto&... r) { (own_buffer(r), ...); }, launch->k.resources);
  return launch;
}

/// Start a prepared launch: tasks over the blocks, governed by the caller's innermost finish.
template <class K>
void start_kernel_cpu(std::shared_ptr<cpu_launch<K>> launch) {
  const long blocks = launch->info.g.blocks.count();
  spawn_blocks_cpu(blocks, std::move(launch), [](void* c, long lo, long hi) {
    auto* l = static_cast<cpu_launch<K>*>(c);
    l->run_range(lo, hi, std::make_index_sequence<cpu_launch<K>::nres>{});
  });
}

}  // namespace apgas::detail
#pragma GCC visibility pop
