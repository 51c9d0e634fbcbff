// Per-thread recycling of message vectors (transport.hpp: take_buffer / recycle_buffer).
#include <apgas/transport/transport.hpp>

#include <array>
#include <utility>

namespace apgas::transport {
namespace {

constexpr std::size_t kept = 4;                      // vectors kept per thread
constexpr std::size_t min_capacity = 64;             // smaller ones are not worth keeping
constexpr std::size_t max_capacity = 64 * 1024;      // larger ones are freed: no thread sits on big buffers

struct buffer_cache {
  std::array<std::vector<std::byte>, kept> bufs;
  std::size_t n = 0;
};

thread_local buffer_cache t_buffers;
// Never inlined: no caller may keep this thread's cache address across a fiber switch (scheduler.hpp's rule).
[[gnu::noipa]] buffer_cache& cache() noexcept { return t_buffers; }

}  // namespace

std::vector<std::byte> take_buffer(std::size_t capacity) {
  buffer_cache& c = cache();
  std::vector<std::byte> v;
  if (c.n != 0) {
    v = std::move(c.bufs[--c.n]);
    v.clear();
  }
  if (v.capacity() < capacity) v.reserve(capacity);
  return v;
}

void recycle_buffer(std::vector<std::byte>&& bytes) noexcept {
  buffer_cache& c = cache();
  if (c.n == kept || bytes.capacity() < min_capacity || bytes.capacity() > max_capacity) {
    std::vector<std::byte>().swap(bytes);
    return;
  }
  c.bufs[c.n++] = std::move(bytes);
}

}  // namespace apgas::transport
