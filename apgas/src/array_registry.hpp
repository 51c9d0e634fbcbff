#pragma once
// The live remote arrays of one memory: a host place's own (arrays.cpp), or a GPU place's, kept by its host (gpu.cpp).
// Each array is known by its base address, its size in bytes and a serial, which its remote_array handles carry.
//
// Invariants:
//  - Serials are never 0 and never repeat within a registry until 2^32 - 1 arrays later; 0 in a handle (a token made by
//    remote_array::from_token without one) means "check the address range only".
//  - A copy, a check or a free through a handle is accepted only if its range lies inside one live array and, unless
//    the handle's serial is 0, that array is the one the handle was made for: an address alone named whatever array
//    was made there after the handle's was freed, so a stale copy of a freed handle acted on the new array.
//  - Not thread-safe: the owner holds a lock around every call.
#include <apgas/error.hpp>

#include <cstdint>
#include <cstdio>
#include <map>
#include <string>

namespace apgas::detail {

class array_registry {
 public:
  /// `after`: the serials start after it (those of an earlier registry of the same memory are not given again).
  explicit array_registry(std::uint32_t after = 0) : next_(after) {}

  /// The last serial given (the constructor's `after` when none was).
  std::uint32_t last_serial() const noexcept { return next_; }

  /// f(base) for each live array.
  template <class F>
  void for_each(F f) const {
    for (const auto& [base, e] : arrays_) f(base);
  }

  /// Registers the array [base, base + bytes); returns its serial.
  std::uint32_t add(std::uintptr_t base, std::size_t bytes) {
    if (++next_ == 0) next_ = 1;
    arrays_[base] = entry{bytes, next_};
    return next_;
  }

  /// Unregisters the array at `base` made with `serial` (0: any); returns its size in bytes. Throws
  /// illegal_operation_exception (`what` and `where` name the operation and the memory) if there is none.
  std::size_t remove(std::uintptr_t base, std::uint32_t serial, const char* what, const std::string& where) {
    const std::size_t bytes = expect(base, serial, what, where);
    arrays_.erase(base);
    return bytes;
  }

  /// What remove checks, without removing: the array at `base` made with `serial` (0: any) is live; its size in bytes.
  std::size_t expect(std::uintptr_t base, std::uint32_t serial, const char* what, const std::string& where) const {
    const auto it = arrays_.find(base);
    if (it == arrays_.end() || (serial != 0 && it->second.serial != serial)) {
      throw illegal_operation_exception(std::string(what) + ": the remote_array at " + hex(base) + " of " + where +
                                        " is not live there (freed already, e.g. through a copy of the remote_array" +
                                        (it != arrays_.end() ? ", and another array made at its address since" : "") +
                                        ", or its token was not made by make_remote_array); nothing was freed");
    }
    return it->second.bytes;
  }

  /// Bytes [addr, addr + n) lie inside one live array, the one made with `serial` unless that is 0; else throws
  /// illegal_operation_exception naming the range and `where`.
  void check(std::uintptr_t addr, std::uint64_t n, std::uint32_t serial, const char* what,
             const std::string& where) const {
    auto it = arrays_.upper_bound(addr);
    if (it != arrays_.begin()) {
      --it;
      const std::uint64_t start = it->first, size = it->second.bytes;
      if (addr >= start && n <= size && addr - start <= size - n) {
        if (serial == 0 || it->second.serial == serial) return;
        throw illegal_operation_exception(std::string(what) + ": the " + std::to_string(n) + " bytes at " + hex(addr) +
                                          " of " + where +
                                          " belong to an array made after the remote_array's own was freed (a stale "
                                          "copy of a freed remote_array)");
      }
    }
    throw illegal_operation_exception(std::string(what) + ": the " + std::to_string(n) + " bytes at " + hex(addr) +
                                      " are not inside a live remote_array at " + where +
                                      " (it was freed, or its token was not made by make_remote_array)");
  }

 private:
  struct entry {
    std::size_t bytes;
    std::uint32_t serial;
  };
  static std::string hex(std::uint64_t v) {
    char buf[24];
    std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
    return buf;
  }
  std::map<std::uintptr_t, entry> arrays_;  // base -> entry (ordered: the range check)
  std::uint32_t next_ = 0;
};

}  // namespace apgas::detail
