// Eight 256 MiB async_copy's from place 0 into one array at place 1 in one finish (2 GiB in flight), then the array
// back, while place 2 idles: run with a short failure-detector timeout (APGAS_HEARTBEAT_TIMEOUT=1). Every byte must
// arrive, and no place may be declared dead: on ofi the bulk fragments queued for one place held up every heartbeat
// behind them (about a second per GiB on tcp: place 2 declared place 0 dead), and a get was copied into fragments
// inside the poll handler (seconds without polling).
#include <apgas/apgas.hpp>

#include <cstdint>
#include <cstdio>
#include <span>
#include <vector>

namespace {
std::uint8_t byte_at(std::size_t i) { return static_cast<std::uint8_t>(i * 2654435761u >> 13); }
}  // namespace

int main(int argc, char** argv) {
  return apgas::run(argc, argv, [] {
    constexpr std::size_t n = std::size_t{256} << 20;
    constexpr int copies = 8;
    std::vector<std::uint8_t> data(n);
    for (std::size_t i = 0; i < n; ++i) data[i] = byte_at(i);
    auto far = apgas::make_remote_array<std::uint8_t>(apgas::place(1), n);
    apgas::finish([&] {
      for (int c = 0; c < copies; ++c) apgas::async_copy(std::span<const std::uint8_t>(data), far, 0);
    });
    const std::size_t bad_there = apgas::at(apgas::place(1), [far] {
      std::size_t bad = 0;
      for (std::size_t i = 0; i < n; ++i) bad += far.data()[i] != byte_at(i);
      return bad;
    });
    std::vector<std::uint8_t> back(n);
    apgas::finish([&] { apgas::async_copy(far, 0, std::span<std::uint8_t>(back)); });
    std::size_t bad_back = 0;
    for (std::size_t i = 0; i < n; ++i) bad_back += back[i] != byte_at(i);
    apgas::free_remote_array(far);
    std::printf("big copy: %d x %zu bytes there, %zu wrong; back, %zu wrong\n", copies, n, bad_there, bad_back);
  });
}
