// The reorder shim (APGAS_TRANSPORT_SHIM=reorder): wraps a backend and holds every outgoing message for a random
// number of poll rounds, then sends the held messages in a random order. Used by tests to show that the runtime's
// protocols (distributed finish above all) do not depend on delivery order or timing. barrier() first flushes.
// Also the mute shim (below).
#include "transports.hpp"

#include <apgas/error.hpp>

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace apgas::transport {
namespace {

class reorder_shim final : public transport {
 public:
  explicit reorder_shim(std::unique_ptr<transport> inner)
      : inner_(std::move(inner)), rng_(0x5eed + static_cast<unsigned>(inner_->rank())) {}

  const char* name() const noexcept override { return inner_->name(); }
  int rank() const noexcept override { return inner_->rank(); }
  int size() const noexcept override { return inner_->size(); }
  std::size_t max_message() const noexcept override { return inner_->max_message(); }

  // A message of one byte (the start-up hello, a failure detector's heartbeat) carries no protocol state: it goes at
  // once, as it does through the backend, where the detector's thread sends it without polling. Held here, it waited
  // for this place to poll, and a place whose workers were all busy issuing (40000 copies from one loop) was declared
  // dead by its peers.
  void send(int dst, std::vector<std::byte> bytes) override {
    if (bytes.size() == 1) return inner_->send(dst, std::move(bytes));
    std::lock_guard lock(mutex_);
    held_.emplace(polls_ + 1 + rng_() % 12, held{dst, std::move(bytes)});
  }

  // Sends what is due at this poll round (found by its round: with tens of thousands held, a pass over all of them
  // at every poll made each poll as slow as their number).
  bool poll(handler& h) override {
    std::vector<held> ready;
    {
      std::lock_guard lock(mutex_);
      ++polls_;
      const auto due = held_.upper_bound(polls_);
      for (auto it = held_.begin(); it != due; ++it) ready.push_back(std::move(it->second));
      held_.erase(held_.begin(), due);
      std::shuffle(ready.begin(), ready.end(), rng_);
    }
    for (auto& m : ready) inner_->send(m.dst, std::move(m.bytes));
    const bool delivered = inner_->poll(h);
    return delivered || !ready.empty();
  }

  bool drained() const noexcept override { return inner_->drained(); }
  std::uint32_t next_bulk_tag(int dst) noexcept override { return inner_->next_bulk_tag(dst); }
  void send_bulk(int dst, std::uint32_t tag, std::span<const std::byte> payload) override {
    inner_->send_bulk(dst, tag, payload);
  }
  void recv_bulk(int src, std::uint32_t tag, std::span<std::byte> target, done_fn done, void* ctx) override {
    inner_->recv_bulk(src, tag, target, done, ctx);
  }

  void barrier() override {
    flush();
    inner_->barrier();
  }
  std::vector<std::byte> allgather(std::span<const std::byte> mine) override {
    flush();
    return inner_->allgather(mine);
  }

 private:
  struct held {
    int dst;
    std::vector<std::byte> bytes;
  };
  void flush() {
    std::multimap<std::uint64_t, held> all;
    {
      std::lock_guard lock(mutex_);
      all.swap(held_);
    }
    for (auto& [round, m] : all) inner_->send(m.dst, std::move(m.bytes));
  }

  std::unique_ptr<transport> inner_;
  std::mutex mutex_;
  std::minstd_rand rng_;
  std::uint64_t polls_ = 0;                     // poll rounds so far
  std::multimap<std::uint64_t, held> held_;      // by the poll round that sends it (1 to 12 rounds after its send)
};

}  // namespace

std::unique_ptr<transport> make_reorder_shim(std::unique_ptr<transport> inner) {
  return std::make_unique<reorder_shim>(std::move(inner));
}

namespace {
// The mute shim (APGAS_TRANSPORT_SHIM=mute:R): rank R sends no message at all, as if its peers could not reach it
// (collectives still work, as a launcher's bootstrap would). Used by tests of the start-up handshake.
// With die_at_barrier:R:K (tests of shut-down) rank R sends as usual but is killed (SIGKILL) when it enters its K-th
// barrier instead. With fail_send:R:K (tests of a failing transport) rank R's K-th message of more than one byte
// (send(), not the bulk path) throws transport_error, as a backend whose send failed would. With stuck_poll:R:K rank
// R's K-th poll never returns, as a backend deadlocked in a call (Open MPI's tcp transport, a peer dying under it).
// With lose_peer:R:P (tests of how a death is reported) rank R's first message of more than one byte to rank P throws
// peer_error(P), as a backend that lost its connection to P, and nothing R sends after that leaves (as a dead notice
// that waits behind a large transfer when R ends).
class mute_shim final : public transport {
 public:
  mute_shim(std::unique_ptr<transport> inner, int muted, shim_fault fault, int k)
      : inner_(std::move(inner)), muted_(muted == inner_->rank() && fault == shim_fault::mute),
        die_at_(muted == inner_->rank() && fault == shim_fault::die_at_barrier ? k : 0),
        fail_at_(muted == inner_->rank() && fault == shim_fault::fail_send ? k : 0),
        stuck_at_(muted == inner_->rank() && fault == shim_fault::stuck_poll ? k : 0),
        lose_(muted == inner_->rank() && fault == shim_fault::lose_peer ? k : -1) {}
  const char* name() const noexcept override { return inner_->name(); }
  int rank() const noexcept override { return inner_->rank(); }
  int size() const noexcept override { return inner_->size(); }
  std::size_t max_message() const noexcept override { return inner_->max_message(); }
  void send(int dst, std::vector<std::byte> bytes) override {
    // (one-byte messages, the hello and the heartbeats, are not counted: their number depends on timing)
    if (fail_at_ > 0 && bytes.size() > 1 && sends_.fetch_add(1, std::memory_order_relaxed) + 1 == fail_at_) {
      throw transport_error("apgas transport shim: rank " + std::to_string(rank()) + " fails its send " +
                            std::to_string(fail_at_) + " (to rank " + std::to_string(dst) + ")");
    }
    if (lose_ >= 0) {
      if (lost_.load(std::memory_order_acquire)) return;
      if (dst == lose_ && bytes.size() > 1) {
        lost_.store(true, std::memory_order_release);
        throw peer_error(dst, "apgas transport shim: rank " + std::to_string(rank()) + " lost its connection to rank " +
                                  std::to_string(dst));
      }
    }
    if (!muted_) inner_->send(dst, std::move(bytes));
  }
  bool poll(handler& h) override {
    if (stuck_at_ > 0 && polls_.fetch_add(1, std::memory_order_relaxed) + 1 == stuck_at_) {
      std::fprintf(stderr, "apgas transport shim: rank %d is stuck in its poll %d\n", rank(), stuck_at_);
      std::fflush(stderr);
      for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
    }
    return inner_->poll(h);
  }
  bool drained() const noexcept override { return inner_->drained(); }
  std::uint32_t next_bulk_tag(int dst) noexcept override { return inner_->next_bulk_tag(dst); }
  void send_bulk(int dst, std::uint32_t tag, std::span<const std::byte> payload) override {
    if (!muted_ && !lost_.load(std::memory_order_acquire)) inner_->send_bulk(dst, tag, payload);
  }
  void recv_bulk(int src, std::uint32_t tag, std::span<std::byte> target, done_fn done, void* ctx) override {
    inner_->recv_bulk(src, tag, target, done, ctx);
  }
  void barrier() override {
    if (die_at_ > 0 && ++barriers_ == die_at_) {
      std::fprintf(stderr, "apgas transport shim: rank %d dies at its barrier %d\n", rank(), die_at_);
      std::fflush(stderr);
      ::kill(::getpid(), SIGKILL);
    }
    inner_->barrier();
  }
  std::vector<std::byte> allgather(std::span<const std::byte> mine) override { return inner_->allgather(mine); }

 private:
  std::unique_ptr<transport> inner_;
  bool muted_;
  int die_at_;
  int fail_at_;
  int stuck_at_;
  int lose_;                      // the peer rank R loses, -1: none
  std::atomic<bool> lost_{false};  // it was lost: R sends nothing more
  int barriers_ = 0;
  std::atomic<long long> polls_{0};
  std::atomic<long long> sends_{0};  // (sends come from several threads)
};
}  // namespace

std::unique_ptr<transport> make_mute_shim(std::unique_ptr<transport> inner, int rank, shim_fault fault, int k) {
  return std::make_unique<mute_shim>(std::move(inner), rank, fault, k);
}

}  // namespace apgas::transport
