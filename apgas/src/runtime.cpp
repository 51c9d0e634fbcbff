// apgas::run: start-up, the main activity, shut-down.
#include "runtime.hpp"

#include "dist.hpp"
#include "finish.hpp"
#include "gpu_runtime.hpp"
#include "obs.hpp"
#include "scheduler.hpp"
#include "type_name.hpp"

#include <apgas/detail/gpu.hpp>

#include <apgas/activity.hpp>
#include <apgas/error.hpp>
#include <apgas/global.hpp>
#include <apgas/runtime.hpp>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <span>
#include <string>
#include <system_error>
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
std::atomic<std::uint32_t> g_run{0};  // this process's run number (runs of the process counted from 1)

// This machine's name, or "(unknown)".
std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) std::snprintf(name, sizeof name, "(unknown)");
  return name;
}

// Every host's GPU count and descriptions, exchanged with the transport's start-up collectives; false if the GPU
// set-up failed at some host (acc == nullptr there), with those hosts' place numbers in `failed`.
bool build_tree(transport::transport& tp, accelerator* acc, place_tree& t, std::vector<int>& failed) {
  const int hosts = tp.size();
  const int me = tp.rank();
  std::string mine = "host " + host_name();  // this host's descriptions, '\n'-separated: host, then GPUs
  const int count = acc != nullptr ? acc->count() : 0;
  if (acc != nullptr && count == 0) mine += " (no GPU places: " + acc->describe(-1) + ")";
  for (int g = 0; g < count; ++g) mine += "\n" + acc->describe(g);
  struct head {
    std::int32_t ok, count;
    std::uint64_t bytes;
  } h{acc != nullptr ? 1 : 0, count, mine.size()};
  const std::vector<std::byte> heads = tp.allgather(std::as_bytes(std::span(&h, 1)));
  std::vector<head> all(static_cast<std::size_t>(hosts));
  std::memcpy(all.data(), heads.data(), heads.size());
  std::size_t width = 0;
  bool ok = true;
  for (std::size_t i = 0; i < all.size(); ++i) {
    if (all[i].ok == 0) failed.push_back(static_cast<int>(i));
    ok = ok && all[i].ok != 0;
    width = std::max<std::size_t>(width, all[i].bytes);
  }
  if (!ok) return false;
  mine.resize(width, '\0');
  const std::vector<std::byte> texts = tp.allgather(std::as_bytes(std::span(mine.data(), width)));

  t.num_hosts = hosts;
  t.here_host = me;
  t.children.resize(static_cast<std::size_t>(hosts));
  std::vector<std::vector<std::string>> lines(static_cast<std::size_t>(hosts));
  for (int p = 0; p < hosts; ++p) {
    std::string text(reinterpret_cast<const char*>(texts.data()) + static_cast<std::size_t>(p) * width,
                     all[static_cast<std::size_t>(p)].bytes);
    std::size_t start = 0;
    while (true) {
      const std::size_t nl = text.find('\n', start);
      lines[static_cast<std::size_t>(p)].push_back(text.substr(start, nl == std::string::npos ? nl : nl - start));
      if (nl == std::string::npos) break;
      start = nl + 1;
    }
    t.all.push_back(place(p));
    t.description.push_back(lines[static_cast<std::size_t>(p)][0]);
  }
  int id = hosts;
  for (int p = 0; p < hosts; ++p) {
    if (p == me) t.gpus_before_here = id - hosts;
    for (int g = 0; g < all[static_cast<std::size_t>(p)].count; ++g, ++id) {
      t.all.push_back(place(id));
      t.children[static_cast<std::size_t>(p)].push_back(place(id));
      t.parent_of.push_back(p);
      const auto& l = lines[static_cast<std::size_t>(p)];
      t.description.push_back(static_cast<std::size_t>(g) + 1 < l.size() ? l[static_cast<std::size_t>(g) + 1] : "GPU");
    }
  }
  return true;
}

// The run's first exchange: whether every place's configuration is valid (if not, every place stops: false, the
// invalid place having said why), and place 0's failure-detector timeout, which every place takes (with a value of
// its own each, a place sending heartbeats every fifth of 30 s was declared dead by one waiting 2 s for them, and one
// with the detector off never noticed the others had stopped).
bool agree_on_settings(transport::transport& tp, bool valid, int& heartbeat_s) {
  struct settings {
    std::int32_t valid, heartbeat_s;
  };
  const settings mine{valid ? 1 : 0, heartbeat_s};
  const std::vector<std::byte> bytes = tp.allgather(std::as_bytes(std::span(&mine, 1)));
  std::vector<settings> all(static_cast<std::size_t>(tp.size()));
  std::memcpy(all.data(), bytes.data(), bytes.size());
  for (int p = 0; p < tp.size(); ++p) {
    if (all[static_cast<std::size_t>(p)].valid != 0 || !valid) continue;
    std::fprintf(stderr, "apgas: start-up stopped at place %d: the configuration of place %d is invalid (it says why)\n",
                 tp.rank(), p);
    return false;
  }
  heartbeat_s = all[0].heartbeat_s;
  return valid;
}

void print_exception(const std::exception_ptr& e, std::size_t i, std::size_t n) {
  std::fprintf(stderr, "apgas:   [%zu/%zu] %s\n", i + 1, n, exception_text(e).c_str());
}

}  // namespace

std::uint32_t run_number() noexcept { return g_run.load(std::memory_order_relaxed); }

void end_process(int code, int dead_peer) noexcept {
  // What this place printed and had not flushed yet (a survivor's output is often the part that matters) goes out
  // first, unless another thread holds stdout's lock (it may be stuck writing to a full pipe: no waiting for it).
  // std::cout writes through stdout unless the program unsynced it (std::ios::sync_with_stdio(false)).
  if (ftrylockfile(stdout) == 0) {
    fflush_unlocked(stdout);
    funlockfile(stdout);
  }
  transport::before_abrupt_exit(dead_peer);
  std::_Exit(code);
}

namespace {
// A run; `valid` false: the configuration was refused (the reason printed), and the run only takes part in its first
// exchange (agree_on_settings, with the default connect timeout) so that the other places stop at once too instead
// of waiting for this one until their deadline; then 2.
int run_places(const config& cfg, bool valid, function_ref<void()> main) {
  bool expected = false;  // (first: a nested run is misuse whatever its configuration)
  if (!g_running.compare_exchange_strong(expected, true)) {
    throw illegal_operation_exception("apgas::run: a run is already in progress (runs may not nest or overlap)");
  }
  struct running_flag {
    ~running_flag() { g_running.store(false); }
  } flag;
  g_run.fetch_add(1);
  const int connect_s = valid ? cfg.connect_timeout_s : config{}.connect_timeout_s;

  transport::transport* tp = nullptr;
  startup_watchdog_arm(connect_s);
  struct watchdog_guard {
    ~watchdog_guard() { watchdog_disarm(); }
  } watchdog;
  try {
    tp = &transport_for_run(connect_s);
  } catch (const config_error& e) {
    // (an invalid configuration said why already: a bad APGAS_TRANSPORT is refused by both, in other words)
    if (valid) std::fprintf(stderr, "apgas: %s\n", e.what());
    return 2;
  } catch (const error& e) {
    std::fprintf(stderr, "apgas: start-up failed: %s\n", e.what());
    return 2;
  }
  int heartbeat_s = cfg.heartbeat_timeout_s;
  if (!agree_on_settings(*tp, valid, heartbeat_s)) return 2;
  // Every place takes place 0's trace and statistics settings; place 0 stops the run if it cannot write the file.
  if (!obs::prepare(cfg, *tp)) return 2;
  // The GPUs of this host, then the same tree everywhere: every host learns every host's GPUs. A host whose GPU
  // set-up failed still takes part in the exchange (so that no peer waits for it), and then every host stops.
  accelerator* acc = nullptr;
  std::string acc_error;
  try {
    acc = &accelerator_for_run(cfg);
  } catch (const std::exception& e) {
    acc_error = e.what();
    if (acc_error.rfind("apgas: ", 0) == 0) acc_error.erase(0, 7);  // (printed with the prefix below)
  }
  place_tree t;
  std::vector<int> failed;
  if (!build_tree(*tp, acc, t, failed)) {
    // The failed host says what failed, the others where (with untagged launcher output every line must say it).
    if (!acc_error.empty()) {
      std::fprintf(stderr, "apgas: host place %d (%s): %s\n", tp->rank(), host_name().c_str(), acc_error.c_str());
    } else {
      std::string where;
      for (const int f : failed) where += (where.empty() ? "" : ", ") + std::to_string(f);
      std::fprintf(stderr, "apgas: start-up stopped at host place %d: the GPU set-up failed at host place%s %s\n",
                   tp->rank(), failed.size() == 1 ? "" : "s", where.c_str());
    }
    return 2;
  }
  const int first_gpu = t.num_hosts + t.gpus_before_here;
  set_tree(std::move(t));
  auto sched = std::make_unique<scheduler>(cfg, places_on_this_host(tp->rank()));
  set_scheduler(sched.get());
  g_here = tree().here_host;  // (remote_array::data()'s check; no activity runs yet)
  tp->barrier();  // every place is ready to receive before place 0 sends anything
  // (the start-up watchdog stays armed through the trace's clock synchronisation, whose barriers a place that died
  // would hold up for ever: nothing else watches until the failure detector starts)
  obs::start(*tp, sched->size());
  watchdog_disarm();
  dist_start(*tp, heartbeat_s, connect_s, cfg.message_piece);
  gpu_start(*acc, first_gpu);

  // The main activity (place 0): runs `main` inside the implicit finish; its outcome is handed to this
  // (non-worker) thread. The other places serve until place 0 tells them the run is over.
  std::atomic<bool> done{false};
  std::exception_ptr failure;
  try {
    sched->start();
  } catch (const std::exception& e) {  // std::system_error (no thread), std::bad_alloc
    // Some workers may be running and the other places are past the barrier: no clean way back, so stop this
    // process (a launcher then ends the job) with a message that names the setting.
    std::fprintf(stderr, "apgas: start-up failed at place %d: could not start %d worker threads (APGAS_NTHREADS): %s\n",
                 tp->rank(), sched->size(), e.what());
    std::fflush(stderr);
    end_process(2);
  }
  int code = 0;
  if (tp->rank() == 0) {
    task* root = make_task([&] {
      try {
        run_finish([&] {
          // main is an activity: its clocks are dropped when its body ends (returns or throws), before its implicit
          // finish waits (X10's Activity.run), or a clocked child still waiting for it would wait for ever.
          struct drop_clocks {
            ~drop_clocks() {
              if (task* t = current_task(); t != nullptr && t->clocks != nullptr) drop_all_clocks(*t);
            }
          } at_end;
          main();
        });
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
  // From dist_stop on the failure detector is off: the watchdog stops this place if another one dies before the
  // final barrier, or if the final barrier does not come within the deadline: APGAS_CONNECT_TIMEOUT, ten times that
  // while a trace is gathered (that may take long; without a deadline a place that froze, or died on another host,
  // left the others waiting for ever). Armed first: dist_stop itself waits for a poll to end (removing the progress
  // hook), and a poll stuck in the transport would hold it for ever.
  if (tp->size() > 1) {
    shutdown_watchdog_arm(obs::on(obs::cat_all) ? 10 * cfg.connect_timeout_s : cfg.connect_timeout_s,
                          heartbeat_s > 0 ? heartbeat_s : -1,
                          obs::on(obs::cat_all) ? "10 x APGAS_CONNECT_TIMEOUT, a trace being gathered"
                                                : "APGAS_CONNECT_TIMEOUT");
  }
  dist_stop();
  gpu_stop();
  sched.reset();  // stop and join the workers
  g_here = no_run;
  place_local_end_of_run();
  obs::stop(*tp);
  set_scheduler(nullptr);
  dist_finalize(*tp);
  watchdog_disarm();
  obs::finish();
  set_tree(place_tree::single_host());

  if (!failure) return code;
  try {
    std::rethrow_exception(failure);
  } catch (const multiple_exceptions& m) {
    const auto& es = m.exceptions();
    std::fprintf(stderr, "apgas: the main activity ended with %zu uncaught exception%s:\n", es.size(),
                 es.size() == 1 ? "" : "s");
    constexpr std::size_t shown = 20;  // (thousands of one kind, e.g. an activity per element, would bury the rest)
    for (std::size_t i = 0; i < es.size() && i < shown; ++i) print_exception(es[i], i, es.size());
    if (es.size() > shown) {
      std::fprintf(stderr, "apgas:   ... and %zu more, not printed (the exception holds them all)\n",
                   es.size() - shown);
    }
  } catch (...) {
    std::fprintf(stderr, "apgas: the main activity ended with an uncaught exception:\n");
    print_exception(failure, 0, 1);
  }
  return 1;
}
}  // namespace

int run(const config& cfg, function_ref<void()> main) {
  if (g_running.load()) {  // (before the configuration is looked at: a nested run is misuse whatever it is)
    throw illegal_operation_exception("apgas::run: a run is already in progress (runs may not nest or overlap)");
  }
  try {
    cfg.validate();
  } catch (const config_error& e) {
    std::fprintf(stderr, "apgas: %s\n", e.what());
    return run_places(config{}, false, main);
  }
  if (obs::stats_requested() && !cfg.stats) {  // enable_stats() holds for every later run, as documented
    config c = cfg;
    c.stats = true;
    return run_places(c, true, main);
  }
  return run_places(cfg, true, main);
}

int run_from_env(int argc, char** argv, function_ref<void()> main) {
  (void)argc;
  (void)argv;
  if (g_running.load()) {  // (before the environment is read: a nested run is misuse whatever its configuration)
    throw illegal_operation_exception("apgas::run: a run is already in progress (runs may not nest or overlap)");
  }
  config cfg;
  try {
    cfg = config::from_env();
  } catch (const config_error& e) {
    std::fprintf(stderr, "apgas: %s\n", e.what());
    return run_places(config{}, false, main);
  }
  return run(cfg, main);
}

}  // namespace detail
}  // namespace apgas
