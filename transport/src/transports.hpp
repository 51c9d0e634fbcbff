#pragma once
// Backend factories (one per built backend) and helpers shared by the backends. Private to transport/.
#include <apgas/transport/transport.hpp>

#include <cstddef>
#include <cstdlib>
#include <memory>
#include <new>
#include <span>

namespace apgas::transport {

std::unique_ptr<transport> make_local();
std::unique_ptr<transport> make_mpi();
std::unique_ptr<transport> make_ofi();
std::unique_ptr<transport> make_reorder_shim(std::unique_ptr<transport> inner);
/// die_at_barrier K > 0: rank is not muted but killed at its K-th barrier.
/// The fault shims of reorder_shim.cpp: rank `rank` sends nothing (mute), is killed at its k-th barrier
/// (die_at_barrier) or has its k-th send throw (fail_send), or its k-th poll never return (stuck_poll), or loses
/// rank k at its first message to it and sends nothing after (lose_peer).
enum class shim_fault { mute, die_at_barrier, fail_send, stuck_poll, lose_peer };
std::unique_ptr<transport> make_mute_shim(std::unique_ptr<transport> inner, int rank, shim_fault fault, int k = 0);
/// True when an MPI-style launcher (mpirun, srun) started this process.
bool launched_by_mpi() noexcept;
/// What before_abrupt_exit() runs: a backend that holds named OS resources sets it while it is open (null: none).
void set_abrupt_exit_hook(void (*hook)(int dead_peer) noexcept) noexcept;

/// A heap buffer aligned to 16 bytes (what handlers are promised).
class aligned_buffer {
 public:
  aligned_buffer() = default;
  explicit aligned_buffer(std::size_t n)
      : p_(static_cast<std::byte*>(::operator new(n == 0 ? 1 : n, std::align_val_t{16}))), n_(n) {}
  aligned_buffer(aligned_buffer&& o) noexcept : p_(o.p_), n_(o.n_) {
    o.p_ = nullptr;
    o.n_ = 0;
  }
  aligned_buffer& operator=(aligned_buffer&& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(n_, o.n_);
    return *this;
  }
  ~aligned_buffer() {
    if (p_ != nullptr) ::operator delete(p_, std::align_val_t{16});
  }
  std::byte* data() noexcept { return p_; }
  std::size_t size() const noexcept { return n_; }
  std::span<const std::byte> span() const noexcept { return {p_, n_}; }

 private:
  std::byte* p_ = nullptr;
  std::size_t n_ = 0;
};

}  // namespace apgas::transport
