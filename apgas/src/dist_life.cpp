// The life cycle of the runtime across host places (called by runtime.cpp): the process's transport, the check
// that every place runs the same program (program_fingerprint), the start-up handshake, the progress hook that
// polls the transport, shut-down and finalization.
#include "dist_state.hpp"

#include "obs.hpp"

#include <apgas/detail/completion.hpp>
#include <apgas/error.hpp>
#include <apgas/serialization/archive.hpp>
#include <apgas/serialization/registry.hpp>
#include <apgas/transport/transport.hpp>

#include <elf.h>
#include <link.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

namespace apgas::detail {

// ---- life cycle (runtime.cpp) ----

namespace {
std::unique_ptr<transport::transport>& the_transport() {
  static std::unique_ptr<transport::transport> t;  // one per process, for every run; destroyed at exit
  return t;
}
bool g_fingerprint_checked = false;

// The start-up handshake: every place sends one hello to every other place over the transport itself and polls
// until it has heard from all of them. The collectives before it (the fingerprint allgather) may go through the
// launcher's bootstrap (ofi), so this is the first proof that each peer is reachable on the path the run uses.
// Nothing else can arrive meanwhile: no place sends runtime traffic before the barrier that follows the place-tree
// exchange, which every place reaches only after its own handshake.
struct hello_handler final : transport::handler {
  std::vector<char> heard;
  int missing = 0;
  void on_message(int src, std::span<const std::byte> bytes) override {
    if (bytes.size() == 1 && bytes[0] == static_cast<std::byte>(msg::hello) && src >= 0 &&
        src < static_cast<int>(heard.size()) && heard[static_cast<std::size_t>(src)] == 0) {
      heard[static_cast<std::size_t>(src)] = 1;
      --missing;
    } else {
      std::fprintf(stderr, "apgas: a message of %zu bytes from place %d arrived during the start-up handshake; "
                   "dropped\n", bytes.size(), src);
    }
  }
};

void handshake(transport::transport& t, int timeout_s) {
  hello_handler h;
  h.heard.assign(static_cast<std::size_t>(t.size()), 0);
  h.heard[static_cast<std::size_t>(t.rank())] = 1;
  h.missing = t.size() - 1;
  for (int p = 0; p < t.size(); ++p) {
    if (p != t.rank()) t.send(p, {static_cast<std::byte>(msg::hello)});
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  while (h.missing > 0) {
    if (!t.poll(h)) {
      if (std::chrono::steady_clock::now() > deadline) {
        std::string silent;
        for (int p = 0; p < t.size(); ++p) {
          if (h.heard[static_cast<std::size_t>(p)] == 0) silent += (silent.empty() ? "" : ", ") + std::to_string(p);
        }
        // Only this place knows: the silent peer may be waiting in a collective, and so would this process in
        // MPI_Finalize at exit. Stop here; the launcher then ends the other processes of the job.
        std::fprintf(stderr,
                     "apgas: start-up failed: place %d did not hear from place%s %s over the %s transport within %d s "
                     "(APGAS_CONNECT_TIMEOUT): unreachable, or not started\n",
                     t.rank(), h.missing > 1 ? "s" : "", silent.c_str(), t.name(), timeout_s);
        std::fflush(stderr);
        std::_Exit(2);
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
}

// The transport failed under us (a peer died or became unreachable, the network reported an error): no finish can
// be trusted to terminate any more, so the place stops at once with a message that names the failure, rather than
// hanging. (Resilient finish is not a goal of this version.)
bool poll_hook(void* ctx) {
  auto* d = static_cast<dist_state*>(ctx);
  try {
    return d->tp->poll(*d);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "apgas: place %d: the %s transport failed: %s\n", d->rank, d->tp->name(), e.what());
    obs::emergency_dump("its transport failed");
    std::fflush(stderr);
    std::_Exit(3);
  }
}

}  // namespace

transport::transport& transport_for_run(int connect_timeout_s) {
  auto& t = the_transport();
  if (!t) t = transport::make_from_env();
  if (!g_fingerprint_checked) {
    ser::registry::seal();
    const std::uint64_t mine = ser::registry::fingerprint() ^ program_fingerprint();
    std::vector<std::byte> all = t->allgather(std::as_bytes(std::span(&mine, 1)));
    for (int p = 0; p < t->size(); ++p) {
      std::uint64_t theirs = 0;
      std::memcpy(&theirs, all.data() + static_cast<std::size_t>(p) * sizeof theirs, sizeof theirs);
      if (theirs != mine) {
        throw transport_error("apgas: place " + std::to_string(p) + " runs a different program (build fingerprint " +
                              std::to_string(theirs) + ", place " + std::to_string(t->rank()) + " has " +
                              std::to_string(mine) + "): every process of a run must start the same binary");
      }
    }
    if (t->size() > 1) handshake(*t, connect_timeout_s);
    g_fingerprint_checked = true;
  }
  return *t;
}

void dist_start(transport::transport& tp) {
  auto* d = new dist_state;
  d->tp = &tp;
  d->rank = tp.rank();
  d->size = tp.size();
  clock_dist_start(*d);
  g_dist = d;
  if (d->size > 1) d->hook = add_progress_hook(&poll_hook, d);
}

bool dist_multi_host() noexcept { return g_dist != nullptr && g_dist->size > 1; }

void dist_shutdown_others(int code) {
  for (int p = 1; p < g_dist->size; ++p) {
    writer w = message_writer(128);
    w & msg::shutdown & static_cast<std::int32_t>(code);
    send(p, std::move(w));
  }
}

int dist_wait_shutdown() {
  int code = g_dist->exit_code.load(std::memory_order_acquire);
  while (code < 0) {
    g_dist->exit_code.wait(code, std::memory_order_acquire);
    code = g_dist->exit_code.load(std::memory_order_acquire);
  }
  return code;
}

void dist_stop() {
  dist_state* d = g_dist;
  if (d->hook >= 0) remove_progress_hook(d->hook);
}

void dist_finalize(transport::transport& tp) {
  tp.barrier();  // nothing is in flight any more: every place has stopped its workers
  delete g_dist;
  g_dist = nullptr;
}

}  // namespace apgas::detail

namespace apgas::detail {
namespace {
int note_cb(dl_phdr_info* info, std::size_t, void* out) {
  // The first object is the executable: hash its GNU build id note.
  auto* h = static_cast<std::uint64_t*>(out);
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_NOTE) continue;
    const auto* p = reinterpret_cast<const unsigned char*>(info->dlpi_addr + ph.p_vaddr);
    const unsigned char* end = p + ph.p_memsz;
    while (p + sizeof(ElfW(Nhdr)) <= end) {
      const auto* n = reinterpret_cast<const ElfW(Nhdr)*>(p);
      const unsigned char* name = p + sizeof(ElfW(Nhdr));
      const unsigned char* desc = name + ((n->n_namesz + 3u) & ~3u);
      if (n->n_type == NT_GNU_BUILD_ID && n->n_namesz == 4 && std::memcmp(name, "GNU", 4) == 0) {
        for (unsigned k = 0; k < n->n_descsz; ++k) {
          *h ^= desc[k];
          *h *= 1099511628211ull;
        }
        return 1;
      }
      p = desc + ((n->n_descsz + 3u) & ~3u);
    }
  }
  return 1;  // only the executable
}
}  // namespace

std::uint64_t program_fingerprint() {
  std::uint64_t h = 1469598103934665603ull;
  dl_iterate_phdr(&note_cb, &h);
  return h;
}

}  // namespace apgas::detail
