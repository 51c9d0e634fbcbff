// The logical place tree. Built once at start-up (runtime.cpp) and read-only during a run; outside a run it
// describes one host with no accelerators.
#include "runtime.hpp"
#include "scheduler.hpp"

#include <apgas/detail/remote.hpp>
#include <apgas/error.hpp>
#include <apgas/global.hpp>  // (detail::here_id)
#include <apgas/place.hpp>

#include <string>
#include <utility>

namespace apgas {
namespace detail {
namespace {
place_tree g_tree = place_tree::single_host();
}

place_tree place_tree::single_host() {
  place_tree t;
  t.num_hosts = 1;
  t.here_host = 0;
  t.all.push_back(place(0));
  t.children.emplace_back();
  t.description.emplace_back("host");
  return t;
}

const place_tree& tree() noexcept { return g_tree; }
void set_tree(place_tree t) { g_tree = std::move(t); }

}  // namespace detail

bool place::is_host() const noexcept { return id_ >= 0 && id_ < detail::tree().num_hosts; }

bool place::is_cuda() const noexcept {
  const auto& t = detail::tree();
  return id_ >= t.num_hosts && id_ < static_cast<int>(t.all.size());
}

place place::parent() const noexcept {
  const auto& t = detail::tree();
  if (is_cuda()) return place(t.parent_of[static_cast<std::size_t>(id_ - t.num_hosts)]);
  return *this;
}

std::span<const place> place::children() const noexcept {
  if (!is_host()) return {};
  return detail::tree().children[static_cast<std::size_t>(id_)];
}

place here() {
  detail::require_activity("apgas::here");
  return place(detail::tree().here_host);
}

namespace detail {
int g_here = no_run;

// here().id() in one call less (global_ref's making, not_at_home's message, the registry's reports).
int here_id() {
  require_activity("apgas::here");
  return tree().here_host;
}
}  // namespace detail

std::span<const place> places() noexcept {
  const auto& t = detail::tree();
  return std::span<const place>(t.all).first(static_cast<std::size_t>(t.num_hosts));
}

std::span<const place> all_places() noexcept { return detail::tree().all; }

int num_hosts() noexcept { return detail::tree().num_hosts; }

std::string describe(place p) {
  const auto& t = detail::tree();
  detail::check_place(p, "apgas::describe");
  return t.description[static_cast<std::size_t>(p.id())];
}

place place_of(int id) {
  detail::check_place(place(id), "apgas::place_of");
  return place(id);
}

namespace detail {

void check_place(place p, const char* what) {
  const std::size_t n = tree().all.size();
  if (p.id() < 0 || static_cast<std::size_t>(p.id()) >= n) {
    throw bad_place_exception(std::string(what) + ": no place with id " + std::to_string(p.id()) + " (there are " +
                              std::to_string(n) + " places, ids 0.." + std::to_string(n - 1) + ")");
  }
}

bool check_at_target(place p) {
  const auto& t = tree();
  check_place(p, "apgas::at/async_at");
  require_unrestricted_activity("apgas::at/async_at");
  if (p.is_cuda()) {
    throw illegal_operation_exception("apgas: place " + std::to_string(p.id()) +
                                      " is a GPU place: only kernel closures (apgas::cuda_kernel) run there");
  }
  return p.id() == t.here_host;
}

bool is_here(place p) noexcept { return p.id() == tree().here_host; }

}  // namespace detail
}  // namespace apgas
