#pragma once
// What the apgas versions of samples/x10cuda share besides ../parboil/common/parboil_apgas.hpp: the work of a run cut
// over the compute places of every host (parboil::compute_places tells them for the calling host only).
#include "parboil_apgas.hpp"
#include "x10cuda.hpp"

#include <apgas/apgas.hpp>

#include <vector>

namespace x10cuda {

/// One part of a run's work: items [lo, hi) at a compute place (a GPU place, or a host's CPU place).
struct part {
  apgas::place at;
  long long lo, hi;
  long long size() const { return hi - lo; }
};

/// n items cut over the host places in order (parboil::share, multiples of `grain`), each host's share over its
/// compute places: its GPU places, or the host itself when it has none or with --cpu. Empty parts are left out.
inline std::vector<part> parts(long long n, bool cpu, long long grain = 1) {
  std::vector<part> out;
  const auto hosts = apgas::places();
  for (std::size_t h = 0; h < hosts.size(); ++h) {
    const auto [lo, hi] = parboil::share(n, static_cast<int>(h), static_cast<int>(hosts.size()), grain);
    const auto gpus = hosts[h].children();
    const std::vector<apgas::place> at =
        cpu || gpus.empty() ? std::vector<apgas::place>{hosts[h]} : std::vector<apgas::place>(gpus.begin(), gpus.end());
    for (std::size_t g = 0; g < at.size(); ++g) {
      const auto [a, b] = parboil::share(hi - lo, static_cast<int>(g), static_cast<int>(at.size()), grain);
      if (b > a) out.push_back(part{at[g], lo + a, lo + b});
    }
  }
  return out;
}

/// f(p) at the host of each part p (where kernel closures for its compute place are made), all at once; returns when
/// every one has ended. f is copied to the hosts: it captures values (remote arrays, numbers), not references.
template <class F>
void for_parts(const std::vector<part>& parts, F f) {
  apgas::finish([&] {
    for (const part& p : parts) apgas::async_at(p.at.parent(), [=] { f(p); });
  });
}

/// n elements of `src` from `lo` on, at place `at`: src itself where `at` is its home and lo is 0 (a CPU place works
/// in place), else a new array there, filled from src unless `fill` is false.
template <class T>
apgas::remote_array<T> borrow(apgas::place at, apgas::remote_array<T> src, long long lo, long long n, bool fill = true) {
  if (at == src.home() && lo == 0) return src;
  auto a = apgas::make_remote_array<T>(at, static_cast<std::size_t>(n));
  if (fill) apgas::finish([&] { apgas::async_copy(src, lo, a, 0, n); });
  return a;
}

/// Gives back what borrow() lent: elements [off, off + n) of `a` into `src` from `lo` on (unless `copy` is false), then
/// frees `a`; nothing where `a` is src itself.
template <class T>
void give_back(apgas::remote_array<T> a, apgas::remote_array<T> src, long long lo, long long off, long long n,
               bool copy = true) {
  if (a.home() == src.home() && a.token() == src.token()) return;
  if (copy) apgas::finish([&] { apgas::async_copy(a, off, src, lo, n); });
  apgas::free_remote_array(a);
}

}  // namespace x10cuda
