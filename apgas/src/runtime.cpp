// apgas::run: start-up, the main activity, shut-down.
#include "runtime.hpp"

#include "dist.hpp"
#include "scheduler.hpp"

#include <apgas/activity.hpp>
#include <apgas/error.hpp>
#include <apgas/runtime.hpp>

#include <atomic>
#include <cstdio>
#include <exception>
#include <memory>
#include <string>
#include <typeinfo>
#include <vector>

namespace apgas {

int num_workers() noexcept {
  detail::scheduler* s = detail::the_scheduler();
  return s != nullptr ? s->size() : 0;
}

int worker_index() noexcept {
  detail::worker* w = detail::this_worker();
  return w != nullptr ? w->index : -1;
}

namespace detail {
namespace {

std::atomic<bool> g_running{false};

void print_exception(const std::exception_ptr& e, std::size_t i, std::size_t n) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    std::fprintf(stderr, "apgas:   [%zu/%zu] %s: %s\n", i + 1, n, typeid(x).name(), x.what());
  } catch (...) {
    std::fprintf(stderr, "apgas:   [%zu/%zu] an exception not derived from std::exception\n", i + 1, n);
  }
}

}  // namespace

int run(const config& cfg, function_ref<void()> main) {
  try {
    cfg.validate();
  } catch (const config_error& e) {
    std::fprintf(stderr, "apgas: %s\n", e.what());
    return 2;
  }
  bool expected = false;
  if (!g_running.compare_exchange_strong(expected, true)) {
    throw illegal_operation_exception("apgas::run: a run is already in progress (runs may not nest or overlap)");
  }
  struct running_flag {
    ~running_flag() { g_running.store(false); }
  } flag;

  transport::transport* tp = nullptr;
  try {
    tp = &transport_for_run();
  } catch (const config_error& e) {
    std::fprintf(stderr, "apgas: %s\n", e.what());
    return 2;
  } catch (const error& e) {
    std::fprintf(stderr, "apgas: start-up failed: %s\n", e.what());
    return 2;
  }
  place_tree t;
  t.num_hosts = tp->size();
  t.here_host = tp->rank();
  for (int i = 0; i < t.num_hosts; ++i) t.all.push_back(place(i));
  t.children.resize(static_cast<std::size_t>(t.num_hosts));
  set_tree(std::move(t));
  auto sched = std::make_unique<scheduler>(cfg);
  set_scheduler(sched.get());
  tp->barrier();  // every place is ready to receive before place 0 sends anything
  dist_start(*tp);

  // The main activity (place 0): runs `main` inside the implicit finish; its outcome is handed to this
  // (non-worker) thread. The other places serve until place 0 tells them the run is over.
  std::atomic<bool> done{false};
  std::exception_ptr failure;
  sched->start();
  int code = 0;
  if (tp->rank() == 0) {
    task* root = make_task([&] {
      try {
        run_finish(main);
      } catch (...) {
        failure = std::current_exception();
      }
      done.store(true, std::memory_order_release);
      done.notify_one();
    });
    sched->submit(as_item(root));
    done.wait(false, std::memory_order_acquire);
    code = failure ? 1 : 0;
    dist_shutdown_others(code);
  } else {
    code = dist_wait_shutdown();
  }
  dist_stop();
  sched.reset();  // stop and join the workers
  set_scheduler(nullptr);
  dist_finalize(*tp);
  set_tree(place_tree::single_host());

  if (!failure) return code;
  try {
    std::rethrow_exception(failure);
  } catch (const multiple_exceptions& m) {
    const auto& es = m.exceptions();
    std::fprintf(stderr, "apgas: the main activity ended with %zu uncaught exception%s:\n", es.size(),
                 es.size() == 1 ? "" : "s");
    for (std::size_t i = 0; i < es.size(); ++i) print_exception(es[i], i, es.size());
  } catch (...) {
    std::fprintf(stderr, "apgas: the main activity ended with an uncaught exception:\n");
    print_exception(failure, 0, 1);
  }
  return 1;
}

int run_from_env(int argc, char** argv, function_ref<void()> main) {
  (void)argc;
  (void)argv;
  config cfg;
  try {
    cfg = config::from_env();
  } catch (const config_error& e) {
    std::fprintf(stderr, "apgas: %s\n", e.what());
    return 2;
  }
  return run(cfg, main);
}

}  // namespace detail
}  // namespace apgas
