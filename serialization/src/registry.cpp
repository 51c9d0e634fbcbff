#include <apgas/serialization/registry.hpp>

#include <algorithm>
#include <mutex>
#include <numeric>

namespace apgas::ser {
namespace {

struct entry {
  const char* name;
  registry::fn f;
};

// Function-local statics: usable from other translation units' static initialisers in any order.
struct state {
  std::mutex mutex;
  std::vector<entry> entries;            // by handle (registration order)
  std::vector<std::uint32_t> id_of;      // handle -> id
  std::vector<std::size_t> by_id;        // id -> handle
  bool sealed = false;
};
state& the_state() noexcept {
  static state s;
  return s;
}

}  // namespace

std::size_t registry::add(const char* name, fn f) noexcept {
  state& s = the_state();
  std::lock_guard lock(s.mutex);
  s.entries.push_back({name, f});
  s.sealed = false;  // a late registration (a library loaded afterwards) is picked up by the next seal()
  return s.entries.size() - 1;
}

void registry::seal() {
  state& s = the_state();
  std::lock_guard lock(s.mutex);
  if (s.sealed) return;
  s.by_id.resize(s.entries.size());
  std::iota(s.by_id.begin(), s.by_id.end(), std::size_t{0});
  std::stable_sort(s.by_id.begin(), s.by_id.end(), [&](std::size_t a, std::size_t b) {
    return std::string_view(s.entries[a].name) < std::string_view(s.entries[b].name);
  });
  s.id_of.assign(s.entries.size(), 0);
  for (std::size_t id = 0; id < s.by_id.size(); ++id) s.id_of[s.by_id[id]] = static_cast<std::uint32_t>(id);
  s.sealed = true;
}

std::uint32_t registry::id_of(std::size_t handle) noexcept {
  state& s = the_state();
  if (!s.sealed) seal();
  return s.id_of[handle];
}

registry::fn registry::lookup(std::uint32_t id) {
  state& s = the_state();
  if (id >= s.by_id.size()) {
    throw serialization_error("apgas: unknown closure id " + std::to_string(id) + " (this binary registers " +
                              std::to_string(s.by_id.size()) + " closures, ids 0.." +
                              std::to_string(s.by_id.empty() ? 0 : s.by_id.size() - 1) + ")");
  }
  return s.entries[s.by_id[id]].f;
}

const char* registry::name_of(std::uint32_t id) noexcept {
  state& s = the_state();
  return id < s.by_id.size() ? s.entries[s.by_id[id]].name : nullptr;
}

std::size_t registry::size() noexcept { return the_state().entries.size(); }

std::uint64_t registry::fingerprint() {
  seal();
  state& s = the_state();
  std::uint64_t h = fnv1a(__VERSION__);
  h = fnv1a(__DATE__ __TIME__, h);  // this library's build
  for (std::size_t id : s.by_id) {
    h = fnv1a(s.entries[id].name, h);
    h = fnv1a("|", h);
  }
  return h ^ s.by_id.size();
}

}  // namespace apgas::ser
