// The local backend: one host place, no network. Messages to itself are queued and delivered by poll().
#include "../transports.hpp"

#include <apgas/error.hpp>

#include <cstring>
#include <deque>
#include <mutex>
#include <string>

namespace apgas::transport {
namespace {

class local_transport final : public transport {
 public:
  const char* name() const noexcept override { return "local"; }
  int rank() const noexcept override { return 0; }
  int size() const noexcept override { return 1; }
  std::size_t max_message() const noexcept override { return std::size_t{1} << 30; }

  void send(int dst, std::vector<std::byte> bytes) override {
    if (dst != 0) throw transport_error("apgas transport local: send to rank " + std::to_string(dst) + " of 1");
    aligned_buffer b(bytes.size());
    if (!bytes.empty()) std::memcpy(b.data(), bytes.data(), bytes.size());
    recycle_buffer(std::move(bytes));
    std::lock_guard lock(mutex_);
    queue_.push_back(std::move(b));
  }

  bool poll(handler& h) override {
    std::deque<aligned_buffer> batch;
    {
      std::lock_guard lock(mutex_);
      batch.swap(queue_);
    }
    for (auto& b : batch) h.on_message(0, b.span());
    return !batch.empty();
  }

  // One place: the runtime copies locally and never moves bulk data through the transport.
  std::uint32_t next_bulk_tag(int) noexcept override { return 0; }
  void send_bulk(int dst, std::uint32_t, std::span<const std::byte>) override {
    throw transport_error("apgas transport local: bulk transfer to rank " + std::to_string(dst));
  }
  void recv_bulk(int src, std::uint32_t, std::span<std::byte>, done_fn, void*) override {
    throw transport_error("apgas transport local: bulk transfer from rank " + std::to_string(src));
  }

  void barrier() override {}
  std::vector<std::byte> allgather(std::span<const std::byte> mine) override { return {mine.begin(), mine.end()}; }

 private:
  std::mutex mutex_;
  std::deque<aligned_buffer> queue_;
};

}  // namespace

std::unique_ptr<transport> make_local() { return std::make_unique<local_transport>(); }

}  // namespace apgas::transport
