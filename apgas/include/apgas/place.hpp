#pragma once
#pragma GCC visibility push(default)  // libapgas exports what its public headers declare (docs/building.md)
/// @file place.hpp
/// Places: where activities run and data lives. Host places (one per process) are 0..H-1; the GPU places of every
/// host come after all hosts. The tree is the same on every host and fixed for the duration of apgas::run.

#if __cplusplus < 202002L
#error "apgas needs C++20 or later: compile with -std=c++20 (or a later standard)"
#endif

#include <span>
#include <string>

namespace apgas {

/// A place: a small value type, cheap to copy and compare, trivially copyable (it may be captured by closures that
/// travel to other places).
class place {
 public:
  /// An invalid place (id -1). Using it anywhere raises bad_place_exception.
  constexpr place() noexcept = default;
  /// The place with this id. Not checked here: use place_of() for a checked lookup.
  constexpr explicit place(int id) noexcept : id_(id) {}

  constexpr int id() const noexcept { return id_; }
  /// True for host places (ids 0..H-1).
  bool is_host() const noexcept;
  /// True for GPU places.
  bool is_cuda() const noexcept;
  /// A GPU's host; a host is its own parent. An invalid place is its own parent.
  place parent() const noexcept;
  /// The GPU places of a host (empty for a GPU place, a host without GPUs, or an invalid place).
  std::span<const place> children() const noexcept;

  friend constexpr bool operator==(place, place) noexcept = default;

 private:
  int id_ = -1;
};

/// The place of the calling activity. Throws illegal_operation_exception outside apgas::run.
place here();
/// Host places, ids 0..H-1.
std::span<const place> places() noexcept;
/// Host places, then accelerator places.
std::span<const place> all_places() noexcept;
/// The place with this id; bad_place_exception (naming the id and the number of places) if there is none.
place place_of(int id);
/// Number of host places.
int num_hosts() noexcept;
/// What a place is, for people: "host <hostname>" for a host place; for a GPU place its device name, ordinal and
/// size ("NVIDIA H100 80GB HBM3 (device 0, 132 SMs, 79 GiB)"). bad_place_exception for an invalid place.
std::string describe(place p);

namespace detail {
/// bad_place_exception "<what>: no place with id I (there are N places, ids 0..N-1)" unless p is a place of this run:
/// the check of every operation given a place, naming the operation the caller called.
void check_place(place p, const char* what);
}  // namespace detail

}  // namespace apgas
#pragma GCC visibility pop
