#pragma once
#pragma GCC visibility push(default)  // libapgas exports what its public headers declare (docs/building.md)
/// @file global.hpp
/// Global data: references to objects at their home place, one instance per place, arrays that live at a place,
/// and copies between places counted by finish. (Teams: team.hpp, included here.)
///
/// global_ref, place_local_handle and remote_array are small trivially copyable values: closures may capture them
/// and send them anywhere. Their data is only reachable at their home (bad_place_exception elsewhere); to use it
/// from another place, go there with at/async_at or copy it with async_copy. The address inside a global_ref or a
/// remote_array is an opaque token at every place but the home (it is never dereferenced anywhere else).

#include <apgas/activity.hpp>
#include <apgas/detail/gpu.hpp>
#include <apgas/error.hpp>
#include <apgas/place.hpp>
#include <apgas/serialization/archive.hpp>
#include <apgas/team.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <new>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace apgas {

namespace detail {
[[noreturn]] void not_at_home(const char* what, int home);
/// The host place of the caller (bad outside a run).
int here_id();
/// This process's host place while a run's workers are up, no_run otherwise: what remote_array::data() and
/// global_ref compare their home with at every use, a load where here_id() is a call that also checks that the caller
/// is an activity (data() is called in kernel bodies once a block or once a thread). Outside a run the comparison
/// fails and not_at_home reports what here_id() reports. Written by the runtime only (runtime.cpp).
inline constexpr int no_run = -2;  // (a default-constructed handle's home is -1)
extern int g_here;
void* place_local_get(std::uint64_t id);
void place_local_put(std::uint64_t id, void* obj, void (*destroy)(void*));
/// Destroys this place's instance of handle `id`; where it has none, bad_place_exception if `must_exist`, else nothing.
void place_local_erase(std::uint64_t id, bool must_exist);
/// Every place of ps a host place of this run, none twice (`what` names the operation in the exception).
void place_local_check(std::span<const place> ps, const char* what);
std::uint64_t place_local_new_id();
/// A new remote array of this place: `bytes` zero bytes aligned to `align` (at least 64; 2 MiB aligned and on
/// transparent huge pages from 2 MiB on), registered so that every copy into or out of it (a memcpy here or a bulk
/// transfer from another place) and its free are checked (arrays.cpp, array_registry.hpp).
array_token array_new(std::size_t bytes, std::size_t align);
/// Unregisters and frees the array that starts at addr, made with `serial` (0: any); illegal_operation_exception
/// naming the array and this place if there is none (freed twice, e.g. through a copy of the remote_array, or never
/// made by make_remote_array).
void array_delete(std::uintptr_t addr, std::uint32_t serial);
/// Bytes [addr, addr + bytes) lie inside one live array of this place, the one made with `serial` unless that is 0;
/// illegal_operation_exception naming the range and this place if not (the array was freed, or the token forged).
void check_live_array(const char* what, std::uintptr_t addr, std::size_t bytes, std::uint32_t serial);
/// The caller may start a copy: an activity, not inside atomic/when or a kernel body (illegal_operation_exception),
/// wherever the arrays live (a copy between arrays of this host is a memmove, but still counted work).
void check_copy_caller(const char* what);
/// Bulk copies to/from an array (made with `serial`) of another host place, counted by the caller's innermost
/// finish (dist_copy.cpp).
void put_bytes(place p, std::uintptr_t to, std::uint32_t serial, std::span<const std::byte> data);
void get_bytes(place p, std::uintptr_t from, std::uint32_t serial, std::span<std::byte> into);
template <class T>
std::size_t array_bytes(std::size_t n) {
  if (n > std::numeric_limits<std::size_t>::max() / sizeof(T)) {
    throw std::length_error("apgas::make_remote_array: " + std::to_string(n) + " elements of " +
                            std::to_string(sizeof(T)) + " bytes do not fit in the address space");
  }
  return n * sizeof(T);
}
template <class T>
array_token new_array(std::size_t n) {
  const array_token t = array_new(array_bytes<T>(n), alignof(T));
  if constexpr (!std::is_trivially_default_constructible_v<T>) {
    try {
      std::uninitialized_value_construct_n(reinterpret_cast<T*>(t.addr), n);  // (destroys what it made on a throw)
    } catch (...) {
      array_delete(t.addr, t.serial);  // nothing kept: the caller never had the array
      throw;
    }
  }
  return t;
}
}  // namespace detail

/// A reference to an object at its home place. The object must outlive every use.
template <class T>
class global_ref {
 public:
  global_ref() = default;
  place home() const noexcept { return place(home_); }
  /// The object; only at home (bad_place_exception elsewhere).
  T& operator*() const {
    if (detail::g_here != home_) detail::not_at_home("apgas::global_ref", home_);
    return *reinterpret_cast<T*>(addr_);
  }
  T* operator->() const { return &**this; }
  friend bool operator==(const global_ref&, const global_ref&) = default;

 private:
  template <class U>
  friend global_ref<U> make_global_ref(U& object);
  int home_ = -1;
  std::uintptr_t addr_ = 0;
};

template <class T>
global_ref<T> make_global_ref(T& object) {
  global_ref<T> r;
  r.home_ = detail::here_id();
  r.addr_ = reinterpret_cast<std::uintptr_t>(&object);
  return r;
}

/// One instance of T per place of a group; operator* gives the calling place's instance.
template <class T>
class place_local_handle {
 public:
  place_local_handle() = default;
  /// This place's instance; bad_place_exception at a place that has none.
  T& operator*() const { return *static_cast<T*>(detail::place_local_get(id_)); }
  T* operator->() const { return &**this; }
  std::uint64_t id() const noexcept { return id_; }

 private:
  template <class U, class Init>
  friend place_local_handle<U> make_place_local(std::span<const place> ps, Init init);
  std::uint64_t id_ = 0;
};

/// Create, at every place of `ps` (host places of this run, each once: bad_place_exception or
/// illegal_operation_exception before anything is made), the instance init() returns (init runs at that place; it
/// is shipped like an async_at closure). Returns when every instance exists. If init throws anywhere, the exceptions
/// reach the caller (as from a finish) and the instances already made are destroyed: no handle, nothing left.
/// Instances never freed are destroyed at their place when the run ends, the last made first, after every activity
/// has ended: their destructors run outside any activity (they may not call what needs one: at, async, finish).
template <class T, class Init>
place_local_handle<T> make_place_local(std::span<const place> ps, Init init) {
  detail::check_shippable<Init>();
  detail::place_local_check(ps, "apgas::make_place_local");
  place_local_handle<T> h;
  h.id_ = detail::place_local_new_id();
  const std::uint64_t id = h.id_;
  try {
    finish([&] {
      for (place p : ps) {
        async_at(p, [id, init] {
          detail::place_local_put(id, new T(init()), [](void* o) { delete static_cast<T*>(o); });
        });
      }
    });
  } catch (...) {
    try {  // (a place that could not make its instance has none: nothing to destroy there)
      finish([&] {
        for (place p : ps) async_at(p, [id] { detail::place_local_erase(id, false); });
      });
    } catch (...) {  // (a place that died meanwhile: its instances went with it)
    }
    throw;
  }
  return h;
}

/// Destroy the instances of `h` at every place of `ps` (checked as for make_place_local). A place without an instance (the handle freed there
/// already, or never made there) is an error: bad_place_exception from that place, in the finish's exceptions; the
/// instances at the other places are destroyed all the same.
template <class T>
void free_place_local(place_local_handle<T> h, std::span<const place> ps) {
  detail::place_local_check(ps, "apgas::free_place_local");
  const std::uint64_t id = h.id();
  finish([&] {
    for (place p : ps) async_at(p, [id] { detail::place_local_erase(id, true); });
  });
}

/// An array of n T that lives at a place. T must be trivially copyable.
template <class T>
class remote_array {
  static_assert(std::is_trivially_copyable_v<T>, "apgas::remote_array<T>: T must be trivially copyable");

 public:
  remote_array() = default;
  place home() const noexcept { return place(home_); }
  APGAS_DETAIL_HD std::size_t size() const noexcept { return n_; }
  /// The elements; only at home (bad_place_exception elsewhere). In a kernel body running on a GPU place (device
  /// code) the array must live at that GPU place; there the check is skipped.
  APGAS_DETAIL_HD T* data() const {
#if defined(__CUDA_ARCH__)
    return reinterpret_cast<T*>(addr_);
#else
    if (detail::g_here != home_) detail::not_at_home("apgas::remote_array", home_);
    return reinterpret_cast<T*>(addr_);
#endif
  }
  APGAS_DETAIL_HD T& operator[](std::size_t i) const { return data()[i]; }
  /// The address token (meaningful only at home).
  std::uintptr_t token() const noexcept { return addr_; }
  /// The array's serial at its home: every copy, check and free through this handle is refused once its array was
  /// freed, even where another array was made at the same address since (the address alone named that one). 0 for a
  /// handle made by from_token without a serial: checked by address range only.
  std::uint32_t serial() const noexcept { return serial_; }
  static remote_array from_token(int home, std::uintptr_t addr, std::size_t n, std::uint32_t serial = 0) noexcept {
    remote_array a;
    a.home_ = home;
    a.serial_ = serial;
    a.addr_ = addr;
    a.n_ = n;
    return a;
  }

 private:
  int home_ = -1;
  std::uint32_t serial_ = 0;  // (in what was padding: the handle stays 24 bytes)
  std::uintptr_t addr_ = 0;
  std::size_t n_ = 0;
};

namespace detail {
template <class T>
void check_range(const char* what, std::size_t off, std::size_t n, std::size_t size) {
  if (off > size || n > size - off) {
    // [off, off + n) as a range only where off + n does not wrap around (an offset near SIZE_MAX)
    const std::string range = n <= std::numeric_limits<std::size_t>::max() - off
                                  ? "elements [" + std::to_string(off) + ", " + std::to_string(off + n) + ")"
                                  : std::to_string(n) + " elements from offset " + std::to_string(off);
    throw bad_place_exception(std::string(what) + ": " + range + " are outside the array of " + std::to_string(size));
  }
}
/// A copy within one array at a GPU place: the two ranges must not overlap (the driver's device copies leave that
/// undefined, and an overlapping copy could silently give different results on a GPU than at a host place).
template <class T>
void check_gpu_overlap(const char* what, place home, std::uintptr_t src, std::uintptr_t dst, std::size_t src_off,
                       std::size_t dst_off, std::size_t n) {
  if (n == 0 || !home.is_cuda() || src != dst) return;
  if (src_off < dst_off + n && dst_off < src_off + n) {
    throw illegal_operation_exception(std::string(what) + ": elements [" + std::to_string(src_off) + ", " +
                                      std::to_string(src_off + n) + ") and [" + std::to_string(dst_off) + ", " +
                                      std::to_string(dst_off + n) + ") of one array at GPU place " +
                                      std::to_string(home.id()) +
                                      " overlap (allowed at a host place only; copy through a second array)");
  }
}
/// The home of an array an operation was given must be a place of this run (a token forged, or kept from another
/// run, is refused before anything is counted or sent).
inline void check_home(const char* what, place p) {
  const std::size_t n = all_places().size();
  if (p.id() < 0 || static_cast<std::size_t>(p.id()) >= n) {
    throw bad_place_exception(std::string(what) + ": the array's home, place " + std::to_string(p.id()) +
                              ", is no place of this run (ids 0.." + std::to_string(n - 1) + ")");
  }
}
/// n zero-filled elements at p: host memory at a host place, device memory at a GPU place (allocated by its host).
template <class T>
array_token alloc_array(place p, std::size_t n) {
  check_place(p, "apgas::make_remote_array");
  if (p.is_cuda()) {
    const int gpu = p.id();
    const std::size_t bytes = array_bytes<T>(n);
    return at(p.parent(), [gpu, bytes] { return gpu_alloc(place(gpu), bytes); });
  }
  return at(p, [n] { return new_array<T>(n); });
}
}  // namespace detail

/// n zero-filled elements at p (a host place or a GPU place); at a host place a T that is not trivially
/// default-constructible is value-initialised instead (its default member initialisers apply). An array at a GPU
/// place that is not freed by the end of the run is freed then (its handles are refused in a later run).
template <class T>
remote_array<T> make_remote_array(place p, std::size_t n) {
  const detail::array_token t = detail::alloc_array<T>(p, n);
  return remote_array<T>::from_token(p.id(), t.addr, n, t.serial);
}

/// n copies of value at p.
template <class T>
remote_array<T> make_remote_array(place p, std::size_t n, const T& value) {
  detail::check_place(p, "apgas::make_remote_array");
  if (p.is_cuda()) {
    remote_array<T> a = make_remote_array<T>(p, n);
    const std::vector<T> v(n, value);
    finish([&] { async_copy(std::span<const T>(v), a); });
    return a;
  }
  const detail::array_token a = at(
      p,
      [n](T v) {
        const detail::array_token a = detail::new_array<T>(n);
        T* d = reinterpret_cast<T*>(a.addr);
        for (std::size_t i = 0; i < n; ++i) d[i] = v;
        return a;
      },
      value);
  return remote_array<T>::from_token(p.id(), a.addr, n, a.serial);
}

/// A clone of init at p.
template <class T>
remote_array<T> make_remote_array(place p, std::span<const T> init) {
  detail::check_place(p, "apgas::make_remote_array");
  const std::size_t n = init.size();
  if (p.is_cuda()) {
    remote_array<T> a = make_remote_array<T>(p, n);
    finish([&] { async_copy(init, a); });
    return a;
  }
  const detail::array_token a = at(
      p,
      [n](span_view<T> v) {
        const detail::array_token a = detail::new_array<T>(n);
        if (n != 0) std::memcpy(reinterpret_cast<T*>(a.addr), v.data.data(), n * sizeof(T));
        return a;
      },
      span_view<T>{init});
  return remote_array<T>::from_token(p.id(), a.addr, n, a.serial);
}

/// n elements at p, written at the caller by fill(std::span<T>) over n value-initialised elements: straight into the
/// array where p is the caller's own host place (no buffer, no copy), else into a buffer of the caller that is then
/// copied to p. If fill throws, nothing is left allocated and the exception propagates. fill names its parameter's
/// type (std::span<T>): a generic lambda is taken for the generator form below.
template <class T, class Fill>
  requires(!std::is_invocable_v<Fill&, std::size_t> && std::is_invocable_v<Fill&, std::span<T>>)
remote_array<T> make_remote_array(place p, std::size_t n, Fill fill) {
  detail::check_place(p, "apgas::make_remote_array");
  (void)detail::array_bytes<T>(n);  // a size past the address space: the same error on both paths
  if (detail::is_here(p)) {  // (a GPU place is never the caller's host place)
    remote_array<T> a = make_remote_array<T>(p, n);
    try {
      fill(std::span<T>(a.data(), n));
    } catch (...) {
      free_remote_array(a);
      throw;
    }
    return a;
  }
  if constexpr (std::is_trivially_default_constructible_v<T> && std::is_trivially_copyable_v<T>) {
    // Value-initialised, such elements are zero bytes (but a pointer to member, which no array holds): calloc's
    // large blocks come zeroed from the OS, so the fill touches the buffer once (a std::vector writes it first).
    const std::unique_ptr<T[], void (*)(void*)> v(static_cast<T*>(std::calloc(n == 0 ? 1 : n, sizeof(T))),
                                                  &std::free);
    if (!v) throw std::bad_alloc();
    fill(std::span<T>(v.get(), n));
    return make_remote_array(p, std::span<const T>(v.get(), n));
  } else {
    std::vector<T> v(n);
    fill(std::span<T>(v));
    return make_remote_array(p, std::span<const T>(v));
  }
}

/// n elements gen(i) at p; gen is evaluated at the caller, once per element in order i = 0, 1, ..., n - 1 (so it may
/// keep state); as the fill form above: straight into the array where p is the caller's own host place.
template <class T, class Gen>
  requires std::is_invocable_r_v<T, Gen&, std::size_t>
remote_array<T> make_remote_array(place p, std::size_t n, Gen gen) {
  return make_remote_array<T>(p, n, [&gen](std::span<T> out) {
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = gen(i);
  });
}

/// Free the array at its home; a becomes empty. The array must not be in use (no kernel or copy in flight). Freeing
/// it again, or copying through a copy of the remote_array kept from before, is an illegal_operation_exception
/// naming the array and its home, also once a new array was made at the same address (remote_array::serial).
template <class T>
void free_remote_array(remote_array<T>& a) {
  if (a.token() == 0) return;
  const std::uintptr_t addr = a.token();
  const std::uint32_t serial = a.serial();
  const place home = a.home();
  if (home.is_cuda()) {
    const int gpu = home.id();
    at(home.parent(), [gpu, addr, serial] { detail::gpu_free(place(gpu), addr, serial); });
  } else {
    at(home, [addr, serial] {
      detail::array_delete(addr, serial);  // (T is trivially copyable: nothing to destroy)
    });
  }
  a = remote_array<T>();
}

namespace detail {
/// Largest piece of a copy to or from another host's GPU that travels in one message.
inline constexpr std::size_t routed_copy_bytes = std::size_t{64} << 20;
}  // namespace detail

/// Copy src into dst[dst_off..]; counted by the enclosing finish: dst holds the data once it ends. src must stay
/// alive and unchanged until then (the bytes may be read straight from it while the copy is in flight). dst may live
/// at any place: this host (memcpy), another host (a bulk transfer), a GPU of this host (the DMA-slice spooler, or
/// one DMA from pinned memory), a GPU of another host (sent to that host, then copied there).
template <class T>
void async_copy(std::span<const T> src, remote_array<T> dst, std::size_t dst_off = 0) {
  detail::check_copy_caller("apgas::async_copy");
  detail::check_range<T>("apgas::async_copy", dst_off, src.size(), dst.size());
  if (src.empty()) return;
  const place home = dst.home();
  detail::check_home("apgas::async_copy", home);
  const std::uintptr_t to = dst.token() + dst_off * sizeof(T);
  if (home.is_cuda()) {
    if (detail::is_here(home.parent())) {
      detail::gpu_put(home, to, dst.serial(), src.data(), src.size_bytes());
      return;
    }
    const std::size_t piece = std::max<std::size_t>(1, detail::routed_copy_bytes / sizeof(T));
    for (std::size_t off = 0; off < src.size(); off += piece) {
      const std::size_t at_off = dst_off + off;
      async_at(
          home.parent(),
          [dst, at_off](span_view<T> v) { finish([&] { async_copy(v.data, dst, at_off); }); },
          span_view<T>{src.subspan(off, std::min(piece, src.size() - off))});
    }
    return;
  }
  if (home == here()) {
    detail::check_live_array("apgas::async_copy", to, src.size_bytes(), dst.serial());
    std::memmove(reinterpret_cast<T*>(to), src.data(), src.size_bytes());  // (from the same array: may overlap)
    return;
  }
  detail::put_bytes(home, to, dst.serial(), std::as_bytes(src));
}

/// Copy src[src_off .. src_off + dst.size()) into dst, a span at the calling place; counted by the enclosing
/// finish (dst must stay alive, and is complete, when it ends). src may live at any place (see above).
template <class T>
void async_copy(remote_array<T> src, std::size_t src_off, std::span<T> dst) {
  detail::check_copy_caller("apgas::async_copy");
  detail::check_range<T>("apgas::async_copy", src_off, dst.size(), src.size());
  if (dst.empty()) return;
  const place home = src.home();
  detail::check_home("apgas::async_copy", home);
  const std::uintptr_t from = src.token() + src_off * sizeof(T);
  if (home.is_cuda()) {
    if (detail::is_here(home.parent())) {
      detail::gpu_get(home, dst.data(), from, src.serial(), dst.size_bytes());
      return;
    }
    const std::size_t piece = std::max<std::size_t>(1, detail::routed_copy_bytes / sizeof(T));
    for (std::size_t off = 0; off < dst.size(); off += piece) {
      const std::size_t n = std::min(piece, dst.size() - off);
      const std::size_t at_off = src_off + off;
      T* out = dst.data() + off;
      async([src, at_off, n, out] {  // stage at the GPU's host, bring the bytes back with the reply
        const std::vector<T> v = at(src.home().parent(), [src, at_off, n] {
          std::vector<T> tmp(n);
          finish([&] { async_copy(src, at_off, std::span<T>(tmp)); });
          return tmp;
        });
        std::memcpy(out, v.data(), n * sizeof(T));
      });
    }
    return;
  }
  if (home == here()) {
    detail::check_live_array("apgas::async_copy", from, dst.size_bytes(), src.serial());
    std::memmove(dst.data(), reinterpret_cast<const T*>(from), dst.size_bytes());
    return;
  }
  detail::get_bytes(home, from, src.serial(), std::as_writable_bytes(dst));
}

/// Copy n elements between two arrays (any places); counted by the enclosing finish. Runs at src's host: GPU to
/// GPU of one host is a peer copy (staged by the driver where peer access is impossible); anything else goes
/// through host memory there. Within one array at a host place the two ranges may overlap (as memmove: a halo
/// shifted in place); within one array at a GPU place they must not (the driver's copies leave that undefined):
/// illegal_operation_exception.
template <class T>
void async_copy(remote_array<T> src, std::size_t src_off, remote_array<T> dst, std::size_t dst_off, std::size_t n) {
  detail::check_copy_caller("apgas::async_copy");
  detail::check_range<T>("apgas::async_copy", src_off, n, src.size());
  detail::check_range<T>("apgas::async_copy", dst_off, n, dst.size());
  if (n == 0) return;
  const place src_home = src.home();
  const place dst_home = dst.home();
  detail::check_home("apgas::async_copy", src_home);
  detail::check_home("apgas::async_copy", dst_home);
  detail::check_gpu_overlap<T>("apgas::async_copy", src_home, src.token(), dst.token(), src_off, dst_off, n);
  if (!detail::is_here(src_home.parent())) {
    async_at(src_home.parent(), [src, src_off, dst, dst_off, n] { async_copy(src, src_off, dst, dst_off, n); });
    return;
  }
  const std::uintptr_t from = src.token() + src_off * sizeof(T);
  if (!src_home.is_cuda()) {
    detail::check_live_array("apgas::async_copy", from, n * sizeof(T), src.serial());
    async_copy(std::span<const T>(reinterpret_cast<const T*>(from), n), dst, dst_off);
    return;
  }
  const std::uintptr_t to = dst.token() + dst_off * sizeof(T);
  if (dst_home.is_cuda() && detail::is_here(dst_home.parent())) {
    detail::gpu_copy(src_home, from, src.serial(), dst_home, to, dst.serial(), n * sizeof(T));
  } else if (dst_home == here()) {
    detail::check_live_array("apgas::async_copy", to, n * sizeof(T), dst.serial());  // (the GPU writes there)
    detail::gpu_get(src_home, reinterpret_cast<T*>(to), from, src.serial(), n * sizeof(T));
  } else {
    async([src, src_off, dst, dst_off, n] {  // GPU here -> another host: through host memory here
      std::vector<T> tmp(n);
      finish([&] { async_copy(src, src_off, std::span<T>(tmp)); });
      finish([&] { async_copy(std::span<const T>(tmp), dst, dst_off); });
    });
  }
}

}  // namespace apgas
#pragma GCC visibility pop
