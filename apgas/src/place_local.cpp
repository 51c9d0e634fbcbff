// Global data at this place (global.hpp): the table of place_local_handle instances (id -> object) and the check
// that names the home of a global_ref or remote_array used elsewhere (not_at_home).
#include "runtime.hpp"

#include <apgas/error.hpp>
#include <apgas/global.hpp>
#include <apgas/place.hpp>

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

// ---- global data (global.hpp) ----
namespace apgas {
namespace detail {
namespace {
struct place_local_table {
  std::mutex mutex;
  std::unordered_map<std::uint64_t, std::pair<void*, void (*)(void*)>> objects;
  std::uint64_t next = 1;
};
place_local_table& locals() {
  static place_local_table t;
  return t;
}
}  // namespace

void not_at_home(const char* what, int home) {
  throw bad_place_exception(std::string(what) + ": the data lives at place " + std::to_string(home) +
                            " and is used at place " + std::to_string(here_id()) +
                            " (go there with at/async_at, or copy it with async_copy)");
}

std::uint64_t place_local_new_id() {
  auto& t = locals();
  std::lock_guard lock(t.mutex);
  // Unique across places: the creating place in the top bits.
  return (static_cast<std::uint64_t>(here_id()) << 40) | t.next++;
}

void place_local_put(std::uint64_t id, void* obj, void (*destroy)(void*)) {
  auto& t = locals();
  std::pair<void*, void (*)(void*)> old{nullptr, nullptr};
  {
    std::lock_guard lock(t.mutex);
    auto& slot = t.objects[id];
    old = slot;
    slot = {obj, destroy};
  }
  if (old.first != nullptr) old.second(old.first);
}

namespace {
[[noreturn]] void no_instance(std::uint64_t id, const char* what, const char* why) {
  if (id == 0) {
    throw bad_place_exception(std::string(what) + ": a default-constructed place_local_handle names no instance (make "
                              "one with apgas::make_place_local)");
  }
  throw bad_place_exception(std::string(what) + ": place " + std::to_string(here().id()) + " has no instance of handle " +
                            std::to_string(id) + " " + why);
}
}  // namespace

void place_local_check(std::span<const place> ps, const char* what) {
  std::vector<bool> seen(all_places().size(), false);
  for (const place p : ps) {
    check_place(p, what);
    if (!p.is_host()) {
      throw illegal_operation_exception(std::string(what) + ": place " + std::to_string(p.id()) +
                                        " is a GPU place; place-local instances live at host places (apgas::places())");
    }
    if (seen[static_cast<std::size_t>(p.id())]) {
      throw illegal_operation_exception(std::string(what) + ": place " + std::to_string(p.id()) +
                                        " is given twice (one instance per place)");
    }
    seen[static_cast<std::size_t>(p.id())] = true;
  }
}

void* place_local_get(std::uint64_t id) {
  auto& t = locals();
  std::lock_guard lock(t.mutex);
  auto it = t.objects.find(id);
  if (it == t.objects.end()) {
    no_instance(id, "apgas::place_local_handle",
                "(it was not among the places given to make_place_local, or it was freed)");
  }
  return it->second.first;
}

void place_local_erase(std::uint64_t id, bool must_exist) {
  auto& t = locals();
  std::pair<void*, void (*)(void*)> old{nullptr, nullptr};
  {
    std::lock_guard lock(t.mutex);
    auto it = t.objects.find(id);
    if (it == t.objects.end()) {  // freed twice, or a place the handle was never made at: nothing to destroy
      if (!must_exist) return;
      no_instance(id, "apgas::free_place_local",
                  "to free (it was freed already, or the place was not among those given to make_place_local)");
    }
    old = it->second;
    t.objects.erase(it);
  }
  old.second(old.first);
}

void place_local_end_of_run() noexcept {
  auto& t = locals();
  std::vector<std::pair<std::uint64_t, std::pair<void*, void (*)(void*)>>> left;
  {
    std::lock_guard lock(t.mutex);
    left.assign(t.objects.begin(), t.objects.end());
    t.objects.clear();
  }
  // The last made first (ids grow at each place; those made by other places come after this place's own).
  std::sort(left.begin(), left.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  for (auto& [id, obj] : left) obj.second(obj.first);
}
}  // namespace detail

}  // namespace apgas
