// Kernel closures on CPU places.
//
// Blocks are activities (one task per block, governed like an async of the sender). The threads of a plain block
// run as a loop inside the block's activity. The threads of a clocked block run as *kernel-thread fibers* driven
// round-robin by the block's activity: the driver resumes thread 0, 1, ..., n-1 in turn; each runs until its next
// advance() (or its end) and switches back. One round of the driver is one phase of the block's barrier, so no
// thread passes advance() before every live thread of the block has reached it — __syncthreads() semantics. A
// thread that ends leaves the barrier (on a GPU, a barrier not reached by all threads is undefined behaviour).
//
// Invariants: a block's driver never parks while its threads are suspended (kernel bodies may not block: every
// blocking apgas operation throws illegal_operation_exception inside a kernel), so the whole block runs on one OS
// thread and the kernel-thread fibers can live in a pool of that thread. Kernel-thread fibers are reused: each runs
// a loop "take an assignment, run it, report, switch back".
#include "runtime.hpp"
#include "scheduler.hpp"
#include "stack.hpp"

#include <apgas/activity.hpp>
#include <apgas/error.hpp>
#include <apgas/kernel.hpp>

#include <boost/context/fiber.hpp>

#include <exception>
#include <memory>
#include <string>
#include <vector>

namespace apgas::detail {
namespace {

constexpr int max_cpu_threads_per_block = 1024;  // the CUDA limit: a kernel that runs on a GPU runs here too

struct kthread {
  boost::context::fiber cont;     // this fiber, while suspended
  boost::context::fiber driver;   // the driver, while this fiber runs
  san::fiber_marks marks;
  san::fiber_marks* driver_marks = nullptr;
  void (*fn)(void*, int, void*) = nullptr;
  void* ctx = nullptr;
  int t = 0;
  bool finished = false;
  bool quit = false;
  std::exception_ptr error;

  // Called on this fiber: hand control back to the driver.
  void to_driver() {
    san::before_switch(marks, *driver_marks);
    driver = std::move(driver).resume();
    san::after_switch(marks, nullptr);
  }
};

boost::context::fiber kthread_main(kthread* k, boost::context::fiber&& driver) {
  k->driver = std::move(driver);
  san::after_switch(k->marks, nullptr);
  while (!k->quit) {
    try {
      k->fn(k->ctx, k->t, k);
    } catch (const boost::context::detail::forced_unwind&) {
      throw;
    } catch (...) {
      k->error = std::current_exception();
    }
    k->finished = true;
    k->to_driver();
  }
  san::before_switch(k->marks, *k->driver_marks, /*leaving_for_good=*/true);
  return std::move(k->driver);
}

// The kernel-thread fibers of one OS thread.
struct kthread_pool {
  std::vector<std::unique_ptr<kthread>> threads;
  san::fiber_marks thread_marks;  // used only at thread exit

  kthread& get(int i, std::size_t stack_size, san::fiber_marks& current) {
    while (static_cast<int>(threads.size()) <= i) {
      auto k = std::make_unique<kthread>();
      kthread* raw = k.get();
      san::create_fiber(raw->marks);
      san::tsan_enter(raw->marks);
      struct marking {
        guarded_stack_allocator inner;
        kthread* k;
        boost::context::stack_context allocate() {
          auto sc = inner.allocate();
          k->marks.stack_bottom = static_cast<char*>(sc.sp) - sc.size;
          k->marks.stack_size = sc.size;
          return sc;
        }
        void deallocate(boost::context::stack_context& sc) noexcept { inner.deallocate(sc); }
      };
      try {
        raw->cont = boost::context::fiber(std::allocator_arg, marking{guarded_stack_allocator(stack_size), raw},
                                          [raw](boost::context::fiber&& d) { return kthread_main(raw, std::move(d)); });
      } catch (...) {
        san::tsan_enter(current);
        san::destroy_fiber(raw->marks);
        throw;
      }
      san::tsan_enter(current);
      threads.push_back(std::move(k));
    }
    return *threads[static_cast<std::size_t>(i)];
  }

  static void resume(kthread& k, san::fiber_marks& from) {
    k.driver_marks = &from;
    san::before_switch(from, k.marks);
    k.cont = std::move(k.cont).resume();
    san::after_switch(from, nullptr);
  }

  ~kthread_pool() {
    // At thread exit: let every fiber leave its loop and end (Boost frees its stack).
    san::adopt_thread(thread_marks);
    for (auto& k : threads) {
      if (!k->cont) continue;  // never started
      k->quit = true;
      resume(*k, thread_marks);
      san::destroy_fiber(k->marks);
    }
  }
};

thread_local kthread_pool t_pool;
[[gnu::noipa]] kthread_pool& pool() noexcept { return t_pool; }

struct block_task final : task {
  block_task(std::shared_ptr<void> k, void (*f)(void*, int), int blk) : keep(std::move(k)), fn(f), b(blk) {}
  void invoke() override {
    in_kernel = true;
    fn(keep.get(), b);
  }
  std::shared_ptr<void> keep;
  void (*fn)(void*, int);
  int b;
};

}  // namespace

void cpu_block_advance(void* block) { static_cast<kthread*>(block)->to_driver(); }

grid cpu_grid(const grid* explicit_shape) {
  if (explicit_shape == nullptr) return grid{std::max(1, num_workers()), 1};
  const grid g = *explicit_shape;
  if (g.blocks < 1) {
    throw kernel_launch_error(1 /* CUDA_ERROR_INVALID_VALUE, as on a GPU */, "apgas::cuda_kernel: grid of " + std::to_string(g.blocks) +
                                     " blocks: a launch needs at least 1 block");
  }
  if (g.threads < 1 || g.threads > max_cpu_threads_per_block) {
    throw kernel_launch_error(1 /* CUDA_ERROR_INVALID_VALUE, as on a GPU */, "apgas::cuda_kernel: " + std::to_string(g.threads) +
                                     " threads per block: expected 1 to " +
                                     std::to_string(max_cpu_threads_per_block));
  }
  return g;
}

void run_clocked_block_cpu(int threads, void (*thread_fn)(void*, int, void*), void* ctx) {
  worker* w = this_worker();
  san::fiber_marks& here_marks = w->running->marks;
  kthread_pool& p = pool();
  const std::size_t stack = the_scheduler()->stack_size();
  for (int i = 0; i < threads; ++i) {
    kthread& k = p.get(i, stack, here_marks);
    k.fn = thread_fn;
    k.ctx = ctx;
    k.t = i;
    k.finished = false;
    k.error = nullptr;
  }
  int live = threads;
  std::exception_ptr first_error;
  while (live > 0) {  // one round = one phase of the block barrier
    for (int i = 0; i < threads; ++i) {
      kthread& k = *p.threads[static_cast<std::size_t>(i)];
      if (k.finished) continue;
      kthread_pool::resume(k, here_marks);
      if (k.finished) {
        --live;
        if (k.error && !first_error) first_error = k.error;
      }
    }
  }
  if (first_error) std::rethrow_exception(first_error);
}

void spawn_blocks_cpu(int blocks, std::shared_ptr<void> keep, void (*block_fn)(void*, int)) {
  for (int b = 0; b < blocks; ++b) spawn(new block_task(keep, block_fn, b));
}

void check_kernel_place(place p) {
  (void)place_of(p.id());
  require_unrestricted_activity("apgas::async_at/at (kernel)");
}

void check_routed_kernel_place(place p) {
  const int here = tree().here_host;
  if (p.id() < 0 || p.id() >= static_cast<int>(tree().all.size()) || p.parent().id() != here) {
    throw serialization_error("apgas: malformed message: a kernel routed to host " + std::to_string(here) +
                              " names place " + std::to_string(p.id()) + ", which is neither it nor one of its GPUs");
  }
}

void kernel_not_compiled_by_nvcc(place p) {
  throw illegal_operation_exception("apgas: a kernel closure sent to GPU place " + std::to_string(p.id()) +
                                    " from a file not compiled by nvcc: compile the file that launches it as CUDA "
                                    "(apgas_add_cuda_sources() in CMake)");
}

void kernel_body_not_rebuildable(place p) {
  throw illegal_operation_exception(
      "apgas: a kernel closure sent to host place " + std::to_string(p.id()) +
      " from another host: its body is an nvcc __host__ __device__ lambda, which cannot be rebuilt from bytes for a "
      "CPU place (on GPU places it can); launch it from an activity at that host, e.g. at(p, [=] { "
      "async_at(here(), kernel); })");
}

}  // namespace apgas::detail
