#pragma once
// parboil::for_each_part: the one-level split of a benchmark's work over every compute place of a run, for the apgas
// versions of cp, mri_q and mri_fhd. Nothing in it is about one benchmark: it belongs beside compute_places() and
// share() in ../common/parboil_apgas.hpp (kept here until it moves, since common/ is shared by other benchmarks).
#include "parboil_apgas.hpp"

#include <vector>

namespace parboil {

/// Every compute place of the run, hosts in order: each host's GPU places, or the host place itself where it has
/// none or where `cpu` is set (compute_places() of every host, seen from anywhere).
inline std::vector<apgas::place> all_compute_places(bool cpu) {
  std::vector<apgas::place> all;
  for (const apgas::place h : apgas::places()) {
    const auto gpus = h.children();
    if (cpu || gpus.empty()) {
      all.push_back(h);
    } else {
      all.insert(all.end(), gpus.begin(), gpus.end());
    }
  }
  return all;
}

/// Splits n items over every compute place of the run (all_compute_places) in contiguous parts whose sizes are
/// multiples of `grain` (share()), and runs f(p, lo, hi, args...) for each non-empty part [lo, hi) in an activity at
/// the host of its place p (there p is a place of this host: its arrays, queues and kernels); returns when every part
/// has ended, rethrowing their exceptions as finish does. f and args travel as with apgas::async_at: host data as
/// apgas::span_view, valid while f runs.
template <class F, class... Args>
void for_each_part(long long n, long long grain, bool cpu, F f, Args... args) {
  const std::vector<apgas::place> ps = all_compute_places(cpu);
  apgas::finish([&] {
    for (std::size_t i = 0; i < ps.size(); ++i) {
      const auto [lo, hi] = share(n, static_cast<int>(i), static_cast<int>(ps.size()), grain);
      if (lo < hi) apgas::async_at(ps[i].parent(), f, ps[i], lo, hi, args...);
    }
  });
}

}  // namespace parboil
