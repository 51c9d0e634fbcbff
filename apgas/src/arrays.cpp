// The remote arrays whose home is this place: their memory, and the registry that bounds-checks every copy into or
// out of one (a memcpy here or a bulk transfer from another place, dist_copy.cpp) and every free, and refuses a handle
// whose array was freed even where another was made at its address since (array_registry.hpp: the serial).
//
// Memory: arrays below 2 MiB come from the C library (64-byte aligned, zero-filled); larger ones are mapped whole,
// 2 MiB aligned, and marked for transparent huge pages (MADV_HUGEPAGE: the kernel's default "madvise" mode then backs
// them with 2 MiB pages). A kernel that walks a volume plane by plane touches a new 4 KiB page every few rows; with
// 4 KiB pages the TLB misses cost the 3-D finite difference 1.15x (decision 0017). Every page is touched when the
// array is made, as the zero-fill of a small one is, so that a program's first use of it does not pay the faults.
#include "array_registry.hpp"
#include "dist_state.hpp"
#include "scheduler.hpp"

#include <apgas/error.hpp>
#include <apgas/global.hpp>

#include <sys/mman.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <new>
#include <string>
#include <system_error>

namespace apgas::detail {
namespace {

constexpr std::size_t huge_page = std::size_t{2} << 20;

struct array_table {
  std::mutex mutex;
  array_registry arrays;  // the arrays whose home is this place
};
array_table& arrays() {
  static array_table t;
  return t;
}

std::string place_name(int place) { return "place " + std::to_string(place); }

// Memory the OS refused (errno err) for an array of `bytes`.
[[noreturn]] void refused(std::size_t bytes, int err) {
  throw out_of_memory("apgas::make_remote_array: the OS refused " + std::to_string(bytes) + " bytes at " +
                      place_name(here_id()) + " (" + std::system_category().message(err) + ")");
}

// A large array's mapping: whole huge pages, the first at a boundary of `align` (2 MiB or a larger power of two).
std::size_t mapped_bytes(std::size_t bytes) { return (bytes + huge_page - 1) / huge_page * huge_page; }

void* map_large(std::size_t bytes, std::size_t align) {
  const std::size_t len = mapped_bytes(bytes);
  // Map `align` more than needed and give back the parts before the first boundary and after the end.
  void* m = ::mmap(nullptr, len + align, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) refused(bytes, errno);
  const auto start = reinterpret_cast<std::uintptr_t>(m);
  const std::uintptr_t aligned = (start + align - 1) & ~(align - 1);
  if (aligned > start) ::munmap(m, aligned - start);
  const std::size_t tail = start + len + align - (aligned + len);
  if (tail > 0) ::munmap(reinterpret_cast<void*>(aligned + len), tail);
#ifdef MADV_HUGEPAGE
  (void)::madvise(reinterpret_cast<void*>(aligned), len, MADV_HUGEPAGE);  // a hint: without THP, 4 KiB pages
#endif
  // Touched now, as the zero-fill of a small array is: the page faults are the allocation's, not the first use's.
  volatile unsigned char* const bytes_at = reinterpret_cast<unsigned char*>(aligned);
  for (std::size_t off = 0; off < len; off += 4096) bytes_at[off] = 0;
  return reinterpret_cast<void*>(aligned);
}

// Gives back what array_new made for `bytes`: mapped from 2 MiB on, from the C library below.
void release(void* p, std::size_t bytes) noexcept {
  if (bytes >= huge_page) {
    ::munmap(p, mapped_bytes(bytes));
  } else {
    std::free(p);
  }
}
}  // namespace

// Called by the polling thread (no activity: the place is the process's rank).
std::span<std::byte> checked_array_range(std::uint64_t addr, std::uint64_t n, std::uint32_t serial) {
  {
    auto& t = arrays();
    std::lock_guard lock(t.mutex);
    t.arrays.check(static_cast<std::uintptr_t>(addr), n, serial, "apgas::async_copy", place_name(g_dist->rank));
  }
  return {reinterpret_cast<std::byte*>(addr), static_cast<std::size_t>(n)};
}

void check_copy_caller(const char* what) { (void)require_unrestricted_activity(what); }

void check_live_array(const char* what, std::uintptr_t addr, std::size_t bytes, std::uint32_t serial) {
  auto& t = arrays();
  std::lock_guard lock(t.mutex);
  t.arrays.check(addr, bytes, serial, what, place_name(here_id()));
}

array_token array_new(std::size_t bytes, std::size_t align) {
  void* p = nullptr;
  if (bytes > std::numeric_limits<std::size_t>::max() / 2) {  // (no rounding overflows below)
    throw std::length_error("apgas::make_remote_array: " + std::to_string(bytes) +
                            " bytes do not fit in the address space (at most " +
                            std::to_string(std::numeric_limits<std::size_t>::max() / 2) + ")");
  }
  if (bytes >= huge_page) {
    p = map_large(bytes, align > huge_page ? align : huge_page);  // zero pages
  } else {
    if (align < 64) align = 64;
    const std::size_t size = bytes == 0 ? align : (bytes + align - 1) / align * align;
    p = std::aligned_alloc(align, size);
    if (p == nullptr) refused(bytes, ENOMEM);  // (the alignment is valid: only memory can fail)
    std::memset(p, 0, size);
  }
  try {
    auto& t = arrays();
    std::lock_guard lock(t.mutex);
    return {reinterpret_cast<std::uintptr_t>(p), t.arrays.add(reinterpret_cast<std::uintptr_t>(p), bytes)};
  } catch (...) {  // (the registry's node could not be made)
    release(p, bytes);
    throw;
  }
}

void array_delete(std::uintptr_t addr, std::uint32_t serial) {
  std::size_t bytes = 0;
  {
    auto& t = arrays();
    std::lock_guard lock(t.mutex);
    bytes = t.arrays.remove(addr, serial, "apgas::free_remote_array", place_name(here_id()));
  }
  release(reinterpret_cast<void*>(addr), bytes);
}
}  // namespace apgas::detail
