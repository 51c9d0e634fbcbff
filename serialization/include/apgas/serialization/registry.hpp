#pragma once
#pragma GCC visibility push(default)  // libapgas exports what its public headers declare (docs/building.md)
/// @file registry.hpp
/// Ids for things that travel by name rather than by address: closure invokers, exception types, message kinds.
///
/// Every shipped closure type registers one entry (a function pointer in *this* process and its type name) during
/// static initialisation. Ids are assigned when the runtime starts (seal()): entries sorted by name, ties kept in
/// registration order — the same in every process of one binary. The fingerprint (a hash of the sorted names and
/// of the build) is compared between peers at start-up, so a peer running another binary is refused before any
/// closure id is interpreted. Only ids travel; a function pointer never does.

#include <apgas/error.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace apgas::ser {

class registry {
 public:
  using fn = void (*)();  // cast to the entry's real signature by its user

  /// Called during static initialisation; returns a handle (not the id) valid for id_of().
  static std::size_t add(const char* name, fn f) noexcept;
  /// Assign ids (idempotent). Called by the runtime at start-up, after static initialisation.
  static void seal();
  /// The wire id of the entry with this handle (seal() must have run).
  static std::uint32_t id_of(std::size_t handle) noexcept;
  /// The function of a wire id; serialization_error naming the id and the number of entries if unknown.
  static fn lookup(std::uint32_t id);
  /// The name of a wire id's entry (its type's typeid name), or null if unknown.
  static const char* name_of(std::uint32_t id) noexcept;
  static std::size_t size() noexcept;
  /// A hash of every entry's name, in id order, and of the compiler and build; equal only for the same binary.
  static std::uint64_t fingerprint();
};

/// A stable 64-bit FNV-1a hash.
constexpr std::uint64_t fnv1a(const char* s, std::uint64_t h = 1469598103934665603ull) noexcept {
  for (; *s != '\0'; ++s) {
    h ^= static_cast<unsigned char>(*s);
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace apgas::ser
#pragma GCC visibility pop
