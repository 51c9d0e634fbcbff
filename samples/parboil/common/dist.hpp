#pragma once
// dist: the work of a run cut over the compute places of every host (X10's block distributions, for the samples of
// samples/parboil and samples/x10cuda): parts of a 1-D range of items, arrays of place 0 lent to the parts' places and
// given back (the very array where a part computes at place 0's CPU place: nothing copied), row blocks of a
// column-major matrix, and z-slabs with halo exchange.
#include "parboil_apgas.hpp"

#include <apgas/apgas.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <span>
#include <utility>
#include <vector>

namespace dist {

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

/// The compute place of a part, or of something that holds one as `p` (a slab, a slice of a matrix...).
inline apgas::place place_of(const part& p) { return p.at; }
template <class S>
apgas::place place_of(const S& s) {
  return s.p.at;
}

/// f(s) for each s of `items` (parts, or what holds one as `p`) at the host of its compute place (where kernel
/// closures for that place are made), all at once; returns when every one has ended. f is copied to the hosts: it
/// captures values (remote arrays, numbers), not references.
template <class S, class F>
void for_parts(const std::vector<S>& items, F f) {
  apgas::finish([&] {
    for (const S& s : items) apgas::async_at(place_of(s).parent(), [=] { f(s); });
  });
}

/// Whether a and b are the same array (a borrow that lent the source itself).
template <class T>
bool same(apgas::remote_array<T> a, apgas::remote_array<T> b) {
  return a.home() == b.home() && a.token() == b.token();
}

/// n elements of `src` from `lo` on, at place `at`: src itself where `at` is its home and lo is 0 (a CPU place works
/// in place), else a new array there, filled from src unless `fill` is false.
template <class T>
apgas::remote_array<T> borrow(apgas::place at, apgas::remote_array<T> src, long long lo, long long n,
                              bool fill = true) {
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
  if (same(a, src)) return;
  if (copy) apgas::finish([&] { apgas::async_copy(a, off, src, lo, n); });
  apgas::free_remote_array(a);
}

/// For each part of `ps`, at the host of its place: f(part, slices) under a finish, where slices[k] is the part's
/// slice of whole[k] (borrow: whole[k] itself where the part is its home's and starts at 0), the first `inputs` of
/// them filled; then the others are given back into their whole arrays. Returns when every part has ended.
template <class T, std::size_t N, class F>
void for_slices(const std::vector<part>& ps, std::array<apgas::remote_array<T>, N> whole, std::size_t inputs, F f) {
  for_parts(ps, [=](const part& p) {
    std::array<apgas::remote_array<T>, N> s;
    for (std::size_t k = 0; k < N; ++k) s[k] = borrow(p.at, whole[k], p.lo, p.size(), k < inputs);
    apgas::finish([&] { f(p, s); });
    for (std::size_t k = 0; k < N; ++k) give_back(s[k], whole[k], p.lo, 0, p.size(), k >= inputs);
  });
}

/// Rows [lo, lo + m) of `whole` (an array at a host place: a column-major matrix of `cols` columns, leading dimension
/// ld), copied to or from `rows` (m x cols, leading dimension m). Whole columns (m == ld) go at once; otherwise the
/// rows are packed at whole's home and travel as one copy each way (not one per column).
template <class T>
void copy_rows(apgas::remote_array<T> whole, apgas::remote_array<T> rows, long long lo, long long m, long long ld,
               long long cols, bool to_rows) {
  const auto n = static_cast<std::size_t>(m * cols);
  if (m == ld) {
    apgas::finish([&] {
      if (to_rows) apgas::async_copy(whole, lo, rows, 0, n);
      if (!to_rows) apgas::async_copy(rows, 0, whole, lo, n);
    });
    return;
  }
  apgas::at(whole.home(), [=] {  // packed there: one message to or from rows, not one per column
    std::vector<T> v(n);
    if (!to_rows) apgas::finish([&] { apgas::async_copy(rows, 0, std::span<T>(v)); });
    for (long long j = 0; j < cols; ++j) {
      T* w = whole.data() + lo + j * ld;
      if (to_rows) std::copy_n(w, m, v.data() + j * m);
      if (!to_rows) std::copy_n(v.data() + j * m, m, w);
    }
    if (to_rows) apgas::finish([&] { apgas::async_copy(std::span<const T>(v), rows); });
  });
}

/// Rows [lo, lo + m) of src (an array at a host place: `cols` columns, leading dimension ld) at place `at`: src itself
/// where `at` is its home and lo is 0 (the leading dimension stays ld: see ld_of), else an m x cols array there,
/// filled from src unless `fill` is false.
template <class T>
apgas::remote_array<T> borrow_rows(apgas::place at, apgas::remote_array<T> src, long long lo, long long m, long long ld,
                                   long long cols, bool fill = true) {
  if (at == src.home() && lo == 0) return src;
  auto a = apgas::make_remote_array<T>(at, static_cast<std::size_t>(m * cols));
  if (fill) copy_rows(src, a, lo, m, ld, cols, true);
  return a;
}

/// The leading dimension of what borrow_rows(at, src, lo, m, ld, ...) returned as `a`: ld where it is src, else m.
template <class T>
long long ld_of(apgas::remote_array<T> a, apgas::remote_array<T> src, long long m, long long ld) {
  return same(a, src) ? ld : m;
}

/// Gives back what borrow_rows() lent: its rows into src (unless `copy` is false), then frees it; nothing where `a` is
/// src itself.
template <class T>
void give_back_rows(apgas::remote_array<T> a, apgas::remote_array<T> src, long long lo, long long m, long long ld,
                    long long cols, bool copy = true) {
  if (same(a, src)) return;
  if (copy) copy_rows(src, a, lo, m, ld, cols, false);
  apgas::free_remote_array(a);
}

/// A part of a 1-D cut with halos (z-slabs of a volume): the part's items [p.lo, p.hi) in two arrays at its place
/// (ping-pong) holding items [base, end), `halo` more each side where they exist, of `unit` elements each.
template <class T>
struct slab {
  part p;
  long long base, end;
  apgas::remote_array<T> a, b;
};

/// The slabs of n items cut over every host's compute places (parts of whole multiples of `halo`, so that a halo comes
/// from one neighbour), a filled with the items of src (an array at place 0), b with those of them within `halo` of
/// either end (items a step leaves as they are: the rest of b is written by the step or by the halo exchange); the
/// slab at place 0's CPU place uses src as a and `spare`, of src's size, as b.
template <class T>
std::vector<slab<T>> make_slabs(long long n, bool cpu, long long halo, long long unit, apgas::remote_array<T> src,
                                apgas::remote_array<T> spare) {
  std::vector<slab<T>> slabs;
  for (const part& p : parts(n, cpu, halo)) {
    const long long base = std::max(0LL, p.lo - halo), end = std::min(n, p.hi + halo);
    slabs.push_back({p, base, end, borrow(p.at, src, base * unit, (end - base) * unit),
                     borrow(p.at, spare, base * unit, (end - base) * unit, false)});
  }
  apgas::finish([&] {
    for (const auto& s : slabs) {
      const long long below = std::min(s.end, halo) - s.base, above = std::max(s.base, n - halo);
      if (below > 0) apgas::async_copy(src, s.base * unit, s.b, 0, below * unit);
      if (s.end > above) apgas::async_copy(src, above * unit, s.b, (above - s.base) * unit, (s.end - above) * unit);
    }
  });
  return slabs;
}

/// `steps` steps over the slabs of make_slabs (halos of `halo` items of `unit` elements): step(q, s) issues slab
/// s's step on q, an in-order queue at its place, reading s.a and writing s.b's items [s.p.lo, s.p.hi) that the
/// step changes; on q after it, the slab's edge items go into the halos of its neighbours' b (not after the last
/// step), and b becomes a. One slab: every step issued at once under one finish (no host round trip between them);
/// several: a finish per step, so that the halos have landed before the next step reads them. step is copied to the
/// hosts: it captures values.
template <class T, class F>
void run_steps(std::vector<slab<T>>& slabs, int steps, long long halo, long long unit, F step) {
  const auto swap_all = [&] {
    for (auto& s : slabs) std::swap(s.a, s.b);
  };
  if (slabs.size() == 1) {
    apgas::finish([&] {
      auto q = apgas::in_order(slabs[0].p.at);
      for (int i = 0; i < steps; ++i, swap_all()) step(q, slabs[0]);
    });
    return;
  }
  for (int i = 0; i < steps; ++i, swap_all()) {
    apgas::finish([&] {
      for (std::size_t k = 0; k < slabs.size(); ++k) {
        const slab<T> s = slabs[k], lo = k > 0 ? slabs[k - 1] : s, hi = k + 1 < slabs.size() ? slabs[k + 1] : s;
        const bool exchange = i + 1 < steps, up = k + 1 < slabs.size();
        apgas::async_at(s.p.at.parent(), [=] {
          auto q = apgas::in_order(s.p.at);
          step(q, s);
          if (exchange && k > 0) {  // items [lo, lo + halo): the halo above the slab below
            q.async_copy(s.b, (s.p.lo - s.base) * unit, lo.b, (s.p.lo - lo.base) * unit, (lo.end - s.p.lo) * unit);
          }
          if (exchange && up) {  // items [hi - halo, hi): the halo below the slab above
            q.async_copy(s.b, (s.p.hi - halo - s.base) * unit, hi.b, (s.p.hi - halo - hi.base) * unit, halo * unit);
          }
        });
      }
    });
  }
}

/// Every slab's items from its a into dst (an array at place 0), and the slabs' arrays freed; `other` is the array
/// of place 0 that is not dst (src or spare of make_slabs), kept.
template <class T>
void gather_slabs(const std::vector<slab<T>>& slabs, long long unit, apgas::remote_array<T> dst,
                  apgas::remote_array<T> other) {
  for (const auto& s : slabs) {
    give_back(s.a, dst, s.p.lo * unit, (s.p.lo - s.base) * unit, s.p.size() * unit);
    give_back(s.b, other, 0, 0, 0, false);
  }
}

}  // namespace dist
