#pragma once
// parboil::compute_parts: a data-parallel computation of a Parboil benchmark split over every compute place of a run
// (X10's block-distributed array, for one kernel pipeline): each part's inputs go to its place, its outputs come
// back into the output at place 0. Used by the apgas versions of cp, mri_q and mri_fhd.
#include "parboil_apgas.hpp"

#include <algorithm>
#include <span>
#include <utility>
#include <vector>

namespace parboil {

/// One part of a split computation, as its function sees it at the host of its compute place.
template <class T>
struct part {
  apgas::place p;                   ///< the compute place (a place of the calling host)
  long long lo, hi;                 ///< its items
  apgas::remote_array<T> in, out;   ///< at p: its items' inputs, and their outputs (zero-filled), segment by segment
  apgas::in_order_queue queue;      ///< at p: kernels put on it run one after the other, with no wait between them
  std::size_t size() const { return static_cast<std::size_t>(hi - lo); }
};

namespace detail {
/// The spans, neighbours in memory joined: a part with every item copies its segments in one piece.
template <class T>
std::vector<std::span<T>> joined(const std::vector<std::span<T>>& spans) {
  std::vector<std::span<T>> out;
  for (const auto& s : spans) {
    if (!out.empty() && out.back().data() + out.back().size() == s.data()) {
      out.back() = std::span<T>(out.back().data(), out.back().size() + s.size());
    } else {
      out.push_back(s);
    }
  }
  return out;
}

/// Part [lo, hi) at compute place p of this host: its inputs (`from`, in order) into an array at p, f, its outputs
/// from an array at p into `to`, in order.
template <class T, class F, class... Args>
void run_part(apgas::place p, long long lo, long long hi, const std::vector<std::span<const T>>& from,
              const std::vector<std::span<T>>& to, const F& f, const Args&... args) {
  std::size_t n_in = 0, n_out = 0;
  for (const auto& s : from) n_in += s.size();
  for (const auto& s : to) n_out += s.size();
  part<T> pt{p, lo, hi, apgas::make_remote_array<T>(p, n_in), apgas::make_remote_array<T>(p, n_out),
             apgas::in_order(p)};
  apgas::finish([&] {
    std::size_t at = 0;
    for (const auto& s : joined(from)) apgas::async_copy(s, pt.in, std::exchange(at, at + s.size()));
  });
  apgas::finish([&] { f(static_cast<const part<T>&>(pt), args...); });  // (with what it put on pt.queue)
  apgas::finish([&] {
    std::size_t at = 0;
    for (const auto& s : joined(to)) apgas::async_copy(pt.out, std::exchange(at, at + s.size()), s);
  });
  apgas::free_remote_array(pt.in);
  apgas::free_remote_array(pt.out);
}

/// The slices of items [lo, hi) (w values each) of the `segments` arrays of n items held one after the other in v.
template <class T>
std::vector<std::span<T>> slices(std::span<T> v, int segments, long long n, long long lo, long long hi) {
  std::vector<std::span<T>> s;
  const auto w = static_cast<std::size_t>(static_cast<long long>(v.size()) / segments / n);
  for (int i = 0; i < segments; ++i) {
    s.push_back(v.subspan(static_cast<std::size_t>(i * n + lo) * w, static_cast<std::size_t>(hi - lo) * w));
  }
  return s;
}
}  // namespace detail

/// Splits n items over every compute place of the run (all_compute_places) in contiguous parts whose sizes are
/// multiples of `grain` (share()), and for each non-empty part runs f(part, args...) in an activity at the host of
/// its compute place: f launches the part's kernels on part.p (or on part.queue, in line), reading part.in and writing
/// part.out; they have ended when f's finish has. `in` holds
/// `in_segments` arrays of n items (of in.size() / (in_segments * n) values each), one after the other; part.in holds
/// the part's slices of them, in order (none for in_segments = 0). `out` likewise holds `out_segments` arrays; part.out
/// holds the part's slices (zero-filled), which are copied into `out` when f returns. A part at this host reads `in`
/// and writes `out` directly; another host's part receives its slices with the request and sends its results back
/// with the reply. Returns when every part has ended, rethrowing their exceptions as finish does. f and args travel
/// as with apgas::async_at (host data as apgas::span_view, valid while f runs).
template <class T, class F, class... Args>
void compute_parts(std::span<T> out, int out_segments, std::span<const T> in, int in_segments, long long n,
                   long long grain, bool cpu, F f, Args... args) {
  const std::vector<apgas::place> ps = all_compute_places(cpu);
  apgas::finish([&] {
    for (std::size_t i = 0; i < ps.size(); ++i) {
      const auto [lo, hi] = share(n, static_cast<int>(i), static_cast<int>(ps.size()), grain);
      if (lo == hi) continue;
      const apgas::place p = ps[i];
      const auto from = in_segments == 0 ? std::vector<std::span<const T>>{}
                                         : detail::slices(in, in_segments, n, lo, hi);
      const auto to = detail::slices(out, out_segments, n, lo, hi);
      if (p.parent() == apgas::here()) {
        apgas::async([=] { detail::run_part<T>(p, lo, hi, from, to, f, args...); });
        continue;
      }
      apgas::async([=] {
        std::vector<T> packed;  // the part's inputs, sent along
        for (const auto& s : from) packed.insert(packed.end(), s.begin(), s.end());
        const std::size_t n_out = to.size() * to[0].size();
        const std::vector<T> results = apgas::at(
            p.parent(),
            [f, n_out](apgas::place p, long long lo, long long hi, apgas::span_view<T> inputs, Args... args) {
              std::vector<T> buf(n_out);
              detail::run_part<T>(p, lo, hi, {inputs.data}, {std::span<T>(buf)}, f, args...);
              return buf;
            },
            p, lo, hi, apgas::span_view<T>{packed}, args...);
        for (std::size_t s = 0; s < to.size(); ++s) {
          std::copy_n(results.begin() + static_cast<long long>(s * to[s].size()), to[s].size(), to[s].begin());
        }
      });
    }
  });
}

}  // namespace parboil
