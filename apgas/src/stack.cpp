#include "stack.hpp"

#include <apgas/transport/transport.hpp>

#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>

#if defined(APGAS_DETAIL_ASAN)
#include <sanitizer/asan_interface.h>
#endif

namespace apgas::detail {
namespace {

std::size_t page_size() noexcept {
  static const std::size_t p = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  return p;
}

// Registry of live stacks read by the signal handler. Slots are claimed under a mutex and read lock-free by the
// handler: a slot's `guard` is published last (release) and cleared first, so the handler never sees a torn entry.
// A slot array that never moves keeps the handler free of allocation and locks.
struct stack_slot {
  std::atomic<std::uintptr_t> guard{0};   // address of the guard page; 0 = free slot
  std::atomic<std::size_t> usable{0};
};
constexpr std::size_t max_slots = 1 << 16;
stack_slot g_slots[max_slots];
std::atomic<std::size_t> g_slots_used{0};
std::mutex g_slots_mutex;

void register_stack(std::uintptr_t guard, std::size_t usable) {
  std::lock_guard lock(g_slots_mutex);
  const std::size_t used = g_slots_used.load(std::memory_order_relaxed);
  for (std::size_t i = 0; i < used; ++i) {
    if (g_slots[i].guard.load(std::memory_order_relaxed) == 0) {
      g_slots[i].usable.store(usable, std::memory_order_relaxed);
      g_slots[i].guard.store(guard, std::memory_order_release);
      return;
    }
  }
  if (used == max_slots) return;  // only the overflow diagnosis is lost for this stack, never its guard page
  g_slots[used].usable.store(usable, std::memory_order_relaxed);
  g_slots[used].guard.store(guard, std::memory_order_release);
  g_slots_used.store(used + 1, std::memory_order_release);
}

void unregister_stack(std::uintptr_t guard) {
  std::lock_guard lock(g_slots_mutex);
  const std::size_t used = g_slots_used.load(std::memory_order_relaxed);
  for (std::size_t i = 0; i < used; ++i) {
    if (g_slots[i].guard.load(std::memory_order_relaxed) == guard) {
      g_slots[i].guard.store(0, std::memory_order_release);
      return;
    }
  }
}

struct sigaction g_previous{};
std::once_flag g_install_once;

void write_str(const char* s) noexcept {
  std::size_t n = std::strlen(s);
  while (n > 0) {
    const ssize_t w = ::write(STDERR_FILENO, s, n);
    if (w <= 0) return;
    s += w;
    n -= static_cast<std::size_t>(w);
  }
}

void write_dec(std::size_t v) noexcept {
  char buf[32];
  int i = 31;
  buf[i] = '\0';
  do {
    buf[--i] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v != 0 && i > 0);
  write_str(&buf[i]);
}

void on_segv(int sig, siginfo_t* info, void* uctx) {
  const auto addr = reinterpret_cast<std::uintptr_t>(info->si_addr);
  const std::size_t used = g_slots_used.load(std::memory_order_acquire);
  const std::size_t page = page_size();
  for (std::size_t i = 0; i < used; ++i) {
    const std::uintptr_t guard = g_slots[i].guard.load(std::memory_order_acquire);
    if (guard != 0 && addr >= guard && addr < guard + page) {
      write_str("apgas: stack overflow in an activity: it ran past its fiber stack of ");
      write_dec(g_slots[i].usable.load(std::memory_order_relaxed));
      write_str(" bytes and hit the guard page; raise APGAS_STACK_SIZE (or apgas::config::stack_size)\n");
      // Die by the signal (a core dump, WIFSIGNALED for the parent): SIGSEGV is blocked while this handler runs,
      // so unblock it after restoring the default action; _Exit only if that somehow returned. What the transport
      // would leave behind goes first (async-signal-safe).
      transport::before_abrupt_exit();
      ::signal(SIGSEGV, SIG_DFL);
      sigset_t segv;
      sigemptyset(&segv);
      sigaddset(&segv, SIGSEGV);
      ::sigprocmask(SIG_UNBLOCK, &segv, nullptr);
      ::raise(SIGSEGV);
      std::_Exit(128 + SIGSEGV);
    }
  }
  // Not ours: hand over to whoever was installed before us (a sanitizer, a debugger helper) or the default.
  if (g_previous.sa_flags & SA_SIGINFO) {
    if (g_previous.sa_sigaction != nullptr) {
      g_previous.sa_sigaction(sig, info, uctx);
      return;
    }
  } else if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN) {
    g_previous.sa_handler(sig);
    return;
  }
  ::signal(SIGSEGV, SIG_DFL);  // returning re-executes the faulting access, now fatal with the usual report
}

constexpr std::size_t alt_stack_size = 64 * 1024;
thread_local void* t_alt_stack = nullptr;

}  // namespace

boost::context::stack_context guarded_stack_allocator::allocate() {
  const std::size_t page = page_size();
  const std::size_t usable = (size_ + page - 1) / page * page;
  const std::size_t total = usable + page;
  void* base = ::mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (base == MAP_FAILED) throw std::bad_alloc();
  if (::mprotect(base, page, PROT_NONE) != 0) {
    ::munmap(base, total);
    throw std::bad_alloc();
  }
#if defined(APGAS_DETAIL_ASAN)
  // The range may have held an earlier fiber stack whose frames ASan still has poisoned: start clean.
  ASAN_UNPOISON_MEMORY_REGION(static_cast<char*>(base) + page, usable);
#endif
  register_stack(reinterpret_cast<std::uintptr_t>(base), usable);
  boost::context::stack_context sc;
  sc.size = usable;
  sc.sp = static_cast<char*>(base) + total;
  return sc;
}

void guarded_stack_allocator::deallocate(boost::context::stack_context& sc) noexcept {
  const std::size_t page = page_size();
  char* top = static_cast<char*>(sc.sp);
  char* base = top - sc.size - page;
  unregister_stack(reinterpret_cast<std::uintptr_t>(base));
#if defined(APGAS_DETAIL_ASAN)
  ASAN_UNPOISON_MEMORY_REGION(base + page, sc.size);
#endif
  ::munmap(base, sc.size + page);
}

// Debian's libfabric pulls in libpsm_infinipath, whose libinfinipath installs handlers for SIGINT, SIGTERM,
// SIGSEGV and SIGBUS when it is loaded (before main) that call exit(1) (unless IPATH_NO_BACKTRACE is set, as mpirun
// does): outside mpirun a Ctrl-C, a kill or a crash of an apgas program then ended it with exit code 1 (k-means's
// "check failed") through exit(), no core dump, and a .btr file in the working directory. Handlers that live in that
// library are put back to the default action; any other (the program's, a sanitizer's) is left alone.
namespace {
void drop_foreign_fatal_handlers() {
  for (const int sig : {SIGINT, SIGTERM, SIGQUIT, SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT}) {
    struct sigaction old{};
    if (::sigaction(sig, nullptr, &old) != 0) continue;
    void* const fn = (old.sa_flags & SA_SIGINFO) != 0 ? reinterpret_cast<void*>(old.sa_sigaction)
                                                       : reinterpret_cast<void*>(old.sa_handler);
    if (old.sa_handler == SIG_DFL || old.sa_handler == SIG_IGN || fn == nullptr) continue;
    Dl_info info{};
    if (::dladdr(fn, &info) == 0 || info.dli_fname == nullptr) continue;
    if (std::strstr(info.dli_fname, "libinfinipath") == nullptr) continue;
    ::signal(sig, SIG_DFL);
  }
}
// Also when libapgas is loaded (its initialisers run after those of the libraries it loads): a Ctrl-C before the
// first run. The first run does it again (a program linked statically may have loaded the library later).
[[maybe_unused]] const bool g_foreign_dropped = (drop_foreign_fatal_handlers(), true);
}  // namespace

void install_overflow_handler() {
  std::call_once(g_install_once, [] {
    drop_foreign_fatal_handlers();  // (first: what the overflow handler hands other faults to)
    struct sigaction sa{};
    sa.sa_sigaction = &on_segv;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGSEGV, &sa, &g_previous);
  });
}

void enter_signal_stack() {
  if (t_alt_stack != nullptr) return;
  t_alt_stack = std::malloc(alt_stack_size);
  if (t_alt_stack == nullptr) return;  // overflows on this thread are then reported as a plain SIGSEGV
  stack_t ss{};
  ss.ss_sp = t_alt_stack;
  ss.ss_size = alt_stack_size;
  ::sigaltstack(&ss, nullptr);
}

void count_memory_mappings(long& maps, long& max_maps) noexcept {
  maps = 0;
  max_maps = 0;
  if (std::FILE* f = std::fopen("/proc/sys/vm/max_map_count", "r")) {
    if (std::fscanf(f, "%ld", &max_maps) != 1) max_maps = 0;
    std::fclose(f);
  }
  if (std::FILE* f = std::fopen("/proc/self/maps", "r")) {
    for (int c = std::fgetc(f); c != EOF; c = std::fgetc(f)) maps += c == '\n' ? 1 : 0;
    std::fclose(f);
  }
}

void leave_signal_stack() {
  if (t_alt_stack == nullptr) return;
  stack_t ss{};
  ss.ss_flags = SS_DISABLE;
  ::sigaltstack(&ss, nullptr);
  std::free(t_alt_stack);
  t_alt_stack = nullptr;
}

}  // namespace apgas::detail
